internal import LMDB

// Read-through for slow upstreams: the bounded wait for a fetch (FetchTimeouts), and the
// refresh a hit starts ahead of a record's expiry (Freshness.refreshAhead).

extension HoardCollection where Model: Sendable, Model.ID: Sendable {
    /// The hit path of a collection that refreshes ahead (``Freshness/refreshAhead``): the model
    /// stored for `id` (`nil` as ``get(_:)`` answers it) and, in the same read transaction, whether
    /// its record is past the refresh point; if so, starts a background refresh of it with the
    /// fetcher `fetch` makes of the model.
    @usableFromInline
    func getRefreshingAhead(_ id: Model.ID, _ fetch: (Model) -> Fetcher) throws -> Model? {
        let start = monotonicNanoseconds()
        defer { state.metrics.getDuration.recordSince(start) }
        var due = false
        let model = try store.environment.read { txn in
            try get(id, in: txn, refreshDue: &due, checkingRefresh: true)
        }
        if due, let model, let key = try? keyBytes(id), startRefresh(of: [key], ids: [id], fetch: fetch(model)) {
            state.counters.add(.refreshesAhead)
        }
        return model
    }

    // MARK: - Timeouts

    /// How a bounded wait for a flight ended.
    enum Waited {
        case answered(Model?)
        /// The deadline passed first; the limit it was set by.
        case timedOut(Duration)
    }

    /// Waits for `ticket`'s flight, until `deadline` (the instant and the limit it stands for)
    /// when there is one. When it passes, the flight's fetch is left to run on (or cancelled, if
    /// no one else waits and the timeouts say so) and `.timedOut` is returned.
    func wait(
        for ticket: SingleFlight<Model>.Ticket, in flights: SingleFlight<Model>,
        until deadline: FetchTimeouts.Deadline?
    ) async throws -> Waited {
        guard let deadline else { return .answered(try await flights.wait(ticket)) }
        return try await withThrowingTaskGroup(of: Waited.self) { group in
            group.addTask { .answered(try await flights.wait(ticket)) }
            group.addTask {
                // A tolerance of its own: without one, Dispatch's default leeway lets a timer
                // fire up to a tenth of its interval late (10 ms on a 100 ms timeout).
                try await Task.sleep(until: deadline.instant, tolerance: .milliseconds(1), clock: .continuous)
                return .timedOut(deadline.limit)
            }
            defer { group.cancelAll() }
            guard let first = try await group.next() else { throw CancellationError() }
            // A timeout bounds the upstream, not the store's write of its answer (a commit on a
            // loaded disk): once the upstream has answered, the read waits for the write.
            if case .timedOut = first, flights.hasAnswered(ticket) {
                while let next = try await group.next() {
                    if case .answered = next { return next }
                }
            }
            // Before the waiter is cancelled (which leaves the flight): a fetch that should finish
            // is not stopped by its last waiter leaving.
            if case .timedOut = first, deadline.completesInBackground { flights.keepRunning(ticket) }
            return first
        }
    }

    /// A read whose wait timed out after `limit`: the stale record when there is one, else the error.
    func timedOut(_ key: [UInt8], after limit: Duration, serving stale: Model?) throws -> Model {
        if let stale {
            state.counters.add(.softTimeouts)
            state.counters.add(.staleServed)
            return stale
        }
        state.counters.add(.hardTimeouts)
        throw HoardError.fetchTimedOut(collection: name, key: storedKey(key), after: limit)
    }
}
