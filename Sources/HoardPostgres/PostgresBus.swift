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
public final class PostgresBus: Service, ChangeBus, Sendable {
    /// How the bus connects and behaves.
    public struct Configuration: Sendable {
        /// How to reach PostgreSQL (postgres-nio's configuration).
        public var postgres: PostgresClient.Configuration
        /// The bus's name in the store, under which the store keeps its position.
        public var name: String
        /// A name for this replica in `hoard_replicas` (for people reading the table).
        public var replicaName: String
        /// How often the replica renews its lease, reports that it is alive, and checks the log
        /// even without a wake-up (at least three times a lease).
        public var heartbeat: Duration
        /// How long a lease runs, counted by this replica from the moment it sent the renewal
        /// that PostgreSQL granted. While it runs the store serves its records as fresh and every
        /// ``PostgresBus/waitUntilApplied(through:timeout:)`` waits for this replica; once it has
        /// run out (PostgreSQL away, a partition, the process paused), the store serves nothing as
        /// fresh and the waits stop counting this replica after ``leaseMargin`` more. The longer
        /// it is, the more a replica rides out short faults, and the longer a wait lasts while a
        /// replica is cut off (docs/REPLICAS.md, "The lease").
        public var lease: Duration
        /// What PostgreSQL adds to a lease before the others stop waiting for this replica: more
        /// than the two clocks can drift apart over a lease (2 × 10⁻⁴ of it for clocks within
        /// 100 ppm) and the lease clock's tick.
        public var leaseMargin: Duration
        /// How long the log keeps changes for a replica that has not applied them (live, stopped or
        /// silent), and at most for any: a replica away for less catches up exactly when it returns;
        /// one away for longer resets. A replica silent for longer is forgotten.
        public var retention: Duration
        /// The shortest and longest wait between attempts to reconnect (doubling between them). The
        /// longest bounds how long after PostgreSQL is back a replica starts catching up.
        public var backoff: (first: Duration, longest: Duration)
        /// The most changes read, or keys published, at once.
        public var batchSize: Int
        /// How long one step with PostgreSQL (a catch-up, a publication, a heartbeat, a wait for
        /// replicas) may take before the bus gives up on it and tries again.
        public var operationTimeout: Duration
        /// The collections whose read-through fetches the replicas share, and how
        /// (``SharedFills``); `nil`, the default, for none.
        public var sharedFills: SharedFills?

        /// A configuration; each parameter is the property of the same name.
        public init(
            postgres: PostgresClient.Configuration, name: String = "postgres",
            replicaName: String = ProcessInfo.processInfo.hostName, heartbeat: Duration = .seconds(2),
            lease: Duration = .seconds(10), leaseMargin: Duration = .milliseconds(250),
            retention: Duration = .seconds(7 * 86_400),
            backoff: (first: Duration, longest: Duration) = (.milliseconds(50), .seconds(1)), batchSize: Int = 5_000,
            operationTimeout: Duration = .seconds(10), sharedFills: SharedFills? = nil
        ) {
            self.postgres = postgres
            self.name = name
            self.replicaName = replicaName
            self.heartbeat = heartbeat
            self.lease = lease
            self.leaseMargin = leaseMargin
            self.retention = retention
            self.backoff = backoff
            self.batchSize = batchSize
            self.operationTimeout = operationTimeout
            self.sharedFills = sharedFills
        }
    }

