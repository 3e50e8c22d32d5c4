internal import LMDB

// Invalidation: records changed in the source of truth. The local records are removed, and what
// changed (keys, a tag, the whole collection) enters the store's outbox in the same transaction,
// for a bus to announce to the other replicas, which apply the same rule (InvalidationTarget).
// A fetch under way for a record invalidated does not store its result.

extension HoardCollection {
    /// Invalidates the records of `ids` in a transaction of its own and records, in the same
    /// transaction, that the change must be announced to the other replicas (the store's outbox:
    /// one entry per key, however often it changes, until a bus has published it).
    ///
    /// Every replica, this one included, removes the records: none serves the old value again,
    /// not even stale-if-error. Call it after the source of truth has the change; to keep the new
    /// value here, put it with `announce: true` instead.
    ///
    /// - Throws: ``HoardError/invalidID(collection:reason:)`` for an ID too long for a key;
    ///   ``HoardError/storage(_:)`` when the storage fails (then nothing is removed or announced).
    public func invalidate(_ ids: [Model.ID]) throws {
        let keys = try ids.map { try keyBytes($0) }
        try store.writeLMDB { txn in try invalidate(keys, in: txn) }
    }

    /// Removes the record of `id` and announces the change (``invalidate(_:)-3713m`` of an array).
    ///
    /// - Throws: as ``invalidate(_:)-3713m`` does.
    public func invalidate(_ id: Model.ID) throws { try invalidate([id]) }

    /// Removes the records of `ids` in `txn` and announces the change (see ``invalidate(_:)-3713m``).
    ///
    /// - Throws: as ``invalidate(_:)-3713m`` does; abort `txn` to undo what it holds.
    public func invalidate(_ ids: [Model.ID], in txn: borrowing WriteTransaction) throws {
        let keys = try ids.map { try keyBytes($0) }
        try storageErrors { try invalidate(keys, in: txn.writing) }
    }

    /// Invalidates every record that carries `tag` in a transaction of its own (as
    /// ``invalidate(_:)-3713m`` invalidates a record), announcing the tag to the other replicas in
    /// the same transaction. Returns how many records were invalidated here.
    ///
    /// - Throws: ``HoardError/invalidTag(collection:tag:reason:)`` for a tag no record can carry
    ///   (empty, or longer than 128 bytes); ``HoardError/storage(_:)`` when the storage fails.
    @discardableResult
    public func invalidate(tag: String) throws -> Int {
        let tag = try TagIndex.normalized([tag], collection: name)[0]
        return try store.writeLMDB { txn in try invalidate(tag: tag, in: txn) }
    }

    /// Removes every record that carries `tag` in `txn` and announces the tag (see ``invalidate(tag:)-1cd3z``).
    ///
    /// - Throws: as ``invalidate(tag:)-1cd3z`` does; abort `txn` to undo what it holds.
    @discardableResult
    public func invalidate(tag: String, in txn: borrowing WriteTransaction) throws -> Int {
        let tag = try TagIndex.normalized([tag], collection: name)[0]
        return try storageErrors { try invalidate(tag: tag, in: txn.writing) }
    }

    /// Invalidates every record of the collection in a transaction of its own (as
    /// ``invalidate(_:)-3713m`` invalidates a record), and records in the same transaction that the
    /// other replicas must invalidate theirs. Returns how many were invalidated here.
    ///
    /// - Throws: ``HoardError/storage(_:)`` when the storage fails (then nothing is removed or announced).
    @discardableResult
    public func invalidateAll() throws -> Int {
        try store.writeLMDB { txn in try invalidateAll(in: txn) }
    }

    /// Removes every record of the collection in `txn` and announces it (see ``invalidateAll()-2h2zi``).
    ///
    /// - Throws: as ``invalidateAll()-2h2zi`` does; abort `txn` to undo what it holds.
    @discardableResult
    public func invalidateAll(in txn: borrowing WriteTransaction) throws -> Int {
        try storageErrors { try invalidateAll(in: txn.writing) }
    }

    /// The invalidations made here, by the rule every replica applies (``InvalidationTarget``).
    private var invalidations: InvalidationTarget {
        InvalidationTarget(store: store, collection: name, database: database, reason: .invalidated)
    }

    func invalidate(_ keys: [[UInt8]], in txn: borrowing LMDB.WriteTransaction) throws {
        var result = ApplyResult()
        // Announced first: a fetch that the race guard lets store what it fetched after this
        // invalidation (one that begins after its note) must find the announcement pending.
        try announce(keys, in: txn)
        try invalidations.invalidate(keys, in: txn, result: &result)
    }

