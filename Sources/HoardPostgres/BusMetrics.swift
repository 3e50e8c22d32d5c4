#if Postgres
internal import CoreMetrics

/// The bus's swift-metrics instruments (docs/REPLICAS.md lists them).
final class BusMetrics: Sendable {
    let connected: Gauge
    let lagSeconds: Gauge
    let lagChanges: Gauge
    let applied: Gauge
    let outboxDepth: Gauge
    let resets: Counter
    let reconnects: Counter
    let skippedRows: Counter
    let published: Counter
    let leaseHeld: Gauge
    let secondsWithoutLease: FloatingPointCounter
    let readsWithoutLease: Counter

    init(factory: any MetricsFactory) {
        connected = Gauge(label: "hoard_bus_connected", factory: factory)
        lagSeconds = Gauge(label: "hoard_bus_lag_seconds", factory: factory)
        lagChanges = Gauge(label: "hoard_bus_lag_changes", factory: factory)
        applied = Gauge(label: "hoard_bus_applied_position", factory: factory)
        outboxDepth = Gauge(label: "hoard_bus_outbox_depth", factory: factory)
        resets = Counter(label: "hoard_bus_resets_total", factory: factory)
        reconnects = Counter(label: "hoard_bus_reconnects_total", factory: factory)
        skippedRows = Counter(label: "hoard_bus_skipped_changes_total", factory: factory)
        published = Counter(label: "hoard_bus_published_keys_total", factory: factory)
        leaseHeld = Gauge(label: "hoard_bus_lease_held", factory: factory)
        secondsWithoutLease = FloatingPointCounter(label: "hoard_bus_seconds_without_lease_total", factory: factory)
        readsWithoutLease = Counter(label: "hoard_bus_reads_without_lease_total", factory: factory)
    }
}
#endif
