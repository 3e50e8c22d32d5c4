internal import Dispatch
internal import LMDB
internal import Synchronization

// Group commit. A durable commit costs one or two flushes whatever it holds, so while a commit is
// in flight new writes queue, and the next transaction takes every queued write (up to a bound):
// one commit makes them all durable. A lone writer finds the queue empty and commits at once.
//
// A write that throws is undone alone; the others commit. A caller's closure (`store.write { }`)
// runs in a nested transaction. Hoard's own writes (a put, a delete), which almost never throw,
// run in the batch's transaction directly, since a nested transaction copies the pages it
// touches: when one does throw, the batch runs again from its first write with that one nested.

/// How the store's group commit has gone so far (``Store/writeStatistics``).
public struct WriteStatistics: Sendable, Hashable {
    /// Commits of gathered writes (each one transaction and one flush in the store's durability mode).
    public var commits = 0
    /// Writes that committed.
    public var writes = 0
    /// Writes that failed on their own (their error went to their caller; the rest of their batch committed).
    public var failedWrites = 0
    /// Writes whose whole batch failed to commit (a full disk, say): each caller got that error.
    public var abortedWrites = 0
    /// The most writes one commit carried.
    public var largestBatch = 0
    /// Time writes spent queued before their batch took them, added up.
    public var waitingTime: Duration = .zero
    /// Writes queued now, waiting for the writer.
    public var queued = 0

    /// Writes per commit on average (0 before the first commit).
    public var writesPerCommit: Double { commits == 0 ? 0 : Double(writes + failedWrites) / Double(commits) }
}

extension Store {
    /// How many writes one commit gathers at most, and how many bytes of keys and values: past
    /// either, the batch commits and the rest waits for the next one, so that a caller's wait
    /// stays short under load.
    public struct GroupCommitLimits: Sendable, Hashable {
        /// The most writes one commit gathers.
        public var writes: Int
        /// The most bytes of keys and values one commit gathers (a single larger write commits alone).
        public var bytes: Int

        /// Limits of `writes` writes and `bytes` bytes a commit; both must be positive.
        public init(writes: Int = 1_000, bytes: Int = 4 << 20) {
            precondition(writes > 0 && bytes > 0, "GroupCommitLimits: both limits must be positive")
            self.writes = writes
            self.bytes = bytes
        }
    }

    /// How the store's async writes have been gathered into commits so far.
    public var writeStatistics: WriteStatistics {
        var statistics = groupCommit.statistics.withLock { $0 }
        statistics.queued = groupCommit.queue.withLock { $0.pending.count - $0.head }
        return statistics
    }

