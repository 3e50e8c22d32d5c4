public import Foundation
public import Hoard
internal import Synchronization

// MARK: - Replicas in one process, without a database

/// A change log in memory that several stores share through their ``InMemoryBus``es: what
/// PostgreSQL's log table is to `PostgresBus`, for tests of replicas that must agree.
///
/// ```swift
/// let log = InMemoryLog()
/// let busA = InMemoryBus(store: storeA, log: log)
/// let busB = InMemoryBus(store: storeB, log: log)
/// try await usersA.invalidate(7)
/// try await busA.publish()        // the outbox of A into the log
/// try await busB.catchUp()        // B applies it: its record of 7 is gone
/// ```
///
/// Code that runs against `PostgresBus` in production makes the same calls here (Hoard's `ChangeBus`):
/// `flush()`, then `waitUntilApplied(through:timeout:)`, which returns once every store with a bus
/// on the log has caught up that far (each in its test's own `catchUp()`).
public final class InMemoryLog: Sendable {
    private struct State {
        var identity = UUID().uuidString
        var entries: [(sequence: Int64, change: RemoteChange)] = []
        var head: Int64 = 0
        var trimmedThrough: Int64 = 0
        var applied: [UUID: Int64] = [:]
        /// The stores with a bus on the log: the replicas a wait is for.
        var joined: Set<UUID> = []
        var waiters: [(id: Int, sequence: Int64, resume: CheckedContinuation<Bool, Never>)] = []
        var nextWaiter = 0

        func everyStoreApplied(through sequence: Int64) -> Bool {
            joined.allSatisfy { (applied[$0] ?? 0) >= sequence }
        }

        /// The waits that are over, taken out.
        mutating func takeReady() -> [CheckedContinuation<Bool, Never>] {
            let (joined, applied) = (self.joined, self.applied)
            let over = { (sequence: Int64) in joined.allSatisfy { (applied[$0] ?? 0) >= sequence } }
            let ready = waiters.filter { over($0.sequence) }
            waiters.removeAll { over($0.sequence) }
            return ready.map(\.resume)
        }
    }
    private let state = Mutex(State())

    /// An empty log.
    public init() {}

    /// The log's identity; ``recreate()`` gives it a new one.
    public var identity: String { state.withLock { $0.identity } }
    /// The sequence number of the last change appended.
    public var head: Int64 { state.withLock { $0.head } }

    /// Appends `changes`, each under a new sequence number; returns the last.
    @discardableResult
    public func append(_ changes: [RemoteChange]) -> Int64 {
        state.withLock { state in
            for change in changes {
                state.head += 1
                state.entries.append((state.head, change))
            }
            return state.head
        }
    }

    /// Forgets every change up to `sequence`, as a log's retention does: a store behind it must reset.
    public func trim(through sequence: Int64) {
        state.withLock { state in
            state.entries.removeAll { $0.sequence <= sequence }
            state.trimmedThrough = max(state.trimmedThrough, min(sequence, state.head))
        }
    }

    /// Starts the log anew with a new identity and no changes, as a database restored from
    /// scratch would: every store following it must reset.
    public func recreate() {
        state.withLock { state in
            // The stores keep their buses on it, and a wait under way goes on, for the new log.
            var fresh = State()
            (fresh.joined, fresh.waiters, fresh.nextWaiter) = (state.joined, state.waiters, state.nextWaiter)
            state = fresh
        }
    }

    /// The highest sequence number `store` has applied, as its bus reported it.
    public func applied(by store: UUID) -> Int64? { state.withLock { $0.applied[store] } }

    func snapshot(after sequence: Int64) -> (log: String, trimmedThrough: Int64, head: Int64, changes: [RemoteChange]) {
        state.withLock { state in
            (
                state.identity, state.trimmedThrough, state.head,
                state.entries.filter { $0.sequence > sequence }.map(\.change)
            )
        }
    }

    func report(_ store: UUID, applied sequence: Int64) {
        let ready = state.withLock { state in
            state.applied[store] = max(state.applied[store] ?? 0, sequence)
            return state.takeReady()
        }
        for waiter in ready { waiter.resume(returning: true) }
    }

