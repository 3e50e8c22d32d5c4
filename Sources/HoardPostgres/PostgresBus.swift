#if Postgres
public import Foundation
public import Hoard
public import Logging
public import PostgresNIO
public import ServiceLifecycle
public import CoreMetrics
internal import Synchronization

/// Invalidations between a service's replicas over PostgreSQL: the store's outbox published into a
/// change log table, and the log's changes applied to the store, exactly, from a position kept in
/// the store. Run it as a swift-service-lifecycle `Service` beside the application.
///
/// ```swift
/// let bus = PostgresBus(store: store, configuration: .init(postgres: postgresConfiguration))
/// let group = ServiceGroup(services: [bus, app], logger: logger)
/// try await group.run()
/// // in a request handler, after writing the source of truth:
/// try await users.invalidate(id)
/// ```
///
/// Reads never touch PostgreSQL: when it is down or slow, reads serve what the store holds, writes
/// commit locally and their announcements wait in the store's outbox (one entry per key) until it
/// is back; every (re)connection catches up from the store's position. docs/REPLICAS.md tells how a
/// change travels and what is guaranteed.
public final class PostgresBus: Service, Sendable {
    /// How the bus connects and behaves.
    public struct Configuration: Sendable {
        /// How to reach PostgreSQL (postgres-nio's configuration).
        public var postgres: PostgresClient.Configuration
        /// The bus's name in the store, under which the store keeps its position.
        public var name: String
        /// A name for this replica in `hoard_replicas` (for people reading the table).
        public var replicaName: String
        /// How often the replica reports that it is alive, and checks the log even without a wake-up.
        public var heartbeat: Duration
        /// A replica whose last heartbeat is older than this is not live: retention does not wait
        /// for it, and ``PostgresBus/waitUntilApplied(through:timeout:)`` does not count it.
        public var liveness: Duration
        /// How long changes are kept at most, even for a live replica that has not applied them.
        public var retention: Duration
        /// The shortest and longest wait between attempts to reconnect (doubling between them).
        public var backoff: (first: Duration, longest: Duration)
        /// The most changes read, or keys published, at once.
        public var batchSize: Int
        /// How long one step with PostgreSQL (a catch-up, a publication, a heartbeat, a wait for
        /// replicas) may take before the bus gives up on it and tries again.
        public var operationTimeout: Duration

        /// A configuration; each parameter is the property of the same name.
        public init(
            postgres: PostgresClient.Configuration, name: String = "postgres",
            replicaName: String = ProcessInfo.processInfo.hostName, heartbeat: Duration = .seconds(2),
            liveness: Duration = .seconds(30), retention: Duration = .seconds(7 * 86_400),
            backoff: (first: Duration, longest: Duration) = (.milliseconds(50), .seconds(5)), batchSize: Int = 5_000,
            operationTimeout: Duration = .seconds(10)
        ) {
            self.postgres = postgres
            self.name = name
            self.replicaName = replicaName
            self.heartbeat = heartbeat
            self.liveness = liveness
            self.retention = retention
            self.backoff = backoff
            self.batchSize = batchSize
            self.operationTimeout = operationTimeout
        }
    }

    /// The store.
    public let store: Store
    /// The configuration.
    public let configuration: Configuration
    let client: PostgresClient
    let logger: Logger
    let metrics: BusMetrics
    /// What the bus knows of itself, shared with the pool's log handler.
    let shared = SharedState()
    /// Wakes the applier: a notification of changes, a (re)connection, a heartbeat.
    let changesSignal = Wakeup()
    /// Wakes those waiting for replicas to apply: a notification that one did.
    let appliedSignal = Wakeup()
    /// Serializes publishing (the publisher loop and ``flush()``).
    let publishing = SerialQueue()

