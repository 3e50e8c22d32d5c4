internal import Dispatch
internal import Synchronization

/// The fetches of one collection that are in flight in this process, so that concurrent misses
/// for one key share one fetch (single flight).
///
/// A *flight* is the fetch of one key as its waiters see it; a *group* is one call of a fetcher,
/// which answers one flight (`get(_:timeouts:orFetch:)`) or many (`get(_:timeouts:orFetchMissing:)`).
/// Everything is under one lock (each operation is a few dictionary operations).
///
/// Cancellation: a waiter whose task is cancelled stops waiting at once (it gets
/// `CancellationError`); the group's task is cancelled only when no flight of the group has a
/// waiter left, and then its flights are forgotten, so that a later miss starts a new fetch. A
/// background refresh has no waiters and is never cancelled for it.
final class SingleFlight<Model: Sendable>: Sendable {
    typealias Key = [UInt8]
    typealias Waiter = CheckedContinuation<Model?, any Error>

    struct Flight {
        var group: Int
        /// Waiters by number; `nil` until the waiter has suspended.
        var waiters: [Int: Waiter?] = [:]
        var result: Result<Model?, any Error>?
    }

    struct Group {
        var flights: [Int]
        var task: Task<Void, Never>?
        /// The race guard's ticket of the fetch (InvalidationGuard.swift), once it is about to call
        /// the upstream: a key invalidated after it is not joined, since its result may predate the change.
        var ticket: UInt64?
        /// A background refresh: it runs to its end whoever waits.
        var keepsRunning: Bool
        /// The group's task is running and has called the upstream.
        var calling = false
        /// The upstream has answered; what remains is storing the answer.
        var answered = false
    }

    struct State {
        var flightOfKey: [Key: Int] = [:]
        var flights: [Int: Flight] = [:]
        var groups: [Int: Group] = [:]
        var nextNumber = 0

        mutating func number() -> Int {
            nextNumber += 1
            return nextNumber
        }
    }

    private let state = Mutex(State())

    /// A place in a flight's queue of waiters, taken under the lock when the flight was joined
    /// (so that the flight's fetch is not cancelled before the waiter suspends).
    struct Ticket: Sendable {
        let flight: Int
        let waiter: Int
    }

    /// What ``join(_:keepsRunning:)`` did for each key.
    struct Joined: Sendable {
        /// A ticket per key, in the order of the keys.
        var tickets: [Ticket]
        /// The keys that had no flight, which the caller must fetch and ``finish(_:with:)``:
        /// `nil` when every key joined a flight already under way.
        var toFetch: (group: Int, keys: [Key])?
    }

    /// Joins the flight of each key, starting flights (one group) for the keys that have none, or
    /// whose flight's fetch began before the key was `invalidated(key, ticket)` (that flight goes
    /// on for the waiters it has). With `waiting: false` (a background refresh), no ticket is
    /// taken and only keys without a flight are fetched.
    func join(
        _ keys: [Key], waiting: Bool = true, keepsRunning: Bool = false,
        invalidated: (Key, UInt64) -> Bool
    ) -> Joined {
        state.withLock { state in
            var tickets: [Ticket] = []
            var newKeys: [Key] = []
            var newFlights: [Int] = []
            let group = state.number()
            for key in keys {
                let flight: Int
                if let existing = state.flightOfKey[key],
                    !(state.flights[existing].flatMap { state.groups[$0.group]?.ticket }.map { invalidated(key, $0) }
                        ?? false)
                {
                    flight = existing
                } else {
                    flight = state.number()
                    state.flights[flight] = Flight(group: group)
                    state.flightOfKey[key] = flight
                    newKeys.append(key)
                    newFlights.append(flight)
                }
                if waiting {
                    let waiter = state.number()
                    state.flights[flight]?.waiters[waiter] = .some(nil)
                    tickets.append(Ticket(flight: flight, waiter: waiter))
                }
            }
            guard !newKeys.isEmpty else { return Joined(tickets: tickets, toFetch: nil) }
            state.groups[group] = Group(flights: newFlights, task: nil, keepsRunning: keepsRunning)
            return Joined(tickets: tickets, toFetch: (group, newKeys))
        }
    }

