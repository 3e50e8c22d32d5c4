#if Postgres
internal import Hoard
internal import Logging
internal import Synchronization

final class SharedState: Sendable {
    let state = Mutex(BusState())
}

/// What the bus knows of itself, under its lock.
struct BusState {
    var connected = false
    /// The log's sequence number the store has applied through.
    var applied: Int64 = 0
    /// The one PostgreSQL was last told of.
    var reported: Int64 = 0
    var reconnects = 0
    var skippedRows = 0
    var lastError: String?
    var lastPoolError: String?
    /// Where the applier is in the log, once it has read it (``NoticeInbox``).
    var known: KnownPosition?
    /// Until when a replica waits for the others to apply (``PostgresBus/waitUntilApplied(through:timeout:)``):
    /// until then this one reports each batch it applies at once, and otherwise once a heartbeat.
    var awaitedUntil: ContinuousClock.Instant?
    /// Whether the heartbeat asked for a report.
    var reportDue = false
    /// Times the applier read the log (a statement each), for the tests.
    var logReads = 0
    /// The deadline of the lease on the lease clock, while the store vouches for its records
    /// under it; `nil` without one (PostgresBus+Lease.swift).
    var leaseUntil: LeaseInstant?
    /// Since when the replica has held no lease (its start, or the moment the last one ran out);
    /// `nil` while it holds one.
    var leaseOutSince: ContinuousClock.Instant? = .now
    /// When the renewal was sent that PostgreSQL last granted while the replica held no lease:
    /// a catch-up begun after its answer begins a lease from it.
    var grantedWithoutLease: LeaseInstant?
    /// The number of PostgreSQL's last grant that this replica heard of, which its next renewal
    /// names; `nil` before it registered.
    var leaseGrant: Int64?
    /// The store's count of reads without a lease, as last passed to the metrics.
    var readsWithoutLease = 0
    /// Set as the bus leaves: nothing registers the replica again.
    var leaving = false
    /// The log's head before this bus published anything: the store's own changes up to it were
    /// published by an earlier run, and a catch-up applies them as others' (an operating-system
    /// crash may have undone their local commit); those after it are this run's, and skipped.
    /// `nil` until this bus's first publication, when every own change is an earlier run's.
    var headBeforeOwnPublications: Int64?
}

/// Passes log messages on, keeping the `psql_error` of those that carry one.
struct CausesOfFailure: LogHandler {
    var inner: any LogHandler
    let keep: @Sendable (String) -> Void

    func log(event: LogEvent) {
        if let cause = event.metadata?["psql_error"] ?? inner.metadata["psql_error"] { keep("\(cause)") }
        if event.level >= inner.logLevel { inner.log(event: event) }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { inner[metadataKey: key] }
        set { inner[metadataKey: key] = newValue }
    }
    var metadata: Logger.Metadata {
        get { inner.metadata }
        set { inner.metadata = newValue }
    }
    /// At most `info`, the level at which the pool says why a connection failed: the cause is
    /// kept whatever the level of the application's log, which gets only what its level lets through.
    var logLevel: Logger.Level {
        get { min(inner.logLevel, .info) }
        set { inner.logLevel = newValue }
    }
}

/// An error of the bus's own.
public enum PostgresBusError: Error, CustomStringConvertible, Sendable {
    /// The database holds the bus's tables in a newer version than this code knows.
    case newerSchema(found: Int, supported: Int)
    /// A step that was not tried because the bus has no connection to PostgreSQL at the moment.
    case notConnected(operation: String, lastError: String?)
    /// Another bus runs on the store, in this process or another: a store follows one bus at a
    /// time (its lease and its position are the store's). `lockFile` is the file it holds locked.
    case storeHasABus(store: String, lockFile: String)
    /// The lock that keeps a store to one bus could not be taken (the file could not be opened).
    case cannotLockStore(store: String, lockFile: String, reason: String)

    /// The error in one sentence.
    public var description: String {
        switch self {
        case .newerSchema(let found, let supported):
            "the database holds Hoard's bus tables in version \(found); this code knows version \(supported) and older. Nothing was changed"
        case .notConnected(let operation, let lastError):
            "PostgresBus: not connected to PostgreSQL, so \(operation) was not tried"
                + (lastError.map { " (last error: \($0))" } ?? "")
        case .storeHasABus(let store, let lockFile):
            "PostgresBus: another bus already runs on the store at \(store) (it holds \(lockFile) locked), in this process or another; a store follows one bus at a time"
        case .cannotLockStore(let store, let lockFile, let reason):
            "PostgresBus: cannot lock \(lockFile) to run a bus on the store at \(store): \(reason)"
        }
    }
}

extension Duration {
    /// Whole and fractional seconds, for SQL intervals.
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
#endif