    /// A bus between `store` and the PostgreSQL of `configuration`. Nothing connects before ``run()``.
    public init(
        store: Store, configuration: Configuration, logger: Logger = Logger(label: "hoard.postgres"),
        metricsFactory: (any MetricsFactory)? = nil
    ) {
        self.store = store
        self.configuration = configuration
        self.logger = logger
        metrics = BusMetrics(factory: metricsFactory ?? MetricsSystem.factory)
        // The pool logs why a connection failed, and otherwise keeps it to itself: its log goes
        // through here, which keeps the last such error for ``status``.
        let shared = self.shared
        var poolLogger = logger
        poolLogger.handler = CausesOfFailure(inner: logger.handler) { cause in
            shared.state.withLock { $0.lastPoolError = cause }
        }
        client = PostgresClient(configuration: configuration.postgres, backgroundLogger: poolLogger)
    }

    /// What the bus knows of itself now.
    public struct Status: Sendable, Hashable {
        /// Whether the listening connection is up.
        public var connected: Bool
        /// The log's sequence number the store has applied through.
        public var applied: Int64
        /// Connections lost and made again since ``run()`` started.
        public var reconnects: Int
        /// Change rows skipped because they could not be read.
        public var skippedRows: Int
        /// The last error met, if the bus is not connected.
        public var lastError: String?
    }

    /// The bus's status.
    public var status: Status {
        shared.state.withLock {
            Status(
                connected: $0.connected, applied: $0.applied, reconnects: $0.reconnects,
                skippedRows: $0.skippedRows, lastError: $0.lastError)
        }
    }

    // MARK: - Running

