#if Postgres
internal import PostgresNIO
internal import Synchronization

/// postgres-nio's connection pool, replaced by a fresh one while PostgreSQL cannot be reached.
///
/// The pool retries a connection that fails after a backoff of its own, which grows to a minute
/// and cannot be configured: after a long outage, a replica would notice that PostgreSQL is back
/// up to a minute late, and catch up only then. A pool that has failed is replaced instead (the
/// listening loop does it every ``PostgresBus/Configuration/backoff``'s longest wait while it has
/// no connection); a new pool tries at once. Its steps take ``client`` anew each time.
final class Pools: Sendable {
    private struct State {
        var client: PostgresClient
        /// The pool failures counted when `client` was made.
        var failuresAtStart: Int
        var generation = 0
        var running: [Int: Task<Void, Never>] = [:]
        var stopped = false
    }
    private let state: Mutex<State>
    private let make: @Sendable () -> PostgresClient

    init(failures: Int, make: @escaping @Sendable () -> PostgresClient) {
        self.make = make
        state = Mutex(State(client: make(), failuresAtStart: failures))
    }

    /// The current pool.
    var client: PostgresClient { state.withLock { $0.client } }

    /// How many times the pool was replaced.
    var generation: Int { state.withLock { $0.generation } }

    /// Runs the current pool.
    func start() {
        state.withLock { state in
            guard !state.stopped else { return }
            run(state.client, generation: state.generation, in: &state)
        }
    }

    /// Replaces the pool with a fresh one, and stops the old one (what waits for one of its
    /// connections fails), when the pool failures counted moved past `failures` since it was made.
    /// Returns whether it did.
    func replace(ifFailedBefore failures: Int) -> Bool {
        let old = state.withLock { state -> Task<Void, Never>? in
            guard !state.stopped, failures > state.failuresAtStart else { return nil }
            let old = state.running[state.generation]
            state.generation += 1
            state.client = make()
            state.failuresAtStart = failures
            run(state.client, generation: state.generation, in: &state)
            return old
        }
        old?.cancel()
        return old != nil
    }

    /// Stops every pool, and returns once they have ended.
    func stop() async {
        let running = state.withLock { state in
            state.stopped = true
            return Array(state.running.values)
        }
        for task in running { task.cancel() }
        for task in running { await task.value }
    }

    private func run(_ client: PostgresClient, generation: Int, in state: inout State) {
        state.running[generation] = Task {
            await client.run()
            self.state.withLock { _ = $0.running.removeValue(forKey: generation) }
        }
    }
}
#endif