    func join(_ store: UUID) { state.withLock { _ = $0.joined.insert(store) } }

    /// Appends what `store` published; its own changes count as applied by it when it had applied
    /// everything before them.
    func publish(_ changes: [RemoteChange], by store: UUID) {
        let ready = state.withLock { state in
            let caughtUp = (state.applied[store] ?? 0) >= state.head
            for change in changes {
                state.head += 1
                state.entries.append((state.head, change))
            }
            if caughtUp { state.applied[store] = state.head }
            return state.takeReady()
        }
        for waiter in ready { waiter.resume(returning: true) }
    }

    func waitUntilApplied(through sequence: Int64, timeout: Duration) async -> Bool {
        await withCheckedContinuation { continuation in
            let id: Int? = state.withLock { state in
                guard !state.everyStoreApplied(through: sequence) else { return nil }
                state.nextWaiter += 1
                state.waiters.append((state.nextWaiter, sequence, continuation))
                return state.nextWaiter
            }
            guard let id else { return continuation.resume(returning: true) }
            Task {
                try? await Task.sleep(for: timeout)
                let expired = self.state.withLock { state in
                    let index = state.waiters.firstIndex { $0.id == id }
                    return index.map { state.waiters.remove(at: $0) }
                }
                expired?.resume.resume(returning: false)
            }
        }
    }
}

/// One store's connection to an ``InMemoryLog``: publishes the store's outbox into the log and
/// applies the log's changes to the store, as `PostgresBus` does with PostgreSQL, but in steps a
/// test calls.
public struct InMemoryBus: ChangeBus {
    /// The store.
    public let store: Store
    /// The log it shares with the other stores.
    public let log: InMemoryLog
    /// The bus's name in the store (its position is kept under it).
    public let name: String

    /// A bus between `store` and `log`.
    public init(store: Store, log: InMemoryLog, name: String = "memory") {
        self.store = store
        self.log = log
        self.name = name
        // A read-only store without an identity yet publishes nothing, and is not waited for.
        if let identity = try? store.replication.identity() { log.join(identity) }
    }

    /// Moves every key waiting in the store's outbox into the log; returns how many keys.
    ///
    /// - Throws: `HoardError.storage` when the store fails.
    @discardableResult
    public func publish() async throws -> Int {
        var published = 0
        while true {
            let pending = try store.replication.pendingAnnouncements()
            if pending.isEmpty { return published }
            log.publish(pending.changes, by: try store.replication.identity())
            try await store.replication.acknowledge(pending)
            published += pending.count
        }
    }

    /// Applies every change in the log that the store has not applied (resetting the store first
    /// when it cannot catch up exactly); returns what was done.
    ///
    /// - Throws: `HoardError.storage` when the store fails.
    @discardableResult
    public func catchUp() async throws -> ApplyResult {
        let replication = store.replication
        let (identity, trimmed, head, _) = log.snapshot(after: .max)
        let after = try await replication.startFollowing(bus: name, log: identity, trimmedThrough: trimmed, head: head)
        let (logNow, _, headNow, changes) = log.snapshot(after: after)
        guard logNow == identity else { return try await catchUp() }  // recreated meanwhile
        let result = try await replication.apply(
            changes, through: BusPosition(log: identity, sequence: headNow), bus: name)
        log.report(try replication.identity(), applied: headNow)
        return result
    }

    /// Moves every key waiting in the store's outbox into the log (``publish()``), and returns
    /// the log's position after it.
    ///
    /// - Throws: `HoardError.storage` when the store fails.
    @discardableResult
    public func flush() async throws -> Int64 {
        try await publish()
        return log.head
    }

    /// Waits until every store with a bus on the log has applied it through `sequence` (in its
    /// ``catchUp()``); `false` when `timeout` passes first.
    ///
    /// - Throws: nothing: the log in memory is always there.
    public func waitUntilApplied(through sequence: Int64, timeout: Duration) async throws -> Bool {
        await log.waitUntilApplied(through: sequence, timeout: timeout)
    }
}