    /// Runs `body` as one write of the next group commit and returns its result once that commit
    /// is durable (in the store's durability mode); see ``write(_:)``.
    ///
    /// - Parameter nested: whether `body` runs in a nested transaction from the start (a caller's
    ///   closure, which may throw by design), or in the batch's transaction until it throws (one
    ///   of Hoard's own writes, which rarely does): either way a write that throws is undone alone.
    func submit<R: Sendable>(
        nested: Bool = true, _ body: @escaping @Sendable (borrowing LMDB.WriteTransaction) throws -> R
    ) async throws -> R {
        let enqueued = ContinuousClock.now
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<R, any Error>) in
            let result = ResultBox<R>()
            let request = GroupCommit.Request(
                enqueued: enqueued, nested: nested, due: nil, run: { txn in result.value = try body(txn) },
                finish: { outcome in
                    switch (outcome, result.value) {
                    case (.success, let value?): continuation.resume(returning: value)
                    case (.failure(let error as LMDBError), _):
                        continuation.resume(throwing: HoardError.storage(StorageFailure(error)))
                    case (.failure(let error), _): continuation.resume(throwing: error)
                    case (.success, nil):
                        preconditionFailure("group commit: a write was reported committed without having run")
                    }
                })
            if groupCommit.enqueue(request) { drain() }
        }
    }

    /// Queues `body` to ride on the store's next group commit, without starting one (the removal
    /// of published outbox entries); with no other write within `delay`, it commits on its own.
    /// `finish` is told the outcome; a store let go before then drops it untold. `body` runs
    /// un-nested and must not hold the store (it would keep the store open past its last user).
    func submitDeferred(
        within delay: DispatchTimeInterval,
        _ body: @escaping @Sendable (borrowing LMDB.WriteTransaction) throws -> Void,
        finish: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        let due = DispatchTime.now() + delay
        let request = GroupCommit.Request(
            enqueued: ContinuousClock.now, nested: false, due: due, run: body, finish: finish)
        groupCommit.enqueue(request)
        writerQueue.asyncAfter(deadline: due) { [weak self] in
            guard let self, self.groupCommit.claimIdleDrain() else { return }
            self.drain()
        }
    }

    /// Commits batches on the writer queue until no write that a caller waits for is queued; the
    /// caller has set the queue's `draining`.
    private func drain() {
        let queue = groupCommit
        writerQueue.async { [weak self] in
            // The writer holds the store only while it commits: a caller that resumes and lets
            // go of the last reference closes the store there and then (queued writes' callers
            // hold it meanwhile).
            repeat {
                let finish: () -> Void
                do {
                    guard let self else { return }
                    finish = self.commitOneBatch()
                }
                finish()
            } while queue.hasPending()
        }
    }

    /// Takes queued writes into one write transaction until the queue is empty or a limit is
    /// reached, and commits. Returns what tells each caller, to be run once the store is let go.
    private func commitOneBatch() -> () -> Void {
        let limits = options.groupCommit
        var taken: [GroupCommit.Request] = []
        var outcomes: [Result<Void, any Error>] = []
        var waited: Duration = .zero
        var committed = true
        let start = monotonicNanoseconds()
        // A commit serves many callers' tasks: its span is a trace of its own.
        let span = startCommitSpan()
        defer { span?.end() }
        do {
            // Each attempt runs the batch from its first write: after the map grew (LMDB's
            // environment runs the closure again), or after a write that ran directly threw
            // (`GroupCommit.RunNested`: this loop runs the batch again with that write nested).
            while true {
                do {
                    try environment.write { txn in
                        outcomes.removeAll(keepingCapacity: true)
                        for index in taken.indices {
                            outcomes.append(try GroupCommit.run(taken[index], index, in: txn))
                        }
                        while taken.count < limits.writes, txn.bytesWritten < limits.bytes,
                            let request = groupCommit.dequeue()
                        {
                            waited += ContinuousClock.now - request.enqueued
                            taken.append(request)
                            let outcome = try GroupCommit.run(request, taken.count - 1, in: txn)
                            outcomes.append(outcome)
                            // A full map: LMDB runs the batch again once the map has grown; take no more now.
                            if case .failure(let error as LMDBError) = outcome, error.kind == .mapFull { break }
                        }
                    }
                    break
                } catch let again as GroupCommit.RunNested {
                    taken[again.index].nested = true
                }
            }
        } catch {
            // Nothing of the batch is stored: every caller gets the error. When the transaction
            // could not even begin, the queued writes get it, or the drain would retry forever.
            committed = false
            span?.recordFailure(error)
            if taken.isEmpty {
                while taken.count < limits.writes, let request = groupCommit.dequeue() { taken.append(request) }
            }
            outcomes = taken.map { _ in .failure(error) }
        }
        guard !taken.isEmpty else { return {} }
        if committed {
            metrics.commitDuration.recordSince(start)
            metrics.commitWrites.record(taken.count)
        }
        let failed = outcomes.filter { if case .failure = $0 { true } else { false } }.count
        span?.updateAttributes { attributes in
            attributes[SpanKey.batchSize] = taken.count
            if committed {
                attributes[SpanKey.outcome] = "committed"
                attributes["hoard.commit.failed_writes"] = failed
            }
        }
        groupCommit.statistics.withLock { statistics in
            if !committed {
                statistics.abortedWrites += taken.count
            } else {
                statistics.commits += 1
                statistics.writes += taken.count - failed
                statistics.failedWrites += failed
                statistics.largestBatch = max(statistics.largestBatch, taken.count)
            }
            statistics.waitingTime += waited
        }
        // The writes' closures (and what they hold: collections, the store) are let go before any
        // caller resumes, so that a caller finds nothing of its write still referenced.
        let finishes = taken.map(\.finish)
        taken = []
        return { for (finish, outcome) in zip(finishes, outcomes) { finish(outcome) } }
    }
}