    /// Connects, creates or checks the schema (``migrate()``), and keeps the store and the log in
    /// step until the task is cancelled or a graceful shutdown begins: publishes the outbox, applies
    /// the changes of the others, listens for wake-ups on a connection of its own (reconnecting
    /// with backoff), reports a heartbeat and trims the log. Errors are logged and counted, never
    /// thrown: the application keeps serving from its store while PostgreSQL is away.
    public func run() async throws {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.client.run() }
            group.addTask { await self.keepListening() }
            group.addTask { await self.keepApplying() }
            group.addTask { await self.keepPublishing() }
            group.addTask { await self.keepBeating() }
            await withGracefulShutdownHandler {
                await withTaskCancellationHandler {
                    // Until cancelled: the loops end on cancellation.
                    await self.stopped.wait()
                } onCancel: {
                    self.stopped.signal()
                }
            } onGracefulShutdown: {
                self.stopped.signal()
            }
            group.cancelAll()
        }
    }

    let stopped = Wakeup()

    /// Creates the bus's tables and functions in the database, or checks that they are there;
    /// idempotent, and safe when replicas do it at the same moment. ``run()`` does it on every
    /// connection; call it yourself to install the SQL functions (`hoard_publish`, the `hoard_key_*`
    /// helpers, `hoard_announce_row`) before a trigger uses them. Needs ``run()`` to be running.
    ///
    /// - Throws: ``PostgresBusError/newerSchema(found:supported:)`` for tables of a newer version
    ///   (nothing is changed); postgres-nio's `PSQLError` when PostgreSQL refuses.
    public func migrate() async throws {
        try await BusSchema.migrate(client, logger: logger)
    }

    /// Publishes what the store's outbox holds now and returns the log's sequence number after it:
    /// give it to ``waitUntilApplied(through:timeout:)`` for a read of this write on every replica.
    ///
    /// - Throws: postgres-nio's `PSQLError` when PostgreSQL cannot be reached (the keys stay in
    ///   the outbox), `LMDBError` when the store fails.
    @discardableResult
    public func flush() async throws -> Int64 {
        try await publishing.run {
            try await withTimeout(self.configuration.operationTimeout, "publishing") { try await self.publishOutbox() }
        }
    }

    /// Waits until every live replica has applied the log through `sequence`; returns `false` when
    /// `timeout` passes first.
    ///
    /// - Throws: `CancellationError`, or postgres-nio's `PSQLError` when PostgreSQL cannot be reached.
    public func waitUntilApplied(through sequence: Int64, timeout: Duration) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        // PostgreSQL away: the pool would keep the query waiting; the deadline ends the wait.
        while true {
            let waiting = appliedSignal.generation
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return false }
            do {
                if try await withTimeout(left, "waiting for replicas", { try await self.replicasBehind(sequence) }) == 0
                {
                    return true
                }
            } catch is PostgresBusTimeout {
                return false
            }
            // A notification that a replica applied, or a heartbeat, whichever comes first.
            await appliedSignal.wait(
                after: waiting, until: min(deadline, ContinuousClock.now + configuration.heartbeat))
            try Task.checkCancellation()
        }
    }

    /// How many live replicas have not applied through `sequence`.
    func replicasBehind(_ sequence: Int64) async throws -> Int64 {
        try await client.query(
            """
            SELECT count(*) FROM hoard_replicas
            WHERE applied < \(sequence) AND heartbeat_at > now() - make_interval(secs => \(configuration.liveness.seconds))
            """, logger: logger
        ).decode(Int64.self).reduce(0) { $0 + $1 }
    }

    /// One replica as `hoard_replicas` records it.
    public struct Replica: Sendable, Hashable {
        /// The replica's store identity.
        public var store: UUID
        /// Its name.
        public var name: String
        /// The sequence number it applied through.
        public var applied: Int64
        /// How many changes of the log it has not applied.
        public var lagChanges: Int64
        /// How long the oldest change it has not applied has waited, in seconds (0 when none).
        public var lagSeconds: Double
        /// Whether its heartbeat is recent (``Configuration/liveness``).
        public var live: Bool
    }

    /// Every replica recorded, with its lag.
    ///
    /// - Throws: postgres-nio's `PSQLError` when PostgreSQL cannot be reached.
    public func replicas() async throws -> [Replica] {
        let rows = try await client.query(
            """
            SELECT r.store_id, r.name, r.applied,
                greatest(0, coalesce((SELECT max(id) FROM hoard_changes), 0) - r.applied),
                coalesce(extract(epoch FROM now() - (SELECT min(created_at) FROM hoard_changes c WHERE c.id > r.applied)), 0)::float8,
                r.heartbeat_at > now() - make_interval(secs => \(configuration.liveness.seconds))
            FROM hoard_replicas r ORDER BY r.name, r.store_id
            """, logger: logger)
        var replicas: [Replica] = []
        for try await (store, name, applied, lag, seconds, live) in rows.decode(
            (UUID, String, Int64, Int64, Double, Bool).self)
        {
            replicas.append(
                Replica(store: store, name: name, applied: applied, lagChanges: lag, lagSeconds: seconds, live: live))
        }
        return replicas
    }

    // MARK: - The loops

    /// Holds a connection that LISTENs; every notification wakes the applier (or the waiters for
    /// replicas), and every new connection wakes the applier too: what was sent while nobody listened
    /// is in the log. postgres-nio's listen ends with an error when its connection closes; this
    /// loop then connects again, after a backoff that doubles up to its longest.
    func keepListening() async {
        var delay = configuration.backoff.first
        var everConnected = false
        while !Task.isCancelled {
            // postgres-nio's pool retries a connection that fails and keeps the lease waiting, so the
            // failure is reported from here after the connect timeout, with the cause the pool logged.
            let timeout = configuration.postgres.options.connectTimeout
            let watchdog = Task {
                try await Task.sleep(for: timeout)
                let cause = self.shared.state.withLock { $0.lastPoolError } ?? "no answer"
                self.connectionChanged(
                    up: false, error: "no connection to PostgreSQL within \(timeout): \(cause)")
                self.logger.warning(
                    "PostgresBus: cannot connect to PostgreSQL; reads go on from the store",
                    metadata: ["error": "\(cause)"])
            }
            do {
                try await client.withConnection { connection in
                    watchdog.cancel()
                    try await connection.listen(on: BusSchema.channel) { notifications in
                        // Bounded: a cancellation while these wait for a second connection must
                        // still let this closure end and give its connection back to the pool.
                        try await withTimeout(self.configuration.operationTimeout, "migrating") {
                            try await BusSchema.migrate(self.client, logger: self.logger)
                            try await self.register()
                        }
                        self.connectionChanged(up: true, reconnect: everConnected)
                        everConnected = true
                        delay = self.configuration.backoff.first
                        self.changesSignal.signal()
                        // The sequence does not end when the task is cancelled; closing the
                        // connection ends it (and the pool, which waits for its connections, can stop).
                        try await withTaskCancellationHandler {
                            for try await notification in notifications {
                                if notification.payload == "a" {
                                    self.appliedSignal.signal()
                                } else {
                                    self.changesSignal.signal()
                                }
                            }
                        } onCancel: {
                            let closing: EventLoopFuture<Void> = connection.close()
                            _ = closing
                        }
                    }
                }
                connectionChanged(up: false, error: "the listening connection ended")
            } catch is CancellationError {
                watchdog.cancel()
                break
            } catch {
                watchdog.cancel()
                if Task.isCancelled { break }
                connectionChanged(up: false, error: "\(String(reflecting: error))")
                logger.warning(
                    "PostgresBus: the listening connection failed; reads go on from the store",
                    metadata: ["error": "\(String(reflecting: error))", "retryIn": "\(delay)"])
            }
            try? await Task.sleep(for: delay)
            delay = min(delay * 2, configuration.backoff.longest)
        }
        connectionChanged(up: false, error: nil)
    }

    /// Applies the log's changes whenever woken.
    func keepApplying() async {
        while !Task.isCancelled {
            let generation = changesSignal.generation
            do {
                try await withTimeout(configuration.operationTimeout, "catching up") { try await self.catchUp() }
            } catch is CancellationError {
                break
            } catch {
                if Task.isCancelled { break }
                logger.debug("PostgresBus: catch-up failed", metadata: ["error": "\(String(reflecting: error))"])
            }
            await changesSignal.wait(after: generation, until: .now + configuration.heartbeat)
        }
    }

    /// Publishes the outbox whenever the store records an announcement.
    func keepPublishing() async {
        var delay = configuration.backoff.first
        while !Task.isCancelled {
            await store.replication.announcementsAvailable()
            while !Task.isCancelled {
                do {
                    _ = try await flush()
                    delay = configuration.backoff.first
                    break
                } catch {
                    if Task.isCancelled { return }
                    logger.debug(
                        "PostgresBus: publishing failed; the outbox keeps the keys",
                        metadata: ["error": "\(String(reflecting: error))"])
                    try? await Task.sleep(for: delay)
                    delay = min(delay * 2, configuration.backoff.longest)
                }
            }
        }
    }

    /// Reports the heartbeat, publishes the gauges, and trims the log now and then.
    func keepBeating() async {
        var beats = 0
        while !Task.isCancelled {
            beats += 1
            do {
                let identity = try store.replication.identity()
                let trimming = beats % 15 == 1
                try await withTimeout(configuration.operationTimeout, "the heartbeat") {
                    try await self.client.query(
                        "UPDATE hoard_replicas SET heartbeat_at = now() WHERE store_id = \(identity)",
                        logger: self.logger)
                    if trimming { try await self.trim() }
                }
            } catch {
                logger.debug("PostgresBus: heartbeat failed", metadata: ["error": "\(String(reflecting: error))"])
            }
            metrics.outboxDepth.record((try? store.replication.pendingCount()) ?? 0)
            changesSignal.signal()
            try? await Task.sleep(for: configuration.heartbeat)
        }
    }

    // MARK: - The steps

    /// Records this replica in `hoard_replicas` (or refreshes its row).
    func register() async throws {
        let identity = try store.replication.identity()
        try await client.query(
            """
            INSERT INTO hoard_replicas (store_id, name) VALUES (\(identity), \(configuration.replicaName))
            ON CONFLICT (store_id) DO UPDATE SET name = EXCLUDED.name, heartbeat_at = now()
            """, logger: logger)
    }

    /// Applies every change after the store's position, resetting the store first when the log
    /// cannot bring it up to date exactly (recreated, or trimmed past its position).
    func catchUp() async throws {
        let replication = store.replication
        let rows = try await client.query(
            """
            SELECT log_id, trimmed_through,
                greatest(trimmed_through, coalesce((SELECT max(id) FROM hoard_changes), 0))
            FROM hoard_bus
            """, logger: logger)
        var found: (UUID, Int64, Int64)?
        for try await row in rows.decode((UUID, Int64, Int64).self) { found = row }
        guard let (logID, trimmed, head) = found else { return }
        let log = logID.uuidString
        let resetsBefore = replication.resets
        var after = try await replication.startFollowing(
            bus: configuration.name, log: log, trimmedThrough: trimmed, head: head)
        if replication.resets > resetsBefore {
            metrics.resets.increment()
            logger.notice(
                "PostgresBus: the store could not catch up exactly (new log, or trimmed past its position); records written before now are served only stale",
                metadata: ["log": "\(log)", "position": "\(after)"])
        }
        while !Task.isCancelled {
            let batch = try await client.query(
                """
                SELECT id, origin, collection, keys FROM hoard_changes
                WHERE id > \(after) ORDER BY id LIMIT \(configuration.batchSize)
                """, logger: logger)
            var changes: [RemoteChange] = []
            var last = after
            var count = 0
            for try await row in batch {
                count += 1
                let cells = row.makeRandomAccess()
                guard let id = try? cells[0].decode(Int64.self) else { continue }
                last = id
                do {
                    let origin = try cells[1].decode(UUID?.self)
                    let collection = try cells[2].decode(String.self)
                    let keys = try cells[3].decode([ByteBuffer].self)
                    changes.append(
                        RemoteChange(
                            origin: origin, collection: collection, keys: keys.map { Array($0.readableBytesView) }))
                } catch {
                    shared.state.withLock { $0.skippedRows += 1 }
                    metrics.skippedRows.increment()
                    logger.error(
                        "PostgresBus: skipped a change row that does not decode",
                        metadata: ["id": "\(id)", "error": "\(String(reflecting: error))"])
                }
            }
            guard count > 0 else { break }
            let result = try await replication.apply(
                changes, through: BusPosition(log: log, sequence: last), bus: configuration.name)
            if result.unknownSkipped > 0 {
                metrics.skippedRows.increment(by: result.unknownSkipped)
                logger.warning(
                    "PostgresBus: skipped changes of collections this store does not have",
                    metadata: ["count": "\(result.unknownSkipped)", "through": "\(last)"])
            }
            after = last
            try await reportApplied(after)
            if count < configuration.batchSize { break }
        }
        if shared.state.withLock({ $0.applied }) < after { try await reportApplied(after) }
        let lag = try await client.query(
            """
            SELECT coalesce((SELECT max(id) FROM hoard_changes), 0) - \(after),
                coalesce(extract(epoch FROM now() - (SELECT min(created_at) FROM hoard_changes WHERE id > \(after))), 0)::float8
            """, logger: logger)
        for try await (changes, seconds) in lag.decode((Int64, Double).self) {
            metrics.lagChanges.record(max(0, changes))
            metrics.lagSeconds.record(seconds)
        }
    }

    /// Tells the others that this replica has applied through `sequence`.
    func reportApplied(_ sequence: Int64) async throws {
        try await client.query(
            """
            WITH updated AS (
                UPDATE hoard_replicas SET applied = greatest(applied, \(sequence)), applied_at = now(), heartbeat_at = now()
                WHERE store_id = \(try store.replication.identity()) RETURNING 1)
            SELECT pg_notify('\(unescaped: BusSchema.channel)', 'a') FROM updated
            """, logger: logger)
        shared.state.withLock { $0.applied = max($0.applied, sequence) }
        metrics.applied.record(sequence)
    }

    /// Publishes the outbox in one PostgreSQL transaction per batch (one row per collection), then
    /// removes what was published from it; returns the log's last sequence number.
    func publishOutbox() async throws -> Int64 {
        let replication = store.replication
        var last: Int64 = 0
        while true {
            let pending = try replication.pendingAnnouncements(limit: configuration.batchSize)
            if pending.isEmpty { break }
            let changes = pending.changes
            last = try await client.withTransaction(logger: logger) { connection in
                var last: Int64 = 0
                for change in changes {
                    let keys = change.keys.map { ByteBuffer(bytes: $0) }
                    let rows = try await connection.query(
                        "SELECT hoard_publish(\(change.origin), \(change.collection), \(keys))", logger: self.logger)
                    for try await (id) in rows.decode(Int64.self) { last = id }
                }
                return last
            }
            try await replication.acknowledge(pending)
            metrics.published.increment(by: pending.count)
        }
        if last == 0 {
            let rows = try await client.query("SELECT coalesce((SELECT max(id) FROM hoard_changes), 0)", logger: logger)
            for try await (head) in rows.decode(Int64.self) { last = head }
        }
        metrics.outboxDepth.record(try replication.pendingCount())
        return last
    }

    /// Deletes the changes every live replica has applied, and those past the retention, and
    /// records how far the log is trimmed (a replica behind that point resets).
    func trim() async throws {
        try await client.query(
            """
            WITH floor AS (
                SELECT min(applied) AS applied FROM hoard_replicas
                WHERE heartbeat_at > now() - make_interval(secs => \(configuration.liveness.seconds))),
            deleted AS (
                DELETE FROM hoard_changes
                WHERE id <= coalesce((SELECT applied FROM floor), 0)
                    OR created_at < now() - make_interval(secs => \(configuration.retention.seconds))
                RETURNING id)
            UPDATE hoard_bus SET trimmed_through = greatest(trimmed_through, (SELECT max(id) FROM deleted))
            WHERE EXISTS (SELECT 1 FROM deleted)
            """, logger: logger)
    }

    func connectionChanged(up: Bool, reconnect: Bool = false, error: String? = nil) {
        shared.state.withLock { state in
            state.connected = up
            if up { state.lastError = nil } else if let error { state.lastError = error }
            if up && reconnect { state.reconnects += 1 }
        }
        metrics.connected.record(up ? 1 : 0)
        if up && reconnect { metrics.reconnects.increment() }
    }
}

