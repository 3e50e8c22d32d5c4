/// How a collection serves records past their time to live when it reads through
/// (``HoardCollection/get(_:timeouts:orFetch:)``), after HTTP's `stale-while-revalidate` and
/// `stale-if-error` (RFC 5861). Given where the collection is opened, beside its time to live.
///
/// ```swift
/// let users = try store.collection(
///     User.self, timeToLive: .minutes(5),
///     freshness: Freshness(staleWhileRevalidate: .minutes(1), staleIfError: .hours(1)))
/// ```
///
/// A record is *fresh* until its expiry. For `staleWhileRevalidate` after that, a read returns it
/// at once and refreshes it in the background (one refresh per key at a time). For `staleIfError`
/// after its expiry, a fetch that fails returns it instead of the error, which goes to
/// ``onFetchError`` and the store's logger. The windows count from the record's expiry; a record
/// without an expiry is always fresh.
public struct Freshness: Sendable {
    /// How long after its expiry a record is returned at once while a background fetch refreshes it.
    public var staleWhileRevalidate: Duration?
    /// How long after its expiry a record is returned when the fetch fails.
    public var staleIfError: Duration?
    /// How long a fetch's answer "no such ID" (`nil`) is remembered in this process, so that a
    /// missing ID does not reach the upstream on every read; `nil` (the default) remembers nothing.
    /// At most 10,000 IDs are remembered per collection.
    public var negativeTimeToLive: Duration?
    /// How long a read waits for its fetch (``FetchTimeouts``); a call may give its own.
    public var timeouts: FetchTimeouts
    /// The fraction of a record's time to live (between 0 and 1, exclusive) after which a
    /// read-through hit starts a background refresh of it, so that a record read often is
    /// replaced before it expires; `nil` (the default), or a value outside (0, 1), never. The
    /// refresh is single flight and not announced; when it fails the record stays as it is.
    public var refreshAhead: Double?
    /// How long after a key's fetch failed no background refresh of it starts (ahead of expiry or
    /// within `staleWhileRevalidate`), and a read within `staleIfError` returns the stale record
    /// without calling the upstream: an upstream that fails sees at most one call per key per
    /// period (``CollectionStatistics/throttledRefreshes`` counts the calls spared). By the
    /// store's clock; one second by default.
    public var retryFailedFetchAfter: Duration
    /// Called with the errors that are not thrown: a fetch that failed while a stale record was
    /// returned, a background refresh that failed, a fetched model that could not be stored.
    public var onFetchError: (@Sendable (FetchFailure) -> Void)?

    /// A freshness policy; every window is off unless given.
    public init(
        staleWhileRevalidate: Duration? = nil, staleIfError: Duration? = nil, negativeTimeToLive: Duration? = nil,
        timeouts: FetchTimeouts = FetchTimeouts(), refreshAhead: Double? = nil,
        retryFailedFetchAfter: Duration = .seconds(1), onFetchError: (@Sendable (FetchFailure) -> Void)? = nil
    ) {
        self.staleWhileRevalidate = staleWhileRevalidate
        self.staleIfError = staleIfError
        self.negativeTimeToLive = negativeTimeToLive
        self.timeouts = timeouts
        self.refreshAhead = refreshAhead
        self.retryFailedFetchAfter = retryFailedFetchAfter
        self.onFetchError = onFetchError
    }

    /// The point of a record's life, in the store's milliseconds, after which a hit refreshes it
    /// ahead; `nil` when refreshing ahead is off or the record has no expiry.
    func refreshPoint(writtenAt: Int64, expiresAt: Int64?) -> Int64? {
        guard let fraction = refreshAhead, fraction > 0, fraction < 1, let expiresAt, expiresAt > writtenAt else {
            return nil
        }
        return writtenAt + Int64((Double(expiresAt - writtenAt) * fraction).rounded(.down))
    }
}