/// The queue of writes waiting for the next group commit, and what the commits did.
final class GroupCommit: Sendable {
    struct Request: Sendable {
        let enqueued: ContinuousClock.Instant
        /// Whether the write runs in a nested transaction; a write that runs directly in the
        /// batch's transaction and throws is set to run nested when the batch runs again.
        var nested: Bool
        /// For a write that rides on commits that others start (``Store/submitDeferred(within:_:finish:)``),
        /// when it commits on its own; `nil` for a write a caller waits for.
        let due: DispatchTime?
        let run: @Sendable (borrowing LMDB.WriteTransaction) throws -> Void
        let finish: @Sendable (Result<Void, any Error>) -> Void
    }

    /// Thrown out of a batch's transaction when the write at `index`, run directly in it, threw:
    /// the batch runs again with that write nested.
    struct RunNested: Error {
        let index: Int
    }

    /// Runs `request` in `txn`: nested, its failure is its outcome; directly, a failure abandons
    /// the batch's attempt (`RunNested`), except a full map, which the environment answers by
    /// growing the map and running the batch again.
    static func run(
        _ request: Request, _ index: Int, in txn: borrowing LMDB.WriteTransaction
    ) throws -> Result<Void, any Error> {
        if request.nested { return Result { try txn.nested { try request.run($0) } } }
        do {
            try request.run(txn)
            return .success(())
        } catch let error as LMDBError where error.kind == .mapFull {
            throw error
        } catch {
            throw RunNested(index: index)
        }
    }

    struct Queue {
        /// Requests in order; a taken one is set to `nil` at once (releasing what its closures
        /// hold) and the taken slots are dropped in bulk.
        var pending: [Request?] = []
        /// The first request not taken yet.
        var head = 0
        /// How many of the requests not taken yet are not deferred.
        var waited = 0
        /// Whether a drain is scheduled or running on the writer queue.
        var draining = false
    }

    let queue = Mutex(Queue())
    let statistics = Mutex(WriteStatistics())

    /// Queues `request`; returns whether the caller must schedule a drain (the request is not
    /// deferred and no drain is running).
    @discardableResult
    func enqueue(_ request: Request) -> Bool {
        queue.withLock { queue in
            queue.pending.append(request)
            guard request.due == nil else { return false }
            queue.waited += 1
            defer { queue.draining = true }
            return !queue.draining
        }
    }

    /// The next queued request, or `nil`.
    func dequeue() -> Request? {
        queue.withLock { queue in
            guard queue.head < queue.pending.count else { return nil }
            defer {
                queue.pending[queue.head] = nil
                queue.head += 1
            }
            if let request = queue.pending[queue.head], request.due == nil { queue.waited -= 1 }
            return queue.pending[queue.head]
        }
    }

    /// Whether a write that a caller waits for, or a deferred one past its delay, is queued; when
    /// none is, the drain ends (the next enqueue starts another, and a deferred write's timer),
    /// decided under the lock so that no request is left without a drain.
    func hasPending() -> Bool {
        queue.withLock { queue in
            if queue.head > 0 {
                queue.pending.removeFirst(queue.head)
                queue.head = 0
            }
            // A deferred write's timer that fired while this drain ran found it running: it is
            // this drain's to take.
            let now = DispatchTime.now()
            let more = queue.waited > 0 || queue.pending.contains { $0.flatMap(\.due).map { $0 <= now } ?? false }
            if !more { queue.draining = false }
            return more
        }
    }

    /// When deferred writes wait and no drain runs, marks one as running: whether the caller must start it.
    func claimIdleDrain() -> Bool {
        queue.withLock { queue in
            guard !queue.draining, queue.head < queue.pending.count else { return false }
            queue.draining = true
            return true
        }
    }
}

/// Where a write's result waits for its commit. Written by the write (on the writer queue, maybe
/// more than once when the map grows) and read once its commit is done, on the same queue.
private final class ResultBox<Value>: @unchecked Sendable {
    var value: Value?
}
