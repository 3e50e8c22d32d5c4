internal import CoreMetrics
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

    /// One atomic word a ``CollectionCounter`` and then a ``RecordRemoval``, each adding to its
    /// swift-metrics counter too: a count is kept once, so the statistics and the metrics agree.
    final class Counters: Sendable {
        private let table = CounterTable(count: CollectionMetrics.slots)
        private let instruments: [CoreMetrics.Counter?]

        init(metrics: CollectionMetrics) { instruments = metrics.counters }

        func add(_ counter: CollectionCounter, _ count: Int = 1) { add(at: counter.rawValue, count) }

        /// What a write removed (``RecordWriter/finish(in:partial:)``, once its transaction committed).
        func add(_ tally: RemovalTally) {
            for reason in RecordRemoval.allCases { add(at: Self.slot(reason), tally.removed[reason.rawValue]) }
            add(.evictedBytes, tally.evictedBytes)
            add(.tagInvalidations, tally.tagInvalidations)
        }

        subscript(counter: CollectionCounter) -> Int { self[at: counter.rawValue] }

        /// The records removed, by reason.
        var removals: RemovalCounts {
            func removed(_ reason: RecordRemoval) -> Int { self[at: Self.slot(reason)] }
            return RemovalCounts(
                deleted: removed(.deleted), invalidated: removed(.invalidated), remote: removed(.remote),
                synchronized: removed(.synchronized), expired: removed(.expired), evicted: removed(.evicted))
        }

        private static func slot(_ reason: RecordRemoval) -> Int { CollectionMetrics.firstRemoval + reason.rawValue }

        @inline(__always)
        private func add(at slot: Int, _ count: Int) {
            guard count > 0 else { return }
            table.words[slot].add(UInt64(count), ordering: .relaxed)
            instruments[slot]?.increment(by: count)
        }

        private subscript(at slot: Int) -> Int { Int(truncatingIfNeeded: table.words[slot].load(ordering: .relaxed)) }
    }
}
