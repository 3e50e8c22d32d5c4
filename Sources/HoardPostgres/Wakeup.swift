#if Postgres
internal import Logging
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

/// Runs operations one at a time, in the order they were asked for. An operation whose caller was
/// cancelled before its turn does not run (PostgreSQL away, callers that gave up must not leave a
/// queue of publications behind them).
actor SerialQueue {
    private var tail: Task<Void, Never>?
    private let outstanding: Outstanding

    init(outstanding: Outstanding) { self.outstanding = outstanding }

    /// Runs `operation`, which does `what`, after every operation asked for before it.
    func run<R: Sendable>(_ what: String, _ operation: @escaping @Sendable () async throws -> R) async throws -> R {
        let previous = tail
        let task = outstanding.spawn(what) { () async throws -> R in
            await previous?.value
            try Task.checkCancellation()
            return try await operation()
        }
        tail = Task { _ = try? await task.value }
        return try await withTaskCancellationHandler {
            try await task.value
        } onCancel: {
            task.cancel()
        }
    }
}

/// Counts the unstructured tasks the bus starts, so that ``PostgresBus/run()`` returns only once
/// none of them runs. Each holds the bus, and through it the store: one still ending after `run()`
/// returned would keep the store's file open, and the application's next open of that store in
/// the same process would fail with `alreadyOpen`.
final class Outstanding: Sendable {
    /// The steps running, by a number of their own: what each does.
    private let running = Mutex((next: 0, steps: [Int: String]()))
    private let emptied = Wakeup()

    /// Starts `body`, which does `what`, in a task of its own, counted until `body` has returned
    /// and been released.
    func spawn<R: Sendable>(_ what: String, _ body: @escaping @Sendable () async throws -> R) -> Task<R, any Error> {
        let number = running.withLock { running in
            running.next += 1
            running.steps[running.next] = what
            return running.next
        }
        let held = HeldBody(body)
        return Task {
            let result = await held.run()
            if self.running.withLock({ running in
                running.steps[number] = nil
                return running.steps.isEmpty
            }) {
                self.emptied.signal()
            }
            return try result.get()
        }
    }

    /// What the steps still running do, in the order they began.
    var steps: [String] { running.withLock { $0.steps.sorted { $0.key < $1.key }.map(\.value) } }

    /// Returns `true` once no counted task runs, or `false` at `deadline`.
    func drained(until deadline: ContinuousClock.Instant) async -> Bool {
        while true {
            let seen = emptied.generation
            if running.withLock({ $0.steps.isEmpty }) { return true }
            if ContinuousClock.now >= deadline { return false }
            await emptied.wait(after: seen, until: deadline)
        }
    }

    /// Returns once no counted task runs, or after `limit` with a warning that names the steps.
    func drained(within limit: Duration, logger: Logger) async {
        if await !drained(until: .now + limit) {
            logger.warning(
                "PostgresBus: a step on PostgreSQL has not ended \(limit) after the bus stopped; it still holds the store",
                metadata: ["steps": "\(steps.joined(separator: ", "))"])
        }
    }
}

/// A task's body, which the task lets go of before it counts as finished (what a closure captures
/// is otherwise released only as its task completes, after the count moved).
private final class HeldBody<R: Sendable>: Sendable {
    private let body: Mutex<(@Sendable () async throws -> R)?>

    init(_ body: @escaping @Sendable () async throws -> R) { self.body = Mutex(body) }

    /// Runs the body once; it is released when this returns.
    func run() async -> Result<R, any Error> {
        guard let body = body.withLock({ $0.take() }) else { return .failure(CancellationError()) }
        return await Result(catching: body)
    }
}
#endif

#if Postgres
/// A bus operation that took longer than ``PostgresBus/Configuration/operationTimeout``.
public struct PostgresBusTimeout: Error, CustomStringConvertible, Sendable {
    /// What was being done.
    public var operation: String
    /// The limit it passed.
    public var limit: Duration

    /// The operation and the limit in one sentence.
    public var description: String { "PostgresBus: \(operation) took longer than \(limit); PostgreSQL may be away" }
}

/// Runs `operation`, and gives up on it after `limit`, or when `abandonedBy` signals after the
/// start (the bus's signal that its connection to PostgreSQL was lost: a query on a connection
/// PostgreSQL dropped may never end, and its retry should not wait for the limit). Its task is
/// cancelled and left to end on its own, counted in `outstanding`, and the caller goes on at once.
/// (A task group would wait for a child that does not heed the cancellation; such a query was seen
/// to be one.)
func withTimeout<R: Sendable>(
    _ limit: Duration, _ what: String, abandonedBy: Wakeup? = nil, in outstanding: Outstanding,
    _ operation: @escaping @Sendable () async throws -> R
) async throws -> R {
    let race = TimeoutRace<R>()
    let seen = abandonedBy?.generation
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<R, any Error>) in
            race.waiter.withLock { $0 = continuation }
            let task = outstanding.spawn(what) {
                let result = await Result(catching: operation)
                race.finish(with: result)
            }
            race.work.withLock { $0 = task }
            race.add {
                guard (try? await Task.sleep(for: limit)) != nil else { return }
                task.cancel()
                race.finish(with: .failure(PostgresBusTimeout(operation: what, limit: limit)))
            }
            if let abandonedBy, let seen {
                race.add {
                    await abandonedBy.wait(after: seen)
                    guard !Task.isCancelled else { return }
                    task.cancel()
                    race.finish(with: .failure(PostgresBusConnectionLost(operation: what)))
                }
            }
        }
    } onCancel: {
        race.work.withLock { $0 }?.cancel()
        race.finish(with: .failure(CancellationError()))
    }
}

/// A bus operation given up because the connection to PostgreSQL was lost while it ran.
struct PostgresBusConnectionLost: Error, CustomStringConvertible {
    var operation: String
    var description: String { "PostgresBus: the connection to PostgreSQL was lost while \(operation)" }
}

/// The sides of ``withTimeout(_:_:abandonedBy:_:)``: whichever finishes first resumes the caller,
/// and the watchers are cancelled.
final class TimeoutRace<R: Sendable>: Sendable {
    let waiter = Mutex<CheckedContinuation<R, any Error>?>(nil)
    let work = Mutex<Task<Void, any Error>?>(nil)
    private let watchers = Mutex<(tasks: [Task<Void, Never>], finished: Bool)>(([], false))

    /// Starts a watcher that may finish the race.
    func add(_ watcher: @escaping @Sendable () async -> Void) {
        let task = Task { await watcher() }
        let finished = watchers.withLock { state in
            if !state.finished { state.tasks.append(task) }
            return state.finished
        }
        if finished { task.cancel() }
    }

    func finish(with result: Result<R, any Error>) {
        guard let waiter = waiter.withLock({ $0.take() }) else { return }
        let tasks = watchers.withLock { state in
            state.finished = true
            defer { state.tasks = [] }
            return state.tasks
        }
        for task in tasks { task.cancel() }
        waiter.resume(with: result)
    }
}

extension Result where Failure == any Error {
    init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
#endif
