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
    /// parked consumer is a system call on the committing thread (`futex`, `try_to_wake_up`:
    /// several microseconds on this project's machine, more than a small commit costs); a
    /// consumer that keeps up with a stream of commits is found looking, and a commit then only
    /// merges its batch. The consumer's thread pays the wait, at most this long after each batch.
    static let lookBeforeParking: UInt64 = 20_000

    private struct State: ~Copyable {
        var pending: RawChanges?
        var waiter: CheckedContinuation<RawChanges?, Never>?
        var finished = false
    }

    init(interest: Interest) {
        self.interest = interest
    }

    private var limit: Int {
        switch interest {
        case .all(let limit): limit
        case .key: 1
        }
    }

    /// Hands `batch` to the waiting consumer, or merges it into what waits. Never blocks on the
    /// consumer: a writer's thread calls it.
    func deliver(_ batch: RawChanges) {
        switch interest {
        case .key(let key):
            guard batch.mentions(key) else { return }
            // Only the fact matters: the observer reads the record again.
            hand(batch.forgotten)
        case .all(let limit):
            // Not a choice of the two in one expression, which copies the batch it picks (a count
            // of a reference to each of its buffers, whose cache lines the consumer shares).
            if batch.entries.count > limit {
                hand(batch.forgotten)
            } else {
                hand(batch)
            }
        }
    }

    /// Hands on `batch` as it is. Its buffers are shared with the writer's journal and, once
    /// taken, with the consumer's thread: each count of a reference to them is a cache line that
    /// moves between cores, so the batch is copied only into where it waits.
    private func hand(_ batch: RawChanges) {
        let limit = self.limit
        let waiter = state.withLock { state -> CheckedContinuation<RawChanges?, Never>? in
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
        waiter?.resume(returning: batch)
    }

    /// Whether a batch waits to be taken (for tests of when batches are queued).
    var hasPending: Bool { state.withLock { $0.pending != nil } }

    /// The next batch: what waits, or the next one delivered; `nil` once finished or cancelled.
    func next() async -> RawChanges? {
        if case .all = interest, !batchWaits.load(ordering: .acquiring) {
            // Look for the next batch a moment before parking (`lookBeforeParking`), pausing
            // between looks: a loop that only loads takes execution units from the writer when
            // the two share a physical core (a virtual machine's two vCPUs often do), and cost
            // a single put about 7% of its time more than the loop that pauses.
            let deadline = monotonicNanoseconds() &+ Self.lookBeforeParking
            while !batchWaits.load(ordering: .acquiring) && monotonicNanoseconds() < deadline {
                for _ in 0..<8 { hoard_spin_hint() }
            }
        }
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
            await withCheckedContinuation { (continuation: CheckedContinuation<RawChanges?, Never>) in
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

    /// Ends the subscription: a waiting consumer gets `nil`, and nothing more is kept.
    func finish() {
        let waiter = state.withLock { state -> CheckedContinuation<RawChanges?, Never>? in
            state.finished = true
            state.pending = nil
            batchWaits.store(false, ordering: .relaxed)
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }
}
