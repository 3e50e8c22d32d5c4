internal import Dispatch
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
        let model = try store.readLMDB { txn in
            try get(id, in: txn, refreshDue: &due, checkingRefresh: true, startedAt: start)
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
    /// when there is one. When it passes before the upstream has answered, the flight's fetch is
    /// left to run on (or cancelled, if no one else waits and the timeouts say so) and `.timedOut`
    /// is returned; an answer that came in time is waited for while it is stored.
    func wait(
        for ticket: SingleFlight<Model>.Ticket, in flights: SingleFlight<Model>,
        until deadline: FetchTimeouts.Deadline?
    ) async throws -> Waited {
        guard let deadline else { return .answered(try await flights.wait(ticket)) }
        // The instant on the monotonic clock the timer counts in (ContinuousClock also counts a
        // suspended machine's time, DispatchTime does not: the difference is taken now).
        // (Clamped to a year, so that a limit near `Int64.max` seconds cannot overflow it.)
        let remaining = min(max(deadline.instant - .now, .zero), .seconds(366 * 86_400))
        let (seconds, attoseconds) = remaining.components
        let nanoseconds = seconds * 1_000_000_000 + attoseconds / 1_000_000_000
        do {
            return .answered(
                try await flights.wait(
                    ticket, until: DispatchTime.now() + DispatchTimeInterval.nanoseconds(Int(nanoseconds)),
                    keepingItRunning: deadline.completesInBackground))
        } catch is SingleFlight<Model>.TimedOut {
            return .timedOut(deadline.limit)
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
