public import LMDB

// Invalidation: a record changed in the source of truth. The local record goes, and the key
// enters the store's outbox in the same transaction, for a bus to announce to the other replicas.

extension HoardCollection {
    /// Removes the records of `ids` in `txn` and records, in the same transaction, that the change
    /// must be announced to the other replicas (the store's outbox: one entry per key, however
    /// often it changes, until a bus has published it). A fetch under way for one of them does
    /// not store its result.
    ///
    /// - Throws: ``HoardError/invalidID(collection:reason:)`` for an ID too long for a key;
    ///   `LMDBError` when LMDB fails (abort `txn` to undo what it holds).
    public func invalidate(_ ids: [Model.ID], in txn: borrowing WriteTransaction) throws {
        let keys = try ids.map { try keyBytes($0) }
        _ = try remove(keys, .invalidated, in: txn)
        try announce(keys, in: txn)
    }

    /// Records in `txn` that the records of `keys` changed, for the other replicas, without
    /// touching the local records (a put that announces).
    func announce(_ keys: [[UInt8]], in txn: borrowing WriteTransaction) throws {
        guard let outbox = store.outbox else { return }
        let stamp = Self.outboxStamp(txn)
        for key in keys { try txn.put(stamp, forKey: OutboxKey.make(collection: name, key: key), in: outbox) }
        store.replicationState.invalidations.noteRemoved(collection: name, keys: keys)
        notifyAnnounced(keys.count, in: txn)
    }

    /// Records in `txn` that a tag, or the whole collection, must be announced to the other replicas.
    func announce(_ announced: Announced, in txn: borrowing WriteTransaction) throws {
        guard let outbox = store.outbox else { return }
        try txn.put(Self.outboxStamp(txn), forKey: OutboxKey.make(collection: name, announced), in: outbox)
        notifyAnnounced(1, in: txn)
    }

    /// The transaction's ID, which stamps each outbox entry it writes: an entry written again
    /// after a bus read it is not removed when that bus acknowledges the older one.
    private static func outboxStamp(_ txn: borrowing WriteTransaction) -> [UInt8] {
        withUnsafeBytes(of: Int64(txn.id).bigEndian, Array.init)
    }

    private func notifyAnnounced(_ count: Int, in txn: borrowing WriteTransaction) {
        let signal = store.replicationState.outboxSignal
        let metrics = store.metrics
        txn.onCommit {
            metrics.announced.increment(by: count)
            signal.notify()
        }
    }
}

extension HoardCollection where Model: Sendable, Model.ID: Sendable {
    /// Removes the records of `ids` and announces the change to the other replicas (see
    /// ``invalidate(_:in:)``), as one write of the store's next group commit.
    ///
    /// Call it after the source of truth has the change: the other replicas drop their copies when
    /// a bus delivers the announcement, and their next read fetches the new value. To keep the new
    /// value here, write it with `put(_:expiry:announce:)` instead.
    ///
    /// - Throws: ``HoardError/invalidID(collection:reason:)``, or the `LMDBError` of a commit that
    ///   failed (then nothing is removed or announced).
    public func invalidate(_ ids: [Model.ID]) async throws {
        try await store.submit(nested: false) { txn in try self.invalidate(ids, in: txn) }
    }

    /// Removes the record of `id` and announces the change (`invalidate(_:)` of an array).
    ///
    /// - Throws: as `invalidate(_:)` of an array does.
    public func invalidate(_ id: Model.ID) async throws {
        try await invalidate([id])
    }

    /// Stores `model` and, when `announce` is true, announces its change to the other replicas in
    /// the same transaction: they drop their copies and fetch the new value on their next read.
    /// Read-through's own stores are never announced (replicas would invalidate each other's fills
    /// in a loop).
    ///
    /// - Throws: as `put(_:expiry:)` does.
    public func put(_ model: Model, expiry: Expiry = .collectionDefault, announce: Bool) async throws {
        try await store.submit(nested: false) { txn in
            try self.migratePending(in: txn)
            try self.put(model, expiry: expiry, in: txn)
            if announce { try self.announce([model.id.keyBytes], in: txn) }
        }
    }
}