/// How long a read-through waits for the upstream (FusionCache's factory timeouts), given in a
/// collection's ``Freshness`` or for one call (``HoardCollection/get(_:timeouts:orFetch:)``).
/// Both are off unless given; they bound the wait for the upstream's answer, not the fetch, which
/// runs on in the background unless a hard timeout stops it. An answer that came in time is
/// waited for while it is stored (its commit may queue on a loaded disk).
///
/// ```swift
/// let users = try store.collection(
///     User.self, timeToLive: .minutes(5),
///     freshness: Freshness(
///         staleIfError: .hours(1), timeouts: FetchTimeouts(soft: .milliseconds(100), hard: .seconds(2))))
/// ```
public struct FetchTimeouts: Sendable, Hashable {
    /// How long a read waits before it returns the stale record it has (one past its expiry
    /// within ``Freshness/staleIfError``, which the store vouches for); the fetch
    /// goes on in the background and stores its result. A read without such a record is not
    /// bound by it.
    public var soft: Duration?
    /// How long a read waits before it throws ``HoardError/fetchTimedOut(collection:key:after:)``.
    public var hard: Duration?
    /// What becomes of a fetch that a hard timeout left: `true` (the default) lets it run to its
    /// end and store its result, so that the next read finds it; `false` cancels its task once no
    /// other read waits for it (a fetch that ignores cancellation still ends on its own).
    public var completesInBackground: Bool

    /// Timeouts; each is off unless given.
    public init(soft: Duration? = nil, hard: Duration? = nil, completesInBackground: Bool = true) {
        self.soft = soft
        self.hard = hard
        self.completesInBackground = completesInBackground
    }

    /// When a wait that began at `start` ends: for a read with a stale record to serve, at the
    /// first of the two timeouts (the fetch then always runs on: its result replaces the stale
    /// record); for one without, at the hard timeout. `nil`: no bound.
    func deadline(from start: ContinuousClock.Instant, withStale: Bool) -> Deadline? {
        if withStale, let limit = [soft, hard].compactMap({ $0 }).min() {
            return Deadline(instant: start + limit, limit: limit, completesInBackground: true)
        }
        guard let hard else { return nil }
        return Deadline(instant: start + hard, limit: hard, completesInBackground: completesInBackground)
    }

    /// The end of a bounded wait (``deadline(from:withStale:)``).
    struct Deadline {
        var instant: ContinuousClock.Instant
        var limit: Duration
        var completesInBackground: Bool
    }
}

/// What a revalidating fetch answers (``HoardCollection/get(_:timeouts:orRevalidate:)``).
public enum Revalidation<Model: Sendable>: Sendable {
    /// The model, stored with `expiry` (by default the collection's time to live; an upstream's
    /// `Cache-Control: max-age` as `.after(.seconds(maxAge))`) and, unless `nil`, with `tags`
    /// (``HoardCollection/put(_:expiry:tags:insertOnly:announce:)-3byoj``): a fetch under way when one of them is
    /// invalidated does not store its model.
    case model(Model, expiry: Expiry = .collectionDefault, tags: [String]? = nil)
    /// The stored model is still current (an HTTP `304`): its record is renewed with `expiry`,
    /// its payload kept.
    case notModified(expiry: Expiry = .collectionDefault)
    /// The ID does not exist: as a fetch returning `nil`.
    case absent
}

/// An error of a read-through that was reported instead of thrown (``Freshness/onFetchError``).
public struct FetchFailure: Error, Sendable, CustomStringConvertible {
    /// What was being done.
    public enum Stage: Sendable, Hashable {
        /// A fetch failed and a stale record was returned in its place.
        case fetchServedStale
        /// A background refresh failed; the stale record stays.
        case refresh
        /// A fetched model could not be stored; it was returned all the same.
        case store
    }

    /// The collection.
    public var collection: String
    /// The keys involved.
    public var keys: [StoredKey]
    /// What was being done.
    public var stage: Stage
    /// The error.
    public var error: any Error

    /// The stage, collection, keys and error in one line.
    public var description: String {
        let which = keys.count == 1 ? "[\(keys[0])]" : "(\(keys.count) keys)"
        return "\(collection)\(which): \(stage): \(error)"
    }
}

