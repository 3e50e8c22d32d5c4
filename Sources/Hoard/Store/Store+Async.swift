internal import LMDB

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
    /// - Throws: what `body` throws (nothing of it is stored), or the ``HoardError/storage(_:)``
    ///   of a commit that failed (nothing of the batch is stored).
    public func write<R: Sendable>(
        _ body: @escaping @Sendable (borrowing WriteTransaction) throws -> R
    ) async throws -> R {
        try await submit { txn in try body(WriteTransaction(txn)) }
    }
}