    func invalidate(tag: [UInt8], in txn: borrowing LMDB.WriteTransaction) throws -> Int {
        var result = ApplyResult()
        try announce(.tag(tag), in: txn)
        try invalidations.invalidate(tag: tag, in: txn, result: &result)
        return result.removed
    }

    func invalidateAll(in txn: borrowing LMDB.WriteTransaction) throws -> Int {
        var result = ApplyResult()
        try announce(.all, in: txn)
        try invalidations.invalidateAll(in: txn, result: &result)
        return result.removed
    }

    /// Records in `txn` that the records of `keys` changed, for the other replicas, without
    /// touching the local records (a put that announces).
    func announce(_ keys: [[UInt8]], in txn: borrowing LMDB.WriteTransaction) throws {
        guard let outbox = store.outbox else { return }
        let stamp = Self.outboxStamp(txn)
        let entries = keys.map { OutboxKey.make(collection: name, key: $0) }
        for entry in entries { try txn.put(stamp, forKey: entry, in: outbox) }
        store.replicationState.announcing(entries, in: txn.id)
        store.replicationState.invalidations.noteRemoved(collection: name, keys: keys)
        notifyAnnounced(keys.count, in: txn)
    }

    /// Records in `txn` that a tag, or the whole collection, must be announced to the other replicas.
    func announce(_ announced: Announced, in txn: borrowing LMDB.WriteTransaction) throws {
        guard let outbox = store.outbox else { return }
        let entry = OutboxKey.make(collection: name, announced)
        try txn.put(Self.outboxStamp(txn), forKey: entry, in: outbox)
        store.replicationState.announcing([entry], in: txn.id)
        notifyAnnounced(1, in: txn)
    }

    /// The transaction's ID, which stamps each outbox entry it writes: an entry written again
    /// after a bus read it is not removed when that bus acknowledges the older one.
    private static func outboxStamp(_ txn: borrowing LMDB.WriteTransaction) -> [UInt8] {
        withUnsafeBytes(of: Int64(txn.id).bigEndian, Array.init)
    }

    private func notifyAnnounced(_ count: Int, in txn: borrowing LMDB.WriteTransaction) {
        let signal = store.replicationState.outboxSignal
        let metrics = store.metrics
        txn.onCommit {
            metrics.announced.increment(by: count)
            signal.notify()
        }
    }
}

extension HoardCollection where Model: Sendable, Model.ID: Sendable {
    /// Removes the records of `ids` and announces the change (see ``invalidate(_:)-3713m``), as one
    /// write of the store's next group commit.
    ///
    /// - Throws: as the synchronous form does, or a failed commit's ``HoardError/storage(_:)`` (nothing of it stored).
    public func invalidate(_ ids: [Model.ID]) async throws {
        let keys = try ids.map { try keyBytes($0) }
        try await store.submit(nested: false) { txn in try self.invalidate(keys, in: txn) }
    }

    /// Removes the record of `id` and announces the change, as one write of the next group commit.
    ///
    /// - Throws: as the synchronous form does.
    public func invalidate(_ id: Model.ID) async throws { try await invalidate([id]) }

    /// Removes every record that carries `tag` and announces the tag (see ``invalidate(tag:)-1cd3z``),
    /// as one write of the store's next group commit; returns how many records were removed here.
    ///
    /// - Throws: as the synchronous form does, or a failed commit's ``HoardError/storage(_:)`` (nothing of it stored).
    @discardableResult
    public func invalidate(tag: String) async throws -> Int {
        let tag = try TagIndex.normalized([tag], collection: name)[0]
        return try await store.withSpan("invalidate_tag", collection: name) { span in
            span?.attributes[SpanKey.tag] = String(decoding: tag, as: UTF8.self)
            let removed = try await store.submit(nested: false) { txn in try self.invalidate(tag: tag, in: txn) }
            span?.attributes[SpanKey.removed] = removed
            return removed
        }
    }

    /// Removes every record of the collection and announces it (see ``invalidateAll()-2h2zi``), as
    /// one write of the store's next group commit; returns how many records were removed here.
    ///
    /// - Throws: a failed commit's ``HoardError/storage(_:)`` (nothing of it stored).
    @discardableResult
    public func invalidateAll() async throws -> Int {
        try await store.withSpan("invalidate_all", collection: name) { span in
            let removed = try await store.submit(nested: false) { txn in try self.invalidateAll(in: txn) }
            span?.attributes[SpanKey.removed] = removed
            return removed
        }
    }
}
