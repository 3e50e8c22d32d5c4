internal import LMDB

// Async writes. A task that waited for LMDB's writer lock on Swift's cooperative pool would take
// a pool thread from every other task, so async writes run on the store's own serial writer
// queue, gathered into one commit (Store+GroupCommit.swift), and the task suspends. Reads never
// wait for the writer lock: the synchronous reads serve async code as they are.

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
