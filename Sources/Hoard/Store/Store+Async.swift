public import LMDB

// Async writes. LMDB serializes writers with a lock that may be held by another thread or
// process for a while; a task that waited for it on Swift's cooperative thread pool would take a
// pool thread away from every other task. So async writes run on the store's own serial writer
// queue (a Dispatch thread, not a pool thread) and the task suspends until they are done; writes
// of many tasks are gathered into one commit there (Store+GroupCommit.swift).
// Reads never wait for the writer lock, so the synchronous reads serve async code as they are.
//
// Which to use: the synchronous calls are one call, one transaction, one commit, run on the
// calling thread; use them from threads of your own, for a transaction that must hold several
// calls together, and where writes come one at a time. The async calls suit a service, where
// many requests write at once: each caller waits only for the commit that carries its write,
// and one flush serves them all.

extension Store {
    /// Runs `body` as one write of the store's next group commit, suspending the calling task
    /// (not blocking a thread of the cooperative pool) until the commit that holds it is durable
    /// (in the store's durability mode), and returns what `body` returned.
    ///
    /// Writes made concurrently from many tasks share one write transaction and one commit. Each
    /// runs in a transaction nested in the shared one: when `body` throws, what it wrote is undone
    /// and the error comes back to this caller alone; the other writes commit. Writes run in the
    /// order they were made, so a task's writes apply in its order, and a write made after
    /// another's `await` returned sees it. A lone writer commits at once.
    ///
    /// A task cancelled while its write waits keeps waiting: a write once made is carried out,
    /// and its outcome reported, never half-withdrawn.
    ///
    /// Like the synchronous ``write(_:)``, `body` may run more than once when the map grows.
    ///
    /// - Throws: what `body` throws (nothing of it is stored), or the `LMDBError` of a commit that
    ///   failed (nothing of the batch is stored).
    public func write<R: Sendable>(
        _ body: @escaping @Sendable (borrowing WriteTransaction) throws -> R
    ) async throws -> R {
        try await submit(body)
    }
}

extension HoardCollection where Model: Sendable {
    /// Stores `model` as one write of the store's next group commit (see ``Store/write(_:)-44i3``),
    /// with the records a lazy migration remembered.
    ///
    /// - Throws: as the synchronous form does, or the `LMDBError` of a commit that failed
    ///   (then nothing of the batch is stored).
    public func put(_ model: Model, expiry: Expiry = .collectionDefault) async throws {
        try await store.submit(nested: false) { txn in
            try self.migratePending(in: txn)
            try self.put(model, expiry: expiry, in: txn)
        }
    }

    /// Stores `models` together, as one write of the store's next group commit: all or none.
    ///
    /// - Throws: as the synchronous form does, or the `LMDBError` of a commit that failed
    ///   (then nothing of the batch is stored).
    public func put(_ models: [Model], expiry: Expiry = .collectionDefault) async throws {
        try await store.submit(nested: false) { txn in
            try self.migratePending(in: txn)
            try self.put(models, expiry: expiry, in: txn)
        }
    }

    /// Removes the record under `id` as one write of the store's next group commit; returns whether there was one.
    ///
    /// - Throws: as the synchronous form does, or the `LMDBError` of a commit that failed
    ///   (then nothing of the batch is stored).
    @discardableResult
    public func delete(_ id: Model.ID) async throws -> Bool {
        try await store.submit(nested: false) { txn in
            try self.migratePending(in: txn)
            return try self.delete(id, in: txn)
        }
    }

    /// Deletes the expired records, as one write of the store's next group commit; returns how many.
    ///
    /// - Throws: as the synchronous form does, or the `LMDBError` of a commit that failed
    ///   (then nothing of the batch is stored).
    @discardableResult
    public func purgeExpired() async throws -> Int {
        try await store.submit(nested: false) { txn in try self.purgeExpired(in: txn) }
    }

    /// Rewrites the records remembered for a lazy migration, as one write of the store's next group commit.
    ///
    /// - Throws: as the synchronous form does, or the `LMDBError` of a commit that failed
    ///   (then nothing of the batch is stored).
    @discardableResult
    public func flushMigrations() async throws -> Int {
        try await store.submit(nested: false) { txn in try self.migratePending(in: txn) }
    }
}

extension HoardCollection where Model: Sendable {
    /// Gives the record of `id` a new write time and `expiry`, its payload kept (see
    /// ``touch(_:expiry:in:)``), as one write of the store's next group commit; returns whether
    /// there was a readable record.
    ///
    /// - Throws: as the synchronous form does, or the `LMDBError` of a commit that failed.
    @discardableResult
    public func touch(_ id: Model.ID, expiry: Expiry = .collectionDefault) async throws -> Bool {
        let key = try keyBytes(id)
        return try await store.submit(nested: false) { txn in
            try key.withUnsafeBytes { try self.renew($0, expiry: expiry, in: txn) }
        }
    }
}
