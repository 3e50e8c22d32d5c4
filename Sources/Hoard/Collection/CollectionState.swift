internal import Synchronization

/// What every handle of one collection shares within a process: one per collection name and
/// store (``Store/collection(_:named:timeToLive:capacity:freshness:migration:)`` hands out handles that
/// point here), so that two handles never keep two copies of state that must be one.
final class CollectionState: Sendable {
    /// The collection's swift-metrics instruments.
    let metrics: CollectionMetrics

    /// The collection's name.
    let name: String

    init(name: String, metrics: CollectionMetrics) {
        self.name = name
        self.metrics = metrics
        counters = Counters(metrics: metrics)
    }

    deinit {
        policyReference.load(ordering: .acquiring)?.release()
        writersKeysBitmap.deallocate()
    }

    /// The eviction policy of a bounded collection, made when this process first sees its
    /// capacity and kept from then on (set once, so a get reads it with one atomic load and no lock).
    private let policyReference = Atomic<Unmanaged<EvictionPolicy>?>(nil)

    /// The eviction policy, `nil` until the collection is known to be bounded.
    @inline(__always)
    var policy: EvictionPolicy? { policyReference.load(ordering: .acquiring)?.takeUnretainedValue() }

    /// The eviction policy, made for about `records` records with `strategy` if there is none yet
    /// (the first handle to see the collection bounded chooses the strategy for the process).
    func policy(sizedFor records: Int, strategy: EvictionStrategy = .frequency) -> EvictionPolicy {
        if let existing = policy { return existing }
        let made = Unmanaged.passRetained(EvictionPolicy(records: max(records, 1_024), strategy: strategy))
        let (exchanged, original) = policyReference.compareExchange(
            expected: nil, desired: made, ordering: .acquiringAndReleasing)
        if exchanged { return made.takeUnretainedValue() }
        made.release()
        // Another thread made one first; `original` is it.
        return original!.takeUnretainedValue()  // swift-format-ignore: NeverForceUnwrap
    }

    /// How long past its expiry a record may still be served by read-through in this process (the
    /// longest ``Freshness`` window any handle was opened with), in milliseconds: the purge keeps
    /// such records, or stale-if-error would have nothing to serve once maintenance had run.
    let purgeGrace = Atomic<Int64>(0)

    /// Widens ``purgeGrace`` to what `freshness` may serve.
    func keepStale(for freshness: Freshness) {
        let window = max(freshness.staleWhileRevalidate ?? .zero, freshness.staleIfError ?? .zero)
        purgeGrace.max(window.storedMilliseconds, ordering: .relaxed)
    }

    /// How many keys the last write to the collection (bounded) had written when it ended: the
    /// size the next write's ``WrittenKeys`` starts at.
    let writtenKeys = Atomic<Int>(0)

    /// Keys of records read in an older version, to rewrite (``MigrationPolicy/lazy``).
    let pendingMigrations = Mutex<Set<[UInt8]>>([])

    /// The read-through fetches in flight: a `SingleFlight<Model>`, made at the first miss.
    private let flights = Mutex<(any Sendable)?>(nil)

    func singleFlight<Model: Sendable>(of _: Model.Type) -> SingleFlight<Model> {
        flights.withLock { flights in
            if let existing = flights as? SingleFlight<Model> { return existing }
            let made = SingleFlight<Model>()
            flights = made
            return made
        }
    }

    /// IDs a fetch said do not exist, with when that answer expires (``Freshness/negativeTimeToLive``).
    let absent = Mutex<[[UInt8]: Int64]>([:])
    /// The most IDs ``absent`` remembers: past it, the expired answers go, then the oldest half.
    static let absentLimit = 10_000
    /// Keys whose last fetch failed, with when (by the store's clock) one may be tried again
    /// (``Freshness/retryFailedFetchAfter``); at most ``absentLimit``, as ``absent``.
    let failing = Mutex<[[UInt8]: Int64]>([:])

    /// Forgets the failed fetches of `keys` (of every key when `nil`): they were invalidated.
    func forgetFailedFetches(of keys: [[UInt8]]?) {
        failing.withLock { failing in
            guard !failing.isEmpty else { return }
            guard let keys else { return failing.removeAll() }
            for key in keys { failing[key] = nil }
        }
    }

    /// The subscribers to the collection's changes in this process (Observation/), and how many
    /// there are: a writer records changes only while there is one (or a change log is kept).
    let observers = Mutex(CollectionObservers())
    let observerCount = Atomic<Int>(0)
    /// Raised, under the lock of ``observers``, whenever the keys observed change.
    let observedKeysVersion = Atomic<Int>(0)
    /// The keys observed as the writer last took them (`nil`: every key), and their version
    /// (``refreshWritersKeys()``). Only the thread holding the write transaction touches these
    /// (LMDB's writer lock orders them).
    nonisolated(unsafe) var writersKeys: ObservedKeys?
    nonisolated(unsafe) var writersKeysVersion = -1
    /// ``writersKeys``' bits (``ObservedKeys/bitmapWords`` words, all set when every key is
    /// wanted), and whether every key is wanted: allocated once with the state and rewritten in
    /// place, so that a writer reads it through a pointer valid as long as the state.
    nonisolated(unsafe) let writersKeysBitmap: UnsafeMutablePointer<UInt64> = {
        let words = UnsafeMutablePointer<UInt64>.allocate(capacity: ObservedKeys.bitmapWords)
        words.initialize(repeating: 0, count: ObservedKeys.bitmapWords)
        return words
    }()
    nonisolated(unsafe) var writersWantEverything = false

