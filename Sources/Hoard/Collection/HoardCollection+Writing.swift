internal import LMDB

// Writes other than puts (HoardCollection+Put.swift): renewing (touch), deleting and purging a
// collection's records, each in three forms: a transaction of its own, a caller's, one write of
// the store's next group commit.

extension HoardCollection {
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
    /// - Throws: as the synchronous form does, or a failed commit's ``HoardError/storage(_:)`` (nothing of it stored).
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
    /// - Throws: as the synchronous form does, or a failed commit's ``HoardError/storage(_:)`` (nothing of it stored).
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