    /// The store.
    public let store: Store
    /// The configuration.
    public let configuration: Configuration
    /// postgres-nio's pool, replaced while PostgreSQL cannot be reached (``Pools``).
    let pools: Pools
    /// The current pool: a step takes it anew each time.
    var client: PostgresClient { pools.client }
    let logger: Logger
    let metrics: BusMetrics
    /// What the bus knows of itself, shared with the pool's log handler.
    let shared = SharedState()
    /// Wakes the applier: a notification of changes, a (re)connection, a heartbeat.
    let changesSignal = Wakeup()
    /// The changes notifications carried, for the applier.
    let inbox = NoticeInbox(limit: 10_000)
    /// Wakes those waiting for replicas to apply: a notification that one did.
    let appliedSignal = Wakeup()
    /// Wakes the reporter: the store applied more of the log, or a heartbeat.
    let reportSignal = Wakeup()
    /// Signalled when the listening connection fails or ends: PostgreSQL may be gone, and steps
    /// under way on other connections are given up (``bounded(_:_:)``) and tried again.
    let connectionLost = Wakeup()
    /// The unstructured tasks the bus started; ``run()`` returns once none runs.
    let outstanding = Outstanding()
    /// Serializes publishing (the publisher loop and ``flush()``).
    let publishing: SerialQueue
    /// Wakes the lease's watch: its deadline moved (PostgresBus+Lease.swift).
    let leaseSignal = Wakeup()
    /// The fetches waiting for another replica's shared fill (SharedFills.swift).
    let fillWaits = FillWaits()
    let fillCounters: FillCounters

    /// A bus between `store` and the PostgreSQL of `configuration`. Nothing connects before ``run()``.
    public init(
        store: Store, configuration: Configuration, logger: Logger = Logger(label: "hoard.postgres"),
        metricsFactory: (any MetricsFactory)? = nil
    ) {
        self.store = store
        self.configuration = configuration
        self.logger = logger
        // From now on the store vouches for its records only under this bus's lease.
        store.replication.requireLease()
        publishing = SerialQueue(outstanding: outstanding)
        metrics = BusMetrics(factory: metricsFactory ?? MetricsSystem.factory)
        fillCounters = FillCounters(factory: metricsFactory ?? MetricsSystem.factory)
        // The bus's statements are small; compiling them (PostgreSQL's JIT, which a planner's guess
        // on unanalyzed tables can trigger) cost 5 to 10 ms each when measured. Off for its
        // sessions, unless the configuration says otherwise.
        var postgres = configuration.postgres
        if !postgres.options.additionalStartupParameters.contains(where: { $0.0 == "jit" }) {
            postgres.options.additionalStartupParameters.append(("jit", "off"))
        }
        // A pool logs why a connection failed, and otherwise keeps it to itself: its log goes
        // through a handler that keeps the last such error for ``status``, and marks the pool
        // as failed (``Pools``).
        let shared = self.shared
        pools = Pools { [postgres, logger] failed in
            var poolLogger = logger
            poolLogger.handler = CausesOfFailure(inner: logger.handler) { cause in
                shared.state.withLock { $0.lastPoolError = cause }
                failed()
            }
            return PostgresClient(configuration: postgres, backgroundLogger: poolLogger)
        }
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
        /// The lease: held until when, or out since when (docs/REPLICAS.md, "The lease").
        public var lease: Lease
    }

    /// The bus's status.
    public var status: Status {
        let lease = leaseStatus
        return shared.state.withLock {
            Status(
                connected: $0.connected, applied: $0.applied, reconnects: $0.reconnects,
                skippedRows: $0.skippedRows, lastError: $0.lastError, lease: lease)
        }
    }

    /// Times the applier read the log, rather than apply what notifications carried.
    var logReads: Int { shared.state.withLock { $0.logReads } }

    // MARK: - Running

