import Dispatch
public import LMDB

// Async writes. LMDB serializes writers with a lock that may be held by another thread or
// process for a while; a task that waited for it on Swift's cooperative thread pool would take a
// pool thread away from every other task. So async writes run on the store's own serial writer
// queue (a Dispatch thread, not a pool thread) and the task suspends until they are done.
// Reads never wait for the writer lock, so the synchronous reads serve async code as they are.

extension Store {
    /// Runs `body` in one write transaction on the store's writer queue, suspending the calling
    /// task (not blocking a thread of the cooperative pool) until it has committed or failed.
    ///
    /// Like the synchronous ``write(_:)``, `body` may run more than once when the map grows.
    public func write<R: Sendable>(_ body: @escaping @Sendable (borrowing WriteTransaction) throws -> R) async throws -> R {
        try await onWriterQueue { try self.environment.write(body) }
    }

    /// Runs `work` on the store's serial writer queue and returns its result to the suspended task.
    func onWriterQueue<R: Sendable>(_ work: @escaping @Sendable () throws -> R) async throws -> R {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<R, any Error>) in
            writerQueue.async {
                continuation.resume(with: Result { try work() })
            }
        }
    }
}

extension HoardCollection where Model: Sendable {
    /// Stores `model` without blocking the cooperative thread pool while waiting for the writer lock.
    public func put(_ model: Model, expiry: Expiry = .collectionDefault) async throws {
        try await store.onWriterQueue { try self.put(model, expiry: expiry) }
    }

    /// Stores `models` in one transaction, without blocking the cooperative thread pool.
    public func put(_ models: [Model], expiry: Expiry = .collectionDefault) async throws {
        try await store.onWriterQueue { try self.put(models, expiry: expiry) }
    }

    /// Removes the record under `id`, without blocking the cooperative thread pool.
    @discardableResult
    public func delete(_ id: Model.ID) async throws -> Bool {
        try await store.onWriterQueue { try self.delete(id) }
    }

    /// Deletes the expired records, without blocking the cooperative thread pool.
    @discardableResult
    public func purgeExpired() async throws -> Int {
        try await store.onWriterQueue { try self.purgeExpired() }
    }

    /// Rewrites the records remembered for a lazy migration, without blocking the cooperative thread pool.
    @discardableResult
    public func flushMigrations() async throws -> Int {
        try await store.onWriterQueue { try self.flushMigrations() }
    }
}