final class SharedState: Sendable {
    let state = Mutex(BusState())
}

/// What the bus knows of itself, under its lock.
struct BusState {
    var connected = false
    var applied: Int64 = 0
    var reconnects = 0
    var skippedRows = 0
    var lastError: String?
    var lastPoolError: String?
}

/// Passes log messages on, keeping the `psql_error` of those that carry one.
struct CausesOfFailure: LogHandler {
    var inner: any LogHandler
    let keep: @Sendable (String) -> Void

    func log(event: LogEvent) {
        if let cause = event.metadata?["psql_error"] ?? inner.metadata["psql_error"] { keep("\(cause)") }
        inner.log(event: event)
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { inner[metadataKey: key] }
        set { inner[metadataKey: key] = newValue }
    }
    var metadata: Logger.Metadata {
        get { inner.metadata }
        set { inner.metadata = newValue }
    }
    var logLevel: Logger.Level {
        get { inner.logLevel }
        set { inner.logLevel = newValue }
    }
}

/// An error of the bus's own.
public enum PostgresBusError: Error, CustomStringConvertible, Sendable {
    /// The database holds the bus's tables in a newer version than this code knows.
    case newerSchema(found: Int, supported: Int)

    /// The error in one sentence.
    public var description: String {
        switch self {
        case .newerSchema(let found, let supported):
            "the database holds Hoard's bus tables in version \(found); this code knows version \(supported) and older. Nothing was changed"
        }
    }
}

extension Duration {
    /// Whole and fractional seconds, for SQL intervals.
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
#endif
