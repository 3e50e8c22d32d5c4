#if Postgres
internal import Synchronization

/// A wake-up that many may wait for: each ``signal()`` moves its generation on and resumes every
/// waiter. A waiter passes the generation it saw before checking its condition, so a signal sent
/// between the check and the wait is never missed; signals sent while nobody waits coalesce.
final class Wakeup: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var nextWaiter = 0
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
    }
    private let state = Mutex(State())

    var generation: UInt64 { state.withLock { $0.generation } }

    func signal() {
        let waiters = state.withLock { state in
            state.generation &+= 1
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the generation differs from `seen`, or the task is cancelled.
    func wait(after seen: UInt64 = .max) async {
        let id = state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if (seen != .max && state.generation != seen) || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }

    /// Returns once the generation differs from `seen`, at `deadline`, or when the task is cancelled.
    func wait(after seen: UInt64, until deadline: ContinuousClock.Instant) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.wait(after: seen) }
            group.addTask { try? await Task.sleep(until: deadline, clock: .continuous) }
            await group.next()
            group.cancelAll()
        }
    }
}

/// Runs operations one at a time, in the order they were asked for.
actor SerialQueue {
    private var tail: Task<Void, Never>?

    func run<R: Sendable>(_ operation: @escaping @Sendable () async throws -> R) async throws -> R {
        let previous = tail
        let task = Task { () async throws -> R in
            await previous?.value
            return try await operation()
        }
        tail = Task { _ = try? await task.value }
        return try await task.value
    }
}
#endif