    /// How many groups (calls of a fetcher) are under way.
    var groupsInFlight: Int { state.withLock { $0.groups.count } }

    /// Records the race guard's ticket of `group`'s fetch, before it calls the upstream.
    func began(_ group: Int, ticket: UInt64) {
        state.withLock { $0.groups[group]?.ticket = ticket }
    }

    /// Gives `group` the task that fetches for it (to cancel it when nobody waits any more).
    func attach(_ task: Task<Void, Never>, to group: Int) {
        let cancel = state.withLock { state -> Bool in
            guard state.groups[group] != nil else { return false }
            state.groups[group]?.task = task
            return Self.nobodyWaits(for: group, in: state)
        }
        if cancel { abandon(group) }
    }

    /// Ends the flights of `group` with each key's result (a key `results` lacks gets `missing`):
    /// their waiters resume, and the keys are forgotten, so that the next miss fetches again.
    func finish(_ group: Int, keys: [Key], with result: (Key) -> Result<Model?, any Error>) {
        var resume: [(Waiter, Result<Model?, any Error>)] = []
        state.withLock { state in
            guard let flights = state.groups.removeValue(forKey: group)?.flights else { return }
            for (key, flight) in zip(keys, flights) {
                let outcome = result(key)
                if state.flightOfKey[key] == flight { state.flightOfKey[key] = nil }
                guard var entry = state.flights[flight] else { continue }
                for case let (_, waiter?) in entry.waiters { resume.append((waiter, outcome)) }
                // Waiters that have not suspended yet find the result when they do.
                entry.waiters = entry.waiters.filter { $0.value == nil }
                entry.result = outcome
                state.flights[flight] = entry.waiters.isEmpty ? nil : entry
            }
        }
        for (waiter, outcome) in resume { waiter.resume(with: outcome) }
    }

