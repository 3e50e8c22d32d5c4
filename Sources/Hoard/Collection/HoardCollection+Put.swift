internal import LMDB
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

// Puts of one model or many, each in three forms with the same options (the work of storing them
// is in HoardCollection+Storing.swift); when a record expires (`Expiry`).

extension HoardCollection {
    /// Stores `model` under its ID, replacing what was there, in a transaction of its own (which
    /// also rewrites the records waiting for a lazy migration).
    ///
    /// - Parameters:
    ///   - model: the model to store.
    ///   - expiry: when the record expires; the collection's time to live by default.
    ///   - tags: the record's tags, replacing those it had (`[]` removes them); `nil` leaves them
    ///     as they were. ``invalidate(tag:)-1cd3z`` removes every record that carries a tag.
    ///   - insertOnly: refuse to replace a stored record.
    ///   - announce: announce the change to the other replicas in the same transaction (the
    ///     store's outbox): they drop their copies and fetch the new value on their next read.
    ///     Read-through's own stores are never announced (replicas would invalidate each other's
    ///     fills in a loop).
    /// - Throws: ``HoardError/encoding(collection:key:underlying:)`` when the model cannot be
    ///   encoded, ``HoardError/invalidTag(collection:tag:reason:)`` for an empty tag or one longer
    ///   than 128 bytes of UTF-8, ``HoardError/alreadyStored(collection:key:)`` with `insertOnly`,
    ///   ``HoardError/storage(_:)`` when the storage fails (``StorageFailure/Kind/mapFull`` for a
    ///   full map). Nothing of the call is stored then.
    public func put(
        _ model: Model, expiry: Expiry = .collectionDefault, tags: [String]? = nil, insertOnly: Bool = false,
        announce: Bool = false
    ) throws {
        let start = monotonicNanoseconds()
        let request = try PutRequest(expiry, tags, insertOnly: insertOnly, announce: announce, collection: name)
        try store.writeLMDB { txn in
            try migratePending(in: txn)
            try put(model, request, in: txn)
        }
        state.metrics.putDuration.recordSince(start)
    }

    /// Stores `model` in `txn`, with the options of ``put(_:expiry:tags:insertOnly:announce:)-3byoj``.
    ///
    /// - Throws: as ``put(_:expiry:tags:insertOnly:announce:)-3byoj`` does; abort `txn` to undo
    ///   what it holds.
    public func put(
        _ model: Model, expiry: Expiry = .collectionDefault, tags: [String]? = nil, insertOnly: Bool = false,
        announce: Bool = false, in txn: borrowing WriteTransaction
    ) throws {
        let request = try PutRequest(expiry, tags, insertOnly: insertOnly, announce: announce, collection: name)
        try storageErrors { try put(model, request, in: txn.writing) }
    }

    /// Stores `model` as one write of the store's next group commit (see ``Store/write(_:)-9ctiz``),
    /// with the records a lazy migration remembered, and the options of ``put(_:expiry:tags:insertOnly:announce:)-3byoj``.
    ///
    /// - Throws: as the synchronous form does, or a failed commit's ``HoardError/storage(_:)`` (nothing of it stored).
    public func put(
        _ model: Model, expiry: Expiry = .collectionDefault, tags: [String]? = nil, insertOnly: Bool = false,
        announce: Bool = false
    ) async throws where Model: Sendable {
        let request = try PutRequest(expiry, tags, insertOnly: insertOnly, announce: announce, collection: name)
        try await store.submit(nested: false) { txn in
            try self.migratePending(in: txn)
            try self.put(model, request, in: txn)
        }
    }

    /// Stores `models` in one transaction of its own, as a batch: the clock is read once (the
    /// records share their write time, and an expiry `after` a duration counts from it), and
    /// generated code writes every payload into one buffer. The options are those of
    /// ``put(_:expiry:tags:insertOnly:announce:)-3byoj``, for every model.
    ///
    /// - Throws: as ``put(_:expiry:tags:insertOnly:announce:)-3byoj`` does; nothing of the call is
    ///   stored then.
    public func put(
        _ models: some Sequence<Model>, expiry: Expiry = .collectionDefault, tags: [String]? = nil,
        insertOnly: Bool = false, announce: Bool = false
    ) throws {
        let start = monotonicNanoseconds()
        let request = try PutRequest(expiry, tags, insertOnly: insertOnly, announce: announce, collection: name)
        try store.writeLMDB { txn in
            try migratePending(in: txn)
            try put(models, request, in: txn)
        }
        state.metrics.putDuration.recordSince(start)
    }

    /// Stores `models` in `txn` as a batch (see ``put(_:expiry:tags:insertOnly:announce:)-(Sequence<Model>,_,_,_,_)``).
    /// With `insertOnly`, what the call stored before a taken ID stays in `txn`.
    ///
    /// - Throws: as ``put(_:expiry:tags:insertOnly:announce:)-3byoj`` does; abort `txn` to undo
    ///   what it holds.
    public func put(
        _ models: some Sequence<Model>, expiry: Expiry = .collectionDefault, tags: [String]? = nil,
        insertOnly: Bool = false, announce: Bool = false, in txn: borrowing WriteTransaction
    ) throws {
        let request = try PutRequest(expiry, tags, insertOnly: insertOnly, announce: announce, collection: name)
        try storageErrors { try put(models, request, in: txn.writing) }
    }

    /// Stores `models` together, as one write of the store's next group commit: all or none.
    ///
    /// - Throws: as the synchronous form does, or a failed commit's ``HoardError/storage(_:)`` (nothing of it stored).
    public func put(
        _ models: [Model], expiry: Expiry = .collectionDefault, tags: [String]? = nil, insertOnly: Bool = false,
        announce: Bool = false
    ) async throws where Model: Sendable {
        let request = try PutRequest(expiry, tags, insertOnly: insertOnly, announce: announce, collection: name)
        try await store.submit(nested: false) { txn in
            try self.migratePending(in: txn)
            try self.put(models, request, in: txn)
        }
    }
}

/// When a stored record stops being visible (records keep it to the millisecond).
public enum Expiry: Sendable, Hashable {
    /// The collection's time to live, if it has one, else never.
    case collectionDefault
    /// Never.
    case never
    /// At a point in time.
    case at(Date)
    /// After a duration from the write (a bulk put's records share one write time).
    case after(Duration)
}
