internal import CCRC32
internal import Synchronization

/// One subscription to a collection's changes: at most one batch waits in it (a new one merges
/// into it), so a consumer that lags costs bounded memory and never slows a writer.
final class ChangeSubscriber: Sendable {
    /// What the subscriber wants: every change (up to `limit` IDs waiting), or only those that
    /// may concern one key.
    enum Interest: Sendable {
        case all(limit: Int)
        case key([UInt8])
    }

    let interest: Interest
    private let state = Mutex(State())
    /// Whether a batch waits (`State.pending`), for a consumer that looks before it parks.
    private let batchWaits = Atomic<Bool>(false)

    /// How long a consumer of every change looks for the next batch before it parks. Waking a
    /// parked consumer is a system call on the committing thread, dearer than a small commit; a
    /// consumer found looking costs the commit only a merge. Its own thread pays the wait.
    static let lookBeforeParking: UInt64 = 20_000
    /// How long this subscriber's consumer looks: ``lookBeforeParking``, or what a test sets.
    private let lookLength: UInt64

    /// The looks in a row that found nothing, counting the ones skipped since: set to 0 by a
    /// look that finds a batch, or by a batch that waits already when the consumer asks.
    private let fruitlessLooks = Atomic<Int>(0)
    /// The looks made, for tests.
    let looksMade = Atomic<Int>(0)

    private struct State: ~Copyable {
        var pending: RawChanges?
        var waiter: UnsafeContinuation<RawChanges?, Never>?
        var finished = false
    }

    init(interest: Interest, lookLength: UInt64 = ChangeSubscriber.lookBeforeParking) {
        self.interest = interest
        self.lookLength = lookLength
    }

    /// Whether a consumer whose last `fruitless` looks found nothing looks again: after three in
    /// a row, only every 32nd time (commits further apart than a look waste it), until a look or
    /// a batch found waiting shows commits close together again.
    static func looks(after fruitless: Int) -> Bool {
        fruitless < 3 || fruitless % 32 == 0
    }

    private var limit: Int {
        switch interest {
        case .all(let limit): limit
        case .key: 1
        }
    }

    /// A parked consumer and the batch to resume it with. The continuation is an unsafe one, whose
    /// layout the compiler knows (a checked one's is resilient: every delivery would look up its
    /// type's metadata). Each is taken from ``State/waiter`` under the lock, so it is resumed once.
    struct Wake {
        let waiter: UnsafeContinuation<RawChanges?, Never>
        let batch: RawChanges
        func resume() { waiter.resume(returning: batch) }
    }

    /// Hands `batch` to the waiting consumer, or merges it into what waits. Never blocks on the
    /// consumer: a writer's thread calls it.
    func deliver(_ batch: RawChanges) {
        deliverLater(batch)?.resume()
    }

    /// Hands `batch` on as ``deliver(_:)`` does, but returns the parked consumer rather than
    /// resuming it: the caller resumes it once out of its locks, or has another thread do it.
    func deliverLater(_ batch: RawChanges) -> Wake? {
        switch interest {
        case .key(let key):
            guard batch.mentions(key) else { return nil }
            // Only the fact matters: the observer reads the record again.
            return hand(batch.forgotten)
        case .all(let limit):
            // Not a choice of the two in one expression, which copies the batch it picks (a count
            // of a reference to each of its buffers, whose cache lines the consumer shares).
            if batch.entries.count > limit {
                return hand(batch.forgotten)
            } else {
                return hand(batch)
            }
        }
    }

    /// Hands on `batch` as it is, copied only into where it waits (its buffers are shared with
    /// the writer's journal and the consumer's thread).
    private func hand(_ batch: RawChanges) -> Wake? {
        let limit = self.limit
        let waiter = state.withLock { state -> UnsafeContinuation<RawChanges?, Never>? in
            guard !state.finished else { return nil }
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            if state.pending == nil {
                state.pending = batch
                batchWaits.store(true, ordering: .releasing)
            } else {
                state.pending?.merge(batch, limit: limit)
            }
            return nil
        }
        return waiter.map { Wake(waiter: $0, batch: batch) }
    }

    /// Whether a batch waits to be taken (for tests of when batches are queued).
    var hasPending: Bool { state.withLock { $0.pending != nil } }

    /// Whether a consumer is parked, waiting for a batch (for tests).
    var hasWaiter: Bool { state.withLock { $0.waiter != nil } }

    /// The next batch: what waits, or the next one delivered; `nil` once finished or cancelled.
    func next() async -> RawChanges? {
        if case .all = interest { lookBeforeParking() }
        if let ready = state.withLock({ state -> RawChanges?? in
            if let pending = state.pending {
                state.pending = nil
                batchWaits.store(false, ordering: .relaxed)
                return .some(pending)
            }
            return state.finished ? .some(nil) : .none
        }) {
            return ready
        }
        return await withTaskCancellationHandler {
            await withUnsafeContinuation { (continuation: UnsafeContinuation<RawChanges?, Never>) in
                let immediate = state.withLock { state -> RawChanges?? in
                    if let pending = state.pending {
                        state.pending = nil
                        batchWaits.store(false, ordering: .relaxed)
                        return .some(pending)
                    }
                    if state.finished || Task.isCancelled { return .some(nil) }
                    if let previous = state.waiter {
                        // Two consumers of one subscription: the earlier one ends.
                        state.waiter = nil
                        previous.resume(returning: nil)
                    }
                    state.waiter = continuation
                    return .none
                }
                if let immediate { continuation.resume(returning: immediate) }
            }
        } onCancel: {
            finish()
        }
    }

    /// Looks for the next batch a moment before parking, if looking has been finding batches
    /// (``looks(after:)``), pausing between looks (a loop of loads slows a writer on the same core).
    private func lookBeforeParking() {
        let fruitless = fruitlessLooks.load(ordering: .relaxed)
        if batchWaits.load(ordering: .acquiring) {
            // Commits come faster than the consumer takes them: looking pays again.
            if fruitless != 0 { fruitlessLooks.store(0, ordering: .relaxed) }
            return
        }
        guard Self.looks(after: fruitless) else {
            fruitlessLooks.store(fruitless &+ 1, ordering: .relaxed)
            return
        }
        looksMade.add(1, ordering: .relaxed)
        let deadline = monotonicNanoseconds() &+ lookLength
        repeat {
            if batchWaits.load(ordering: .acquiring) {
                if fruitless != 0 { fruitlessLooks.store(0, ordering: .relaxed) }
                return
            }
            for _ in 0..<8 { hoard_spin_hint() }
        } while monotonicNanoseconds() < deadline
        fruitlessLooks.store(fruitless &+ 1, ordering: .relaxed)
    }

    /// Ends the subscription: a waiting consumer gets `nil`, and nothing more is kept.
    func finish() {
        let waiter = state.withLock { state -> UnsafeContinuation<RawChanges?, Never>? in
            state.finished = true
            state.pending = nil
            batchWaits.store(false, ordering: .relaxed)
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }
}
