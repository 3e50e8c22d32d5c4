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
        /// Whether `client` has failed to make a connection.
        var failed: Failed
        var generation = 0
        var running: [Int: Task<Void, Never>] = [:]
        var stopped = false
    }
    private let state: Mutex<State>
    private let make: @Sendable (_ failed: @escaping @Sendable () -> Void) -> PostgresClient

    /// Pools made by `make`, which passes each the function to call when it fails to make a
    /// connection (its log handler calls it: the pool tells nothing else).
    init(make: @escaping @Sendable (_ failed: @escaping @Sendable () -> Void) -> PostgresClient) {
        self.make = make
        let failed = Failed()
        state = Mutex(State(client: make { failed.set() }, failed: failed))
    }

    /// The current pool.
    var client: PostgresClient { state.withLock { $0.client } }

    /// How many times the pool was replaced.
    var generation: Int { state.withLock { $0.generation } }

    /// Runs the current pool; after ``stop()`` (a bus run again), a fresh one, since a pool runs once.
    func start() {
        state.withLock { state in
            if state.stopped {
                renew(&state)
                state.stopped = false
            }
            run(state.client, generation: state.generation, in: &state)
        }
    }

    /// Replaces the pool with a fresh one when it has failed to make a connection, and stops the
    /// old one (what waits for one of its connections fails). Returns whether it did.
    func replaceIfFailed() -> Bool {
        let (replaced, old) = state.withLock { state -> (Bool, Task<Void, Never>?) in
            guard !state.stopped, state.failed.value else { return (false, nil) }
            // Left in `running` until it has ended: ``stop()`` waits for it too.
            let old = state.running[state.generation]
            renew(&state)
            run(state.client, generation: state.generation, in: &state)
            return (true, old)
        }
        old?.cancel()
        return replaced
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

    /// Makes a fresh pool the current one, of the next generation (not running yet).
    private func renew(_ state: inout State) {
        let failed = Failed()
        state.generation += 1
        state.client = make { failed.set() }
        state.failed = failed
    }

    private func run(_ client: PostgresClient, generation: Int, in state: inout State) {
        state.running[generation] = Task {
            await client.run()
            self.state.withLock { _ = $0.running.removeValue(forKey: generation) }
        }
    }

    /// Set once a pool fails to make a connection.
    final class Failed: Sendable {
        private let flag = Mutex(false)
        var value: Bool { flag.withLock { $0 } }
        func set() { flag.withLock { $0 = true } }
    }
}
#endif
