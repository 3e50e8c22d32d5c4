internal import LMDB
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
internal import CBOR

// Writing: puts of one model or many (a bulk put shares its clock read and emit buffer), deletes,
// and purging expired records.

/// What the records of one put call share. Outside the generic collection, so that a put moves it
/// without asking the runtime for its generic type's metadata (as a member of `HoardCollection<Model>`,
/// it did once it held more than one reference: a few hundred instructions a put).
private struct PutBatch {
    let header: RecordHeader
    let options: PutOptions
    /// What storing each record needs: the writer's, lent (the writer itself, which its finish
    /// changes, stays apart).
    let storing: RecordStoring
}

/// The options of one put call, checked once (its tags normalized) for every form of the call.
struct PutRequest {
    let expiry: Expiry
    let tags: [[UInt8]]?
    let insertOnly: Bool
    var announce: Bool

    init(expiry: Expiry, tags: [String]?, insertOnly: Bool, announce: Bool, collection: String) throws {
        self.expiry = expiry
        self.tags = try tags.map { try TagIndex.normalized($0, collection: collection) }
        self.insertOnly = insertOnly
        self.announce = announce
    }

    init(expiry: Expiry, tags: [[UInt8]]? = nil) {
        self.expiry = expiry
        self.tags = tags
        insertOnly = false
        announce = false
    }
}

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
        let request = try PutRequest(
            expiry: expiry, tags: tags, insertOnly: insertOnly, announce: announce, collection: name)
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
        let request = try PutRequest(
            expiry: expiry, tags: tags, insertOnly: insertOnly, announce: announce, collection: name)
        try storageErrors { try put(model, request, in: txn.writing) }
    }

    /// Stores `model` as one write of the store's next group commit (see ``Store/write(_:)-9ctiz``),
    /// with the records a lazy migration remembered, and the options of ``put(_:expiry:tags:insertOnly:announce:)-3byoj``.
    ///
    /// - Throws: as the synchronous form does, or the ``HoardError/storage(_:)`` of a commit that
    ///   failed (then nothing of the batch is stored).
    public func put(
        _ model: Model, expiry: Expiry = .collectionDefault, tags: [String]? = nil, insertOnly: Bool = false,
        announce: Bool = false
    ) async throws where Model: Sendable {
        let request = try PutRequest(
            expiry: expiry, tags: tags, insertOnly: insertOnly, announce: announce, collection: name)
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
        let request = try PutRequest(
            expiry: expiry, tags: tags, insertOnly: insertOnly, announce: announce, collection: name)
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
        let request = try PutRequest(
            expiry: expiry, tags: tags, insertOnly: insertOnly, announce: announce, collection: name)
        try storageErrors { try put(models, request, in: txn.writing) }
    }

    /// Stores `models` together, as one write of the store's next group commit: all or none.
    ///
    /// - Throws: as the synchronous form does, or the ``HoardError/storage(_:)`` of a commit that
    ///   failed (then nothing of the batch is stored).
    public func put(
        _ models: [Model], expiry: Expiry = .collectionDefault, tags: [String]? = nil, insertOnly: Bool = false,
        announce: Bool = false
    ) async throws where Model: Sendable {
        let request = try PutRequest(
            expiry: expiry, tags: tags, insertOnly: insertOnly, announce: announce, collection: name)
        try await store.submit(nested: false) { txn in
            try self.migratePending(in: txn)
            try self.put(models, request, in: txn)
        }
    }

    /// Stores `model` in `txn` as `request` says.
    func put(_ model: Model, _ request: PutRequest, in txn: borrowing LMDB.WriteTransaction) throws {
        let batch = try batch(request, writes: nil, in: txn)
        if let table = currentEmitted {
            try encoder.withFieldEmitting(table: table) { session in try put(model, batch, &session, in: txn) }
        } else {
            try putOrdinarily(model, batch, in: txn)
        }
        try batch.storing.finish(in: txn)
        state.counters.add(.puts)
        state.metrics.puts.increment()
        if request.announce { try announce([model.id.keyBytes], in: txn) }
    }

    /// Stores `models` in `txn` as `request` says, as one put each would, with the work that is the
    /// same for every record done once.
    func put(_ models: some Sequence<Model>, _ request: PutRequest, in txn: borrowing LMDB.WriteTransaction) throws {
        if request.announce {
            // Visited twice (stored, then announced): a sequence may be visited only once.
            let models = Array(models)
            var storing = request
            storing.announce = false
            try put(models, storing, in: txn)
            return try announce(models.map { $0.id.keyBytes }, in: txn)
        }
        let batch = try batch(request, writes: models.underestimatedCount, in: txn)
        // Counted once a call (a counter call per record would add a few percent to a bulk put).
        var stored = 0
        defer {
            state.counters.add(.puts, stored)
            state.metrics.puts.increment(by: stored)
        }
        // A bounded collection is brought back within its bound every so many records (see
        // `BoundTracker.settleInterval`), so that a large put never holds more than that many
        // records over it.
        func count(_ records: Int) throws {
            stored += records
            if let tracker = batch.storing.tracker, stored % tracker.settleInterval == 0 {
                try batch.storing.finish(in: txn, partial: true)
            }
        }
        if let table = currentEmitted {
            try encoder.withFieldEmitting(table: table) { session in
                // Models in contiguous memory (an array) are visited by index, without the generic
                // iterator (about a hundred instructions a record).
                let done: Void? = try models.withContiguousStorageIfAvailable { models in
                    for index in models.indices {
                        try put(models[index], batch, &session, in: txn)
                        try count(1)
                    }
                }
                if done == nil {
                    for model in models {
                        try put(model, batch, &session, in: txn)
                        try count(1)
                    }
                }
            }
        } else {
            for model in models {
                try putOrdinarily(model, batch, in: txn)
                try count(1)
            }
        }
        try batch.storing.finish(in: txn)
    }

    /// What the records of a put as `request` says share.
    @inline(__always)
    private func batch(_ request: PutRequest, writes: Int?, in txn: borrowing LMDB.WriteTransaction) throws -> PutBatch
    {
        var tagging: RecordStoring.Tagging?
        if let tags = request.tags {
            guard let tagIndex else { throw HoardError.notAHoardStore(path: store.path, found: []) }
            try store.prepareTagging(in: txn)
            tagging = RecordStoring.Tagging(index: tagIndex, tags: tags)
        }
        return PutBatch(
            header: header(for: request.expiry), options: request.insertOnly ? .noOverwrite : [],
            storing: try storing(writes: writes, tagging: tagging, in: txn))
    }

    /// The header of a record written now with `expiry`.
    @inline(__always)
    func header(for expiry: Expiry) -> RecordHeader {
        let now = store.options.now()
        let expiresAt: Int64? =
            switch expiry {
            case .collectionDefault: timeToLiveMilliseconds.map { now.addingSaturating($0) }
            case .never: nil
            case .at(let time): time.storedMilliseconds
            case .after(let duration): now.addingSaturating(duration.storedMilliseconds)
            }
        return RecordHeader(version: currentVersion, writtenAt: store.writeStamp(now), expiresAt: expiresAt)
    }

    /// Stores one model of a batch through its generated code, or the ordinary way when that declines.
    private func put(
        _ model: Model, _ batch: PutBatch, _ session: inout CBOREmitSession, in txn: borrowing LMDB.WriteTransaction
    ) throws {
        try model.id.withKeyBytes { key in
            try checkKeySize(key.count)
            // Generated code cannot fail (it declines instead), so its payload goes straight to
            // LMDB, without the layers that name the key in an encoding error.
            guard let payload = session.emit({ model.emit(into: &$0) }) else {
                return try withPayload(of: model, key: key, ordinarily: true) {
                    try store($0, batch, key: key, in: txn)
                }
            }
            try store(payload, batch, key: key, in: txn)
        }
    }

    /// Stores one model of a batch through its `encode(to:)`.
    private func putOrdinarily(_ model: Model, _ batch: PutBatch, in txn: borrowing LMDB.WriteTransaction) throws {
        try model.id.withKeyBytes { key in
            try checkKeySize(key.count)
            try withPayload(of: model, key: key, ordinarily: true) { try store($0, batch, key: key, in: txn) }
        }
    }

    /// Writes a record of `payload` under `key`.
    @inline(__always)
    private func store(
        _ payload: UnsafeRawBufferPointer, _ batch: PutBatch, key: UnsafeRawBufferPointer,
        in txn: borrowing LMDB.WriteTransaction
    ) throws {
        do {
            try batch.storing.store(
                payload: payload, header: batch.header, forKey: key, options: batch.options, in: database, txn)
        } catch let error as LMDBError where error.kind == .keyExists {
            throw HoardError.alreadyStored(collection: name, key: storedKey(key))
        }
    }

    /// Gives the record of `id` a new write time and `expiry` in `txn`, keeping its version and
    /// payload (memcached's `touch`): the model is not encoded again, and observers and other
    /// replicas are not told, since the record's value did not change. What a revalidating
    /// read-through does with a "not modified" answer. Returns whether there was a readable record.
    ///
    /// - Throws: ``HoardError/invalidID(collection:reason:)``; ``HoardError/storage(_:)`` when the storage fails.
    @discardableResult
    public func touch(
        _ id: Model.ID, expiry: Expiry = .collectionDefault, in txn: borrowing WriteTransaction
    ) throws
        -> Bool
    {
        let key = try keyBytes(id)
        return try storageErrors { try key.withUnsafeBytes { try renew($0, expiry: expiry, in: txn.writing) } }
    }

    /// Gives the record of `id` a new write time and `expiry` in a transaction of its own (see
    /// ``touch(_:expiry:in:)``); returns whether there was a readable record.
    ///
    /// - Throws: ``HoardError/invalidID(collection:reason:)``; ``HoardError/storage(_:)`` when the storage fails.
    @discardableResult
    public func touch(_ id: Model.ID, expiry: Expiry = .collectionDefault) throws -> Bool {
        let key = try keyBytes(id)
        return try store.writeLMDB { txn in try key.withUnsafeBytes { try renew($0, expiry: expiry, in: txn) } }
    }

    /// Gives the record of `id` a new write time and `expiry` (see ``touch(_:expiry:in:)``), as one
    /// write of the store's next group commit; returns whether there was a readable record.
    ///
    /// - Throws: as the synchronous form does, or the ``HoardError/storage(_:)`` of a commit that failed.
    @discardableResult
    public func touch(_ id: Model.ID, expiry: Expiry = .collectionDefault) async throws -> Bool where Model: Sendable {
        let key = try keyBytes(id)
        return try await store.submit(nested: false) { txn in
            try key.withUnsafeBytes { try self.renew($0, expiry: expiry, in: txn) }
        }
    }

    /// Gives the record of `key` a new write time and `expiry`, its version and payload kept (no
    /// encoding, no change told to observers or replicas); `false` when there is no readable record.
    func renew(_ key: UnsafeRawBufferPointer, expiry: Expiry, in txn: borrowing LMDB.WriteTransaction) throws -> Bool {
        let header = header(for: expiry)
        var writer = try writer(in: txn)
        let renewed = try writer.restamp(key, in: txn) { _, _ in header } ?? false
        try writer.finish(in: txn)
        return renewed
    }

    /// Removes the record under `id` in a transaction of its own; returns whether there was one.
    ///
    /// - Throws: ``HoardError/invalidID(collection:reason:)`` when the ID is too long for a key;
    ///   ``HoardError/storage(_:)`` when the storage fails.
    @discardableResult
    public func delete(_ id: Model.ID) throws -> Bool {
        let key = try keyBytes(id)
        return try store.writeLMDB { txn in
            try migratePending(in: txn)
            return try remove([key], .deleted, in: txn) == 1
        }
    }

    /// Removes the record under `id` in `txn`; returns whether there was one.
    ///
    /// - Throws: ``HoardError/invalidID(collection:reason:)`` when the ID is too long for a key;
    ///   ``HoardError/storage(_:)`` when the storage fails.
    @discardableResult
    public func delete(_ id: Model.ID, in txn: borrowing WriteTransaction) throws -> Bool {
        let key = try keyBytes(id)
        return try storageErrors { try remove([key], .deleted, in: txn.writing) == 1 }
    }

    /// Removes the record under `id` as one write of the store's next group commit; returns whether there was one.
    ///
    /// - Throws: as the synchronous form does, or the ``HoardError/storage(_:)`` of a commit that failed
    ///   (then nothing of the batch is stored).
    @discardableResult
    public func delete(_ id: Model.ID) async throws -> Bool where Model: Sendable {
        let key = try keyBytes(id)
        return try await store.submit(nested: false) { txn in
            try self.migratePending(in: txn)
            return try self.remove([key], .deleted, in: txn) == 1
        }
    }

    /// Removes the records under `keys` in `txn` for `reason`, with one writer for all; how many
    /// there were. `untagging`: the tag whose index entries for them an invalidation by tag took already.
    func remove(
        _ keys: [[UInt8]], _ reason: RecordRemoval, untagging: [UInt8]? = nil, in txn: borrowing LMDB.WriteTransaction
    ) throws -> Int {
        guard !keys.isEmpty else { return 0 }
        var writer = try writer(in: txn)
        var removed = 0
        for key in keys where try writer.remove(key, reason, untagging: untagging, in: txn) { removed += 1 }
        try writer.finish(in: txn)
        return removed
    }

    /// Removes every record, in one transaction; returns how many there were.
    ///
    /// - Throws: ``HoardError/storage(_:)`` when the storage fails; nothing is removed then.
    @discardableResult
    public func deleteAll() throws -> Int {
        try store.writeLMDB { txn in try removeAll(.deleted, in: txn) }
    }

    /// Removes every record in `txn`; returns how many there were. Observers see one clear.
    ///
    /// - Throws: ``HoardError/storage(_:)`` when the storage fails (abort `txn` to undo what it holds).
    @discardableResult
    public func deleteAll(in txn: borrowing WriteTransaction) throws -> Int {
        try storageErrors { try removeAll(.deleted, in: txn.writing) }
    }

    /// Removes every record, as one write of the store's next group commit; returns how many there were.
    ///
    /// - Throws: the ``HoardError/storage(_:)`` of a commit that failed (then nothing of the batch is stored).
    @discardableResult
    public func deleteAll() async throws -> Int where Model: Sendable {
        try await store.submit(nested: false) { txn in try self.removeAll(.deleted, in: txn) }
    }

    /// Removes every record in `txn` for `reason`; returns how many there were.
    func removeAll(_ reason: RecordRemoval, in txn: borrowing LMDB.WriteTransaction) throws -> Int {
        var writer = try writer(in: txn)
        let removed = try writer.removeAll(reason, in: txn)
        try writer.finish(in: txn)
        return removed
    }

    /// Deletes every expired record, in one transaction; returns how many.
    ///
    /// A record whose header cannot be read is damaged, not expired, and stays; so does one that
    /// read-through may still serve stale (within the collection's ``Freshness`` windows, see
    /// ``Store/purgeExpired()``).
    ///
    /// - Throws: ``HoardError/storage(_:)`` when the storage fails; nothing is deleted then.
    @discardableResult
    public func purgeExpired() throws -> Int {
        try store.writeLMDB { txn in try purgeExpired(in: txn) }
    }

    /// Deletes the expired records, as one write of the store's next group commit; returns how many.
    ///
    /// - Throws: as the synchronous form does, or the ``HoardError/storage(_:)`` of a commit that failed
    ///   (then nothing of the batch is stored).
    @discardableResult
    public func purgeExpired() async throws -> Int where Model: Sendable {
        try await store.submit(nested: false) { txn in try self.purgeExpired(in: txn) }
    }

    /// Deletes every expired record in `txn`; returns how many.
    ///
    /// - Throws: ``HoardError/storage(_:)`` when the storage fails.
    @discardableResult
    public func purgeExpired(in txn: borrowing WriteTransaction) throws -> Int {
        try storageErrors { try purgeExpired(in: txn.writing) }
    }

    func purgeExpired(in txn: borrowing LMDB.WriteTransaction) throws -> Int {
        try store.purgeExpired(
            of: name, database: database, keyKind: Model.ID.keyKind, from: nil, scanning: .max, in: txn
        )
        .purged
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