    /// The counters behind ``HoardCollection/statistics()``.
    let counters: Counters

    final class Counters: Sendable {
        let metrics: CollectionMetrics
        init(metrics: CollectionMetrics) { self.metrics = metrics }

        let hits = Atomic<Int>(0)
        let misses = Atomic<Int>(0)
        let fetches = Atomic<Int>(0)
        let fetchErrors = Atomic<Int>(0)
        let coalesced = Atomic<Int>(0)
        let staleServed = Atomic<Int>(0)
        let refreshes = Atomic<Int>(0)
        let absentServed = Atomic<Int>(0)
        let refreshesAhead = Atomic<Int>(0)
        let throttledRefreshes = Atomic<Int>(0)
        let softTimeouts = Atomic<Int>(0)
        let hardTimeouts = Atomic<Int>(0)
        let notModified = Atomic<Int>(0)
        let tagInvalidations = Atomic<Int>(0)
        let puts = Atomic<Int>(0)
        /// Records removed, by ``RecordRemoval``.
        let deleted = Atomic<Int>(0)
        let invalidated = Atomic<Int>(0)
        let removedByRemote = Atomic<Int>(0)
        let synchronized = Atomic<Int>(0)
        let expired = Atomic<Int>(0)
        let evicted = Atomic<Int>(0)
        let evictedBytes = Atomic<Int>(0)

        enum Counter {
            case hits, misses, fetches, fetchErrors, coalesced, staleServed, refreshes, absentServed
            case refreshesAhead, throttledRefreshes, softTimeouts, hardTimeouts, notModified
            case puts
        }

        func add(_ counter: Counter, _ count: Int = 1) {
            guard count > 0 else { return }
            switch counter {
            case .hits: hits.add(count, ordering: .relaxed)
            case .misses: misses.add(count, ordering: .relaxed)
            case .fetches:
                fetches.add(count, ordering: .relaxed)
                metrics.fetches.increment(by: count)
            case .fetchErrors:
                fetchErrors.add(count, ordering: .relaxed)
                metrics.fetchErrors.increment(by: count)
            case .coalesced: coalesced.add(count, ordering: .relaxed)
            case .staleServed: staleServed.add(count, ordering: .relaxed)
            case .refreshes: refreshes.add(count, ordering: .relaxed)
            case .absentServed: absentServed.add(count, ordering: .relaxed)
            case .refreshesAhead:
                refreshesAhead.add(count, ordering: .relaxed)
                metrics.refreshesAhead.increment(by: count)
            case .throttledRefreshes:
                throttledRefreshes.add(count, ordering: .relaxed)
                metrics.throttledRefreshes.increment(by: count)
            case .softTimeouts:
                softTimeouts.add(count, ordering: .relaxed)
                metrics.softTimeouts.increment(by: count)
            case .hardTimeouts:
                hardTimeouts.add(count, ordering: .relaxed)
                metrics.hardTimeouts.increment(by: count)
            case .notModified:
                notModified.add(count, ordering: .relaxed)
                metrics.notModified.increment(by: count)
            case .puts: puts.add(count, ordering: .relaxed)
            }
        }

        /// What a write removed (``RecordWriter/finish(in:partial:)``, once its transaction committed).
        func add(_ tally: RemovalTally) {
            for reason in RecordRemoval.allCases {
                let count = tally.removed[reason]
                guard count > 0 else { continue }
                switch reason {
                case .deleted: deleted.add(count, ordering: .relaxed)
                case .invalidated: invalidated.add(count, ordering: .relaxed)
                case .remote: removedByRemote.add(count, ordering: .relaxed)
                case .synchronized: synchronized.add(count, ordering: .relaxed)
                case .expired: expired.add(count, ordering: .relaxed)
                case .evicted: evicted.add(count, ordering: .relaxed)
                }
                metrics.removed[reason.rawValue].increment(by: count)
            }
            if tally.evictedBytes > 0 {
                evictedBytes.add(tally.evictedBytes, ordering: .relaxed)
                metrics.evictedBytes.increment(by: tally.evictedBytes)
            }
            if tally.tagInvalidations > 0 {
                tagInvalidations.add(tally.tagInvalidations, ordering: .relaxed)
                metrics.tagInvalidations.increment(by: tally.tagInvalidations)
            }
        }

        /// The records removed, by reason.
        var removals: RemovalCounts {
            var counts = RemovalCounts()
            counts.deleted = deleted.load(ordering: .relaxed)
            counts.invalidated = invalidated.load(ordering: .relaxed)
            counts.remote = removedByRemote.load(ordering: .relaxed)
            counts.synchronized = synchronized.load(ordering: .relaxed)
            counts.expired = expired.load(ordering: .relaxed)
            counts.evicted = evicted.load(ordering: .relaxed)
            return counts
        }
    }
}
