/// How a collection serves records past their time to live when it reads through
/// (``HoardCollection/get(_:orFetch:)``), after HTTP's `stale-while-revalidate` and
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
    /// Called with the errors that are not thrown: a fetch that failed while a stale record was
    /// returned, a background refresh that failed, a fetched model that could not be stored.
    public var onFetchError: (@Sendable (FetchFailure) -> Void)?

    /// A freshness policy; every window is off unless given.
    public init(
        staleWhileRevalidate: Duration? = nil, staleIfError: Duration? = nil, negativeTimeToLive: Duration? = nil,
        onFetchError: (@Sendable (FetchFailure) -> Void)? = nil
    ) {
        self.staleWhileRevalidate = staleWhileRevalidate
        self.staleIfError = staleIfError
        self.negativeTimeToLive = negativeTimeToLive
        self.onFetchError = onFetchError
    }
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
    /// Records removed to keep the collection within its capacity, by this process (counted when
    /// the write commits: not for a write undone, nor twice for one LMDB ran again to grow the map).
    public var evictions = 0
    /// The bytes (keys and records) those evictions freed.
    public var evictedBytes = 0
    /// Expired records removed, by a purge or by an evicting write (which removes the expired records it finds first).
    public var expiredRemoved = 0
    /// Calls of a fetcher (a bulk fetch of many IDs is one).
    public var fetches = 0
    /// Fetches that threw.
    public var fetchErrors = 0
    /// Misses that joined a fetch already under way instead of starting one.
    public var coalesced = 0
    /// Stale records returned: within stale-while-revalidate, or for a failed fetch within stale-if-error.
    public var staleServed = 0
    /// Background refreshes started.
    public var refreshes = 0
    /// Reads answered `nil` from a remembered "no such ID" (``Freshness/negativeTimeToLive``).
    public var absentServed = 0
    /// Fetches under way now, background refreshes included (a gauge, not a count).
    public var fetchesInFlight = 0
    /// The memory, in bytes, that a bounded collection's eviction policy keeps in this process
    /// (its frequency sketch, recent-use counts and queues of keys); 0 for an unbounded one.
    public var accessStateBytes = 0
}