    /// Connects, creates or checks the schema (``migrate()``), and keeps the store and the log in
    /// step until the task is cancelled or a graceful shutdown begins: publishes the outbox, applies
    /// the changes of the others, listens for wake-ups on a connection of its own (reconnecting
    /// with backoff), reports a heartbeat and trims the log. Errors are logged and counted, never
    /// thrown: the application keeps serving from its store while PostgreSQL is away.
    ///
    /// The store holds its lease (it serves its records as fresh) only while this runs, connected:
    /// from a catch-up after the first grant until a renewal is not answered in time. A bus that
    /// stopped may run again, on fresh connections.
    ///
    /// - Throws: ``PostgresBusError/storeHasABus(store:lockFile:)`` at once when another bus runs
    ///   on the store, in this process or another (nothing is changed); otherwise nothing.
    public func run() async throws {
        let claim = try BusClaim(store: store)
        defer { claim.release() }
        shared.state.withLock { $0.leaving = false }  // a bus run again after it stopped
        // The pool runs in a task that the cancellation of this one does not reach, so that it is
        // still there to say that this replica leaves; it is cancelled after that.
        pools.start()
        // The listener too: its connection stays up until this replica has left. Closed, it goes
        // back to the pool, which may hand it to the leaving query, and a query on a connection
        // that is closing was seen to wait forever.
        let listening = Task { await self.keepListening() }
        // Read-through shares the fills of these collections while the bus runs (which also keeps
        // the store from holding on to the bus once it stops).
        let sharing = configuration.sharedFills.map { store.replication.shareFills(of: $0.collections, through: self) }
        defer { sharing.map(store.replication.stopSharingFills) }
        await withTaskGroup(of: Void.self) { loops in
            loops.addTask { await self.keepApplying() }
            loops.addTask { await self.keepReporting() }
            loops.addTask { await self.keepPublishing() }
            loops.addTask { await self.keepBeating() }
            loops.addTask { await self.keepWatchingLease() }
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
            loops.cancelAll()
        }
        // Leaving: the others no longer wait for this replica (``waitUntilApplied(through:timeout:)``)
        // nor keep the log for it; it registers again when it runs again. The heartbeat has
        // stopped, so it does not bring the replica back. In a task of its own, which this task's
        // cancellation does not reach. The store stops vouching first: once the others see that
        // this replica left, they stop waiting for it.
        endLease()
        try? await Task {
            try await withTimeout(.seconds(2), "leaving", in: self.outstanding) { try await self.leave() }
        }.value
        listening.cancel()
        await listening.value
        // Then the pool, which also ends what the loops still wait for.
        await pools.stop()
        // The steps given up on, which the pool's shutdown ends: none may still hold the store
        // when this returns (its file would stay open). Bounded, for a query postgres-nio lost.
        await outstanding.drained(within: configuration.operationTimeout, logger: logger)
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
        try await BusSchema.migrate(client, sharingFills: configuration.sharedFills != nil, logger: logger)
    }

    /// Publishes what the store's outbox holds now and returns the log's sequence number after it:
    /// give it to ``waitUntilApplied(through:timeout:)`` for a read of this write on every replica.
    ///
    /// - Throws: postgres-nio's `PSQLError` when PostgreSQL cannot be reached, or
    ///   ``PostgresBusTimeout`` after ``Configuration/operationTimeout`` (the keys stay in the
    ///   outbox either way); `CancellationError` at once when the task is cancelled; `HoardError.storage`
    ///   when the store fails.
    @discardableResult
    public func flush() async throws -> Int64 {
        // Bounded twice: the caller's wait (in the queue, then publishing), which also ends at once
        // when the caller is cancelled; and the publication itself, so that one stuck on a
        // connection PostgreSQL dropped does not hold the queue.
        return try await withTimeout(configuration.operationTimeout, "waiting to publish", in: outstanding) {
            try await self.publishInTurn()
        }
    }