/// Counts of what a collection's reads, writes and read-through calls did in this process since
/// the store was opened (``HoardCollection/statistics()``).
public struct CollectionStatistics: Sendable, Hashable {
    /// Reads by ID that found a live record: gets (also inside a caller's transaction) and read-through.
    public var hits = 0
    /// Reads by ID that found no live record (none, or an expired one, even when read-through then
    /// served it stale: ``staleServed`` counts those).
    public var misses = 0
    /// Records stored by puts (a bulk put counts each record; synchronize and read-through's own
    /// stores are puts too when they go through a put).
    public var puts = 0
    /// Records removed, by why they went (counted when the write commits: not for a write undone,
    /// nor twice for one LMDB ran again to grow the map).
    public var removed = RemovalCounts()
    /// The bytes (keys and records) that evictions freed (``RemovalCounts/evicted``).
    public var evictedBytes = 0
    /// Calls of a fetcher (a bulk fetch of many IDs is one).
    public var fetches = 0
    /// Fetches that threw.
    public var fetchErrors = 0
    /// Misses that joined a fetch already under way instead of starting one.
    public var coalesced = 0
    /// Stale records returned: within stale-while-revalidate, or for a failed fetch within stale-if-error.
    public var staleServed = 0
    /// Background refreshes started: of stale records within `staleWhileRevalidate`, and ahead
    /// of expiry (which ``refreshesAhead`` counts again).
    public var refreshes = 0
    /// Background refreshes that a hit started ahead of the record's expiry (``Freshness/refreshAhead``).
    public var refreshesAhead = 0
    /// Refreshes not started, and stale reads answered without a fetch, because the key's last
    /// fetch failed within ``Freshness/retryFailedFetchAfter``.
    public var throttledRefreshes = 0
    /// Reads that returned a stale record when their wait for the fetch timed out (``FetchTimeouts/soft``,
    /// or the hard timeout when it is the shorter).
    public var softTimeouts = 0
    /// Reads that threw ``HoardError/fetchTimedOut(collection:key:after:)`` (``FetchTimeouts/hard``).
    public var hardTimeouts = 0
    /// Records renewed by a "not modified" answer (``Revalidation/notModified(expiry:)``).
    public var notModified = 0
    /// Invalidations by tag made here (``HoardCollection/invalidate(tag:)-1cd3z``) that committed; the
    /// records they removed count in ``RemovalCounts/invalidated``.
    public var tagInvalidations = 0
    /// Reads answered `nil` from a remembered "no such ID" (``Freshness/negativeTimeToLive``).
    public var absentServed = 0
    /// Fetches under way now, background refreshes included (a gauge, not a count).
    public var fetchesInFlight = 0
    /// The memory, in bytes, that a bounded collection's eviction policy keeps in this process
    /// (its frequency sketch, recent-use counts and queues of keys); 0 for an unbounded one.
    public var accessStateBytes = 0
}

/// Records a collection's writes removed in this process, by why they went
/// (``CollectionStatistics/removed``); the metric `hoard_removed_records_total` counts the same,
/// labelled `reason`.
public struct RemovalCounts: Sendable, Hashable {
    /// Removed by a delete by ID or `deleteAll`, or by read-through's answer that an ID no longer
    /// exists (`reason="deleted"`).
    public var deleted = 0
    /// Removed by an invalidation made here: by ID, by tag or of the whole collection
    /// (`reason="invalidated"`).
    public var invalidated = 0
    /// Removed by another replica's invalidation, applied from a bus (`reason="remote"`).
    public var remote = 0
    /// Removed by a synchronize: not in the fresh collection, or undecodable (`reason="synchronized"`).
    public var synchronized = 0
    /// Removed because they had expired: by a purge, or by an evicting write, which removes the
    /// expired records it finds first (`reason="expired"`).
    public var expired = 0
    /// Live records removed to keep the collection within its capacity (`reason="evicted"`).
    public var evicted = 0

    /// All removals.
    public var total: Int { deleted + invalidated + remote + synchronized + expired + evicted }
}