    /// Waits for the result of the flight `ticket` belongs to; a cancelled task stops waiting
    /// (`CancellationError`), and the fetch is cancelled when no one else waits.
    func wait(_ ticket: Ticket) async throws -> Model? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: Waiter) in
                if let ready = suspend(ticket, continuation) { continuation.resume(with: ready) }
            }
        } onCancel: {
            leave(ticket)
        }
    }

    /// Puts `continuation` in `ticket`'s place; returns what to resume it with at once instead:
    /// the flight's result when it has one, `CancellationError` when the place was given up.
    private func suspend(_ ticket: Ticket, _ continuation: Waiter) -> Result<Model?, any Error>? {
        state.withLock { state in
            guard var flight = state.flights[ticket.flight] else { return .failure(CancellationError()) }
            if let result = flight.result {
                flight.waiters[ticket.waiter] = nil
                state.flights[ticket.flight] = flight.waiters.isEmpty ? nil : flight
                return result
            }
            guard flight.waiters[ticket.waiter] != nil else { return .failure(CancellationError()) }
            flight.waiters[ticket.waiter] = continuation
            state.flights[ticket.flight] = flight
            return nil
        }
    }

    /// The end of a bounded ``wait(_:until:keepingItRunning:)``: the waiter's place was given up.
    struct TimedOut: Error {}

    /// ``wait(_:)`` until `deadline` (a `DispatchTime`, on the monotonic clock) at most, then
    /// `TimedOut`, unless the flight's upstream has answered by then: the answer is being stored,
    /// and the wait goes on for it (a timeout bounds the upstream, not the store's commit). With
    /// `keepingItRunning`, a timed-out waiter first makes its group run to its end whoever waits.
    ///
    /// A timer resumes the waiter itself: one hand-over, where a race of two child tasks takes several.
    func wait(_ ticket: Ticket, until deadline: DispatchTime, keepingItRunning: Bool) async throws -> Model? {
        let timer = DispatchSource.makeTimerSource(flags: .strict, queue: timerQueue)
        defer { timer.cancel() }
        timer.setEventHandler { [self, timer] in
            if !self.timeOut(ticket, keepingItRunning: keepingItRunning) {
                timer.schedule(deadline: .now() + .milliseconds(1), leeway: .microseconds(100))
            }
        }
        timer.schedule(deadline: deadline, leeway: .microseconds(100))
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: Waiter) in
                let ready = suspend(ticket, continuation)
                // Armed once the waiter is in place, so that the timer finds it (or its result).
                // (Armed in either case: a timer source must not be released before it was.)
                timer.activate()
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            leave(ticket)
        }
    }

    /// At a bounded wait's deadline: gives up `ticket`'s place (its waiter resumes with
    /// `TimedOut`) unless its flight has a result or its upstream has answered. Returns `false`
    /// when the group's task has not called the upstream yet: the timer looks again a moment later.
    private func timeOut(_ ticket: Ticket, keepingItRunning: Bool) -> Bool {
        let (decided, waiter, abandonGroup) = state.withLock { state -> (Bool, Waiter?, Int?) in
            guard var flight = state.flights[ticket.flight], flight.result == nil,
                let group = state.groups[flight.group], !group.answered
            else { return (true, nil, nil) }
            guard group.calling else { return (false, nil, nil) }
            guard let slot = flight.waiters.removeValue(forKey: ticket.waiter) else { return (true, nil, nil) }
            if keepingItRunning { state.groups[flight.group]?.keepsRunning = true }
            state.flights[ticket.flight] = flight
            return (true, slot, Self.nobodyWaits(for: flight.group, in: state) ? flight.group : nil)
        }
        waiter?.resume(throwing: TimedOut())
        if let abandonGroup { abandon(abandonGroup) }
        return decided
    }

    /// Records that `group`'s task has begun, just before it calls the upstream.
    func markCalling(_ group: Int) {
        state.withLock { $0.groups[group]?.calling = true }
    }

    /// Records that `group`'s upstream call has returned (its answer is being stored).
    func markAnswered(_ group: Int) {
        state.withLock { $0.groups[group]?.answered = true }
    }

    /// Gives up `ticket`'s place: its waiter, if suspended, resumes with `CancellationError`.
    func leave(_ ticket: Ticket) {
        let (waiter, abandonGroup) = state.withLock { state -> (Waiter?, Int?) in
            guard var flight = state.flights[ticket.flight], flight.result == nil,
                let slot = flight.waiters.removeValue(forKey: ticket.waiter)
            else { return (nil, nil) }
            state.flights[ticket.flight] = flight
            return (slot, Self.nobodyWaits(for: flight.group, in: state) ? flight.group : nil)
        }
        waiter?.resume(throwing: CancellationError())
        if let abandonGroup { abandon(abandonGroup) }
    }

    /// Whether no flight of `group` has a waiter (and the group may be stopped).
    private static func nobodyWaits(for group: Int, in state: State) -> Bool {
        guard let entry = state.groups[group], !entry.keepsRunning, entry.task != nil else { return false }
        return entry.flights.allSatisfy { state.flights[$0]?.waiters.isEmpty ?? true }
    }

    /// Cancels the task of a group nobody waits for, and forgets its flights at once, so that a
    /// miss from now on starts a new fetch instead of joining one that is being cancelled.
    private func abandon(_ group: Int) {
        let task = state.withLock { state -> Task<Void, Never>? in
            guard Self.nobodyWaits(for: group, in: state), let entry = state.groups.removeValue(forKey: group) else {
                return nil
            }
            for flight in entry.flights { state.flights[flight] = nil }
            state.flightOfKey = state.flightOfKey.filter { !entry.flights.contains($0.value) }
            return entry.task
        }
        task?.cancel()
    }
}

/// The queue bounded waits' timers fire on; each handler takes a lock and resumes a waiter. (A
/// global: SingleFlight is generic, and a generic type cannot hold a static stored property.)
private let timerQueue = DispatchQueue(label: "hoard.read-through.timeouts")
