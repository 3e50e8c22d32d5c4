#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

/// Counts the transactions open in this process and lets the map be resized when there are none.
///
/// LMDB allows `mdb_env_set_mapsize` only while the process has no transaction open, and does not
/// check it. Every transaction enters the gate; a resize waits until the gate is empty and holds new
/// transactions back while it runs. A thread that already holds a transaction is never held back
/// (it would wait for itself), and it may not resize.
///
/// The gate also remembers which threads hold a write transaction: LMDB's writer lock is not
/// recursive, so a second `write` on the same thread would hang forever; it traps instead.
final class TransactionGate: @unchecked Sendable {
    // @unchecked: every stored property is guarded by `mutex`.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var open = 0
    private var resizing = false
    /// Whether the environment was closed: no transaction begins any more.
    private var closed = false
    /// Per thread: how many transactions it holds, and whether one is a write.
    private var holders: [UInt: (count: Int, writing: Bool)] = [:]

    init() {
        mutex = .allocate(capacity: 1)
        condition = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        condition.deallocate()
    }

    /// Registers a transaction of the calling thread, waiting while a resize runs; `false` (and
    /// nothing registered) once the environment is closed.
    func enter(writing: Bool) -> Bool {
        let thread = currentThreadID()
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        var holder = holders[thread] ?? (0, false)
        if writing && holder.writing {
            pthread_mutex_unlock(mutex)
            preconditionFailure(
                "LMDB: write transaction started on a thread that already holds one; LMDB's writer lock is not recursive. Do the work inside the outer write closure."
            )
        }
        if holder.count == 0 {
            while resizing { pthread_cond_wait(condition, mutex) }
        }
        guard !closed else { return false }
        holder.count += 1
        holder.writing = holder.writing || writing
        holders[thread] = holder
        open += 1
        return true
    }

    /// Unregisters a transaction of the calling thread.
    func leave(writing: Bool) {
        let thread = currentThreadID()
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        if var holder = holders[thread] {
            holder.count -= 1
            if writing { holder.writing = false }
            holders[thread] = holder.count == 0 ? nil : holder
        }
        open -= 1
        if open == 0 { pthread_cond_broadcast(condition) }
    }

    /// Whether the calling thread holds any transaction.
    var callerHoldsTransaction: Bool {
        let thread = currentThreadID()
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return holders[thread] != nil
    }

    /// Runs `body` while no transaction is open in this process.
    ///
    /// - Returns: `nil` when the calling thread itself holds a transaction, so waiting would never end.
    func exclusively<R>(_ body: () throws(LMDBError) -> R) throws(LMDBError) -> R? {
        let thread = currentThreadID()
        pthread_mutex_lock(mutex)
        guard holders[thread] == nil else {
            pthread_mutex_unlock(mutex)
            return nil
        }
        while resizing { pthread_cond_wait(condition, mutex) }
        resizing = true
        while open > 0 { pthread_cond_wait(condition, mutex) }
        defer {
            resizing = false
            pthread_cond_broadcast(condition)
            pthread_mutex_unlock(mutex)
        }
        guard !closed else {
            throw LMDBError(.closed, operation: "mdb_env_set_mapsize", context: "the environment was closed")
        }
        return try body()
    }

    /// Closes the gate for good once every transaction open in this process has ended, and runs
    /// `body` (the environment's close) while none can begin. Transactions that would begin after
    /// it are refused (``enter(writing:)`` returns `false`). Returns `false` when the calling
    /// thread holds a transaction itself (waiting would never end); a second close does nothing.
    func close(_ body: () -> Void) -> Bool {
        let thread = currentThreadID()
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        guard holders[thread] == nil else { return false }
        while resizing { pthread_cond_wait(condition, mutex) }
        guard !closed else { return true }
        resizing = true
        while open > 0 { pthread_cond_wait(condition, mutex) }
        closed = true
        body()
        resizing = false
        pthread_cond_broadcast(condition)
        return true
    }

    /// Whether ``close(_:)`` ran.
    var isClosed: Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return closed
    }
}
