internal import CoreMetrics
internal import LMDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The store's swift-metrics instruments. Each is made once (a collection's when its name is
// first opened in the process, the store's when it opens) through the factory of
// `Store.Options.metricsFactory`, or the one the application bootstrapped (`MetricsSystem`),
// which is a no-op unless it bootstrapped a backend. docs: the Metrics article lists them.

/// What ``CollectionState/Counters`` counts besides removals, which follow these by ``RecordRemoval``.
enum CollectionCounter: Int, CaseIterable {
    case hits, misses, puts, fetches, fetchErrors, coalesced, staleServed, refreshes, absentServed
    case refreshesAhead, throttledRefreshes, softTimeouts, hardTimeouts, notModified, tagInvalidations
    case evictedBytes
}

/// The instruments of one collection, labelled `collection`.
final class CollectionMetrics: Sendable {
    /// The counter of each ``CollectionCounter`` and then each ``RecordRemoval``
    /// (`hoard_removed_records_total`), by slot; `nil` for a statistic with no metric.
    let counters: [Counter?]
    static let firstRemoval = CollectionCounter.allCases.count
    static let slots = firstRemoval + RecordRemoval.allCases.count

    let synchronizeRuns: Counter
    let added: Counter
    let updated: Counter
    let migrated: Counter
    let synchronizeRemoved: Counter
    let getDuration: Timer
    let putDuration: Timer
    let synchronizeDuration: Timer
    /// Live subscribers to the collection's changes in this process (``HoardCollection/changes(limit:)``, ``HoardCollection/observe(_:)``).
    let observers: Gauge

    init(collection: String, factory: any MetricsFactory) {
        let labels = [("collection", collection)]
        func counter(_ label: String, _ more: [(String, String)] = []) -> Counter {
            Counter(label: label, dimensions: labels + more, factory: factory)
        }
        func timer(_ label: String) -> Timer {
            Timer(label: label, dimensions: labels, preferredDisplayUnit: .microseconds, factory: factory)
        }
        counters =
            CollectionCounter.allCases.map { statistic -> Counter? in
                switch statistic {
                case .hits: counter("hoard_gets_total", [("result", "hit")])
                case .misses: counter("hoard_gets_total", [("result", "miss")])
                case .puts: counter("hoard_puts_total")
                case .fetches: counter("hoard_fetches_total")
                case .fetchErrors: counter("hoard_fetch_errors_total")
                case .refreshesAhead: counter("hoard_refreshes_ahead_total")
                case .throttledRefreshes: counter("hoard_throttled_refreshes_total")
                case .softTimeouts: counter("hoard_fetch_timeouts_total", [("timeout", "soft")])
                case .hardTimeouts: counter("hoard_fetch_timeouts_total", [("timeout", "hard")])
                case .notModified: counter("hoard_fetch_not_modified_total")
                case .tagInvalidations: counter("hoard_tag_invalidations_total")
                case .evictedBytes: counter("hoard_evicted_bytes_total")
                case .coalesced, .staleServed, .refreshes, .absentServed: nil
                }
            } + RecordRemoval.allCases.map { counter("hoard_removed_records_total", [("reason", $0.label)]) }
        synchronizeRuns = counter("hoard_synchronize_runs_total")
        added = counter("hoard_synchronize_records_total", [("change", "added")])
        updated = counter("hoard_synchronize_records_total", [("change", "updated")])
        migrated = counter("hoard_synchronize_records_total", [("change", "migrated")])
        synchronizeRemoved = counter("hoard_synchronize_records_total", [("change", "removed")])
        getDuration = timer("hoard_get_duration_seconds")
        putDuration = timer("hoard_put_duration_seconds")
        synchronizeDuration = timer("hoard_synchronize_duration_seconds")
        observers = Gauge(label: "hoard_observers", dimensions: labels, factory: factory)
    }
}

/// The store's own instruments: commits, and the gauges ``Store/publishMetrics()`` sets.
final class StoreMetrics: Sendable {
    let commitDuration: Timer
    /// The writes each group commit carried, one value a commit.
    let commitWrites: Recorder
    let usedBytes: Gauge
    let mapBytes: Gauge
    let readers: Gauge
    /// Replication: keys entered into the outbox, resets, fills the race guard discarded.
    let announced: Counter
    let resets: Counter
    let discardedFills: Counter

    init(factory: any MetricsFactory) {
        announced = Counter(label: "hoard_announced_keys_total", factory: factory)
        resets = Counter(label: "hoard_replication_resets_total", factory: factory)
        discardedFills = Counter(label: "hoard_discarded_fills_total", factory: factory)
        commitDuration = Timer(
            label: "hoard_commit_duration_seconds", preferredDisplayUnit: .microseconds, factory: factory)
        commitWrites = Recorder(label: "hoard_commit_writes", factory: factory)
        usedBytes = Gauge(label: "hoard_store_used_bytes", factory: factory)
        mapBytes = Gauge(label: "hoard_store_map_bytes", factory: factory)
        readers = Gauge(label: "hoard_store_readers", factory: factory)
    }
}

/// Nanoseconds of a monotonic clock, for timers (cheaper than a `ContinuousClock` instant's arithmetic).
@inline(__always)
func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
}

extension Timer {
    /// Records the time since `start` (``monotonicNanoseconds()``).
    @inline(__always)
    func recordSince(_ start: UInt64) {
        recordNanoseconds(Int64(truncatingIfNeeded: monotonicNanoseconds() &- start))
    }
}

extension Store {
    /// Sets the store's gauges: `hoard_store_used_bytes` (pages in use × page size),
    /// `hoard_store_map_bytes` (the map's size) and `hoard_store_readers` (reader slots in use,
    /// across processes, stale ones included). Call it on an interval, for example from a
    /// maintenance task.
    ///
    /// - Throws: ``HoardError/storage(_:)`` when LMDB cannot report its figures.
    public func publishMetrics() throws {
        let info = try environment.info()
        let pageSize = try environment.statistics().pageSize
        metrics.usedBytes.record((info.lastPageNumber + 1) * pageSize)
        metrics.mapBytes.record(info.mapSize)
        metrics.readers.record(try environment.readers().count)
    }
}