    /// Waits until every live replica has applied the log through `sequence`; returns `false` when
    /// `timeout` passes first. A replica is live while the lease PostgreSQL last granted it runs
    /// (``Configuration/lease`` and ``Configuration/leaseMargin``), so a replica cut off from
    /// PostgreSQL, or paused, is waited for until its lease has run out, and no longer: by then its
    /// store serves nothing as fresh. Once this returns `true`, no replica serves as fresh a record
    /// older than the changes through `sequence`.
    ///
    /// - Throws: `CancellationError`, or postgres-nio's `PSQLError` when PostgreSQL cannot be reached.
    public func waitUntilApplied(through sequence: Int64, timeout: Duration) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        // This replica too: its own changes, which do not wake its applier, are recorded and reported.
        awaited(for: timeout)
        // PostgreSQL away: no query is asked of the pool (it would keep it waiting, and serve the
        // pile of them first once PostgreSQL is back); the wait goes on until the listening
        // connection is up again or the deadline passes. The first look also tells every replica
        // that one waits (`w`), so that each reports what it applies at once until the deadline.
        var told = false
        while true {
            let waiting = appliedSignal.generation
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return false }
            var next = min(deadline, ContinuousClock.now + configuration.heartbeat)
            if status.connected {
                do {
                    let telling = told ? nil : left
                    let behind = try await withTimeout(
                        left, "waiting for replicas", abandonedBy: connectionLost, in: outstanding,
                        { try await self.replicasBehind(sequence, telling: telling) })
                    told = true
                    if behind.count == 0 { return true }
                    // A replica behind that stops renewing is not waited for once its lease has
                    // run out: look again then.
                    if let seconds = behind.leaseEndsIn {
                        next = min(next, ContinuousClock.now + .seconds(max(seconds, 0)) + .milliseconds(1))
                    }
                } catch is PostgresBusTimeout {
                    return false
                } catch is PostgresBusConnectionLost {
                    // Tried again once connected.
                }
            }
            // A notification that a replica applied, a heartbeat, or a lease's end, whichever
            // comes first.
            await appliedSignal.wait(after: waiting, until: next)
            try Task.checkCancellation()
        }
    }

    /// How many live replicas have not applied through `sequence`, and the seconds until the
    /// first of their leases runs out (`nil` when none holds one: replicas of an earlier Hoard);
    /// with `telling`, every replica is told in the same statement that one waits for that long
    /// (its notification is sent as the statement commits, after the count's snapshot: a replica
    /// counted as behind hears it).
    func replicasBehind(
        _ sequence: Int64, telling wait: Duration? = nil
    ) async throws -> (count: Int64, leaseEndsIn: Double?) {
        let behind = "r.applied < \(sequence) AND \(BusSchema.live("r."))"
        let columns = "count(r.store_id), extract(epoch FROM min(r.lease_until) - now())::float8"
        let query: PostgresQuery
        if let wait {
            let milliseconds = Int64((wait.seconds * 1_000).rounded(.up))
            query = """
                SELECT \(unescaped: columns)
                FROM pg_notify('\(unescaped: BusSchema.channel)', 'w\(unescaped: String(milliseconds))')
                LEFT JOIN hoard_replicas r ON \(unescaped: behind)
                """
        } else {
            query = "SELECT \(unescaped: columns) FROM hoard_replicas r WHERE \(unescaped: behind)"
        }
        var result: (count: Int64, leaseEndsIn: Double?) = (0, nil)
        for try await row in try await client.query(query, logger: logger).decode((Int64, Double?).self) {
            result = row
        }
        return result
    }

    /// One replica as `hoard_replicas` records it.
    public struct Replica: Sendable, Hashable {
        /// The replica's store identity.
        public var store: UUID
        /// Its name.
        public var name: String
        /// The sequence number it applied through.
        public var applied: Int64
        /// How many changes of the others it has not applied (its own need no applying: a replica
        /// passes them when it next applies a change of another, or at its heartbeat).
        public var lagChanges: Int64
        /// How long the oldest of them has waited, in seconds (0 when none).
        public var lagSeconds: Double
        /// Whether it holds a lease (``Configuration/lease``) and has not left: whether the waits
        /// for replicas wait for it.
        public var live: Bool
    }

    /// Every replica recorded, with its lag.
    ///
    /// - Throws: postgres-nio's `PSQLError` when PostgreSQL cannot be reached.
    public func replicas() async throws -> [Replica] {
        let rows = try await client.query(
            """
            SELECT r.store_id, r.name, r.applied, l.changes, l.seconds,
                \(unescaped: BusSchema.live("r."))
            FROM hoard_replicas r CROSS JOIN LATERAL (\(unescaped: BusSchema.lag("r.applied", "r.store_id"))) l
            ORDER BY r.name, r.store_id
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
}
#endif
