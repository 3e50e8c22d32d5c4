#if Postgres
internal import Foundation
internal import Hoard
internal import Logging
internal import PostgresNIO

// What PostgresBus.run() runs: the loops that apply, report, publish and beat, and the steps
// they take with PostgreSQL. The listening connection is in PostgresBus+Connection.swift.

extension PostgresBus {
    // MARK: - The loops

    /// Applies the others' changes whenever woken: those the notifications carried when they follow
    /// on from the store's position, and otherwise those read from the log.
    func keepApplying() async {
        while !Task.isCancelled {
            let generation = changesSignal.generation
            let taken = inbox.take()
            do {
                let applied = taken.readLog ? false : try await applyNotices(taken.notices)
                if !applied {
                    try await bounded("catching up") { try await self.catchUp() }
                }
            } catch is CancellationError {
                break
            } catch {
                if Task.isCancelled { break }
                inbox.readLog()
                logger.debug("PostgresBus: catch-up failed", metadata: ["error": "\(String(reflecting: error))"])
            }
            // No deadline of its own (a timer and two tasks a wait, a wait per batch): the
            // heartbeat wakes it, to read the log.
            await changesSignal.wait(after: generation)
        }
    }

    /// Tells PostgreSQL how far the store has applied: once a heartbeat, and whenever that moves
    /// while a replica waits for the others (``PostgresBus/waitUntilApplied(through:timeout:)``
    /// notifies `w` first); several batches applied meanwhile make one report. Reports nobody
    /// waits for are not worth a statement a batch: with 8 replicas writing they were over a
    /// quarter of the propagation time (measured). A report that fails is made again at the next
    /// heartbeat.
    func keepReporting() async {
        while !Task.isCancelled {
            let generation = reportSignal.generation
            let (applied, reported, awaited, due) = shared.state.withLock { state in
                defer { state.reportDue = false }
                return (
                    state.applied, state.reported, state.awaitedUntil.map { $0 > .now } ?? false, state.reportDue
                )
            }
            if applied > reported && (awaited || due) {
                do {
                    try await bounded("reporting") {
                        try await self.reportApplied(applied, notify: awaited)
                    }
                } catch is CancellationError {
                    break
                } catch {
                    if Task.isCancelled { break }
                    logger.debug("PostgresBus: reporting failed", metadata: ["error": "\(String(reflecting: error))"])
                }
            }
            await reportSignal.wait(after: generation)
        }
    }

    /// Publishes the outbox whenever the store records an announcement.
    func keepPublishing() async {
        var delay = configuration.backoff.first
        while !Task.isCancelled {
            await store.replication.announcementsAvailable()
            while !Task.isCancelled {
                do {
                    // Without flush()'s bound on the wait in the queue: this loop waits for nobody.
                    _ = try await publishInTurn()
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

    /// Renews the lease (the heartbeat), publishes the gauges, and trims the log now and then.
    func keepBeating() async {
        var beats = 0
        while !Task.isCancelled {
            beats += 1
            // The renewal alone first: how long it takes is what the lease pays.
            do {
                try await bounded("renewing the lease") { try await self.renewLease() }
            } catch {
                logger.debug(
                    "PostgresBus: renewing the lease failed", metadata: ["error": "\(String(reflecting: error))"])
            }
            do {
                let trimming = beats % 15 == 1
                try await bounded("the heartbeat") {
                    try await self.measureLag()
                    if trimming {
                        try await self.trim()
                        try await self.purgeFills()
                    }
                }
            } catch {
                logger.debug("PostgresBus: heartbeat failed", metadata: ["error": "\(String(reflecting: error))"])
            }
            metrics.outboxDepth.record((try? store.replication.pendingCount()) ?? 0)
            recordReadsWithoutLease()
            // The log read once a heartbeat whatever the notifications said: the position passes
            // this replica's own changes, and anything a notification could not tell is found.
            inbox.readLog()
            changesSignal.signal()
            shared.state.withLock { $0.reportDue = true }
            reportSignal.signal()
            try? await Task.sleep(for: beatInterval)
        }
    }

    // MARK: - The steps

    /// Runs a step with PostgreSQL, giving it up after ``Configuration/operationTimeout``, or as
    /// soon as the listening connection is lost (``connectionLost``); not tried at all while that
    /// connection is down: the pool would keep every such step waiting, and once PostgreSQL is
    /// back serve the pile of them before the steps that matter (measured: replicas caught up
    /// 10 to 20 s after a restart).
    func bounded<R: Sendable>(_ what: String, _ operation: @escaping @Sendable () async throws -> R) async throws -> R {
        guard status.connected else {
            throw PostgresBusError.notConnected(operation: what, lastError: status.lastError)
        }
        return try await withTimeout(
            configuration.operationTimeout, what, abandonedBy: connectionLost, in: outstanding, operation)
    }

    /// Applies every change after the store's position, resetting the store first when the log
    /// cannot bring it up to date exactly (recreated, or trimmed past its position). One round trip
    /// a batch: the log's identity and bounds come with its changes, read in one snapshot, so a
    /// trim or a recreation between them cannot be missed; telling the others what was applied
    /// happens beside it (``keepReporting()``), not in the way of the next batch.
    ///
    /// The singleton `hoard_bus` is read with `LIMIT 1`: a planner without its statistics guesses
    /// a thousand rows, and the join's cost then passes PostgreSQL's `jit_above_cost`, which made
    /// every catch-up compile code for 5 to 10 ms (measured).
    func catchUp() async throws {
        let replication = store.replication
        // A grant answered before this catch-up began: once the log is applied, it begins the lease.
        let grant = shared.state.withLock { $0.grantedWithoutLease }
        let own = try replication.identity()
        var after = try replication.position(of: configuration.name)?.sequence ?? 0
        var known: KnownPosition?
        while !Task.isCancelled {
            shared.state.withLock { $0.logReads += 1 }
            let rows = try await client.query(
                """
                SELECT b.log_id, b.trimmed_through,
                    greatest(b.trimmed_through, coalesce((SELECT max(id) FROM hoard_changes), 0)),
                    c.id, c.origin, c.collection, c.keys, c.kind
                FROM (SELECT log_id, trimmed_through FROM hoard_bus LIMIT 1) b LEFT JOIN LATERAL (
                    SELECT id, origin, collection, keys, kind FROM hoard_changes
                    WHERE id > \(after) ORDER BY id LIMIT \(configuration.batchSize)) c ON true
                ORDER BY c.id
                """, logger: logger)
            var bounds: (log: UUID, trimmed: Int64, head: Int64)?
            var changes: [(id: Int64, change: RemoteChange)] = []
            var last = after
            var count = 0
            for try await row in rows {
                let cells = row.makeRandomAccess()
                if bounds == nil {
                    bounds = (
                        try cells[0].decode(UUID.self), try cells[1].decode(Int64.self), try cells[2].decode(Int64.self)
                    )
                }
                // No change after the position: the one row has no change columns.
                guard let id = try cells[3].decode(Int64?.self) else { continue }
                count += 1
                last = id
                do {
                    let origin = try cells[4].decode(UUID?.self)
                    let collection = try cells[5].decode(String.self)
                    let keys = try cells[6].decode([ByteBuffer].self).map { Array($0.readableBytesView) }
                    let kind = try cells[7].decode(Int16.self)
                    switch ChangeKind(rawValue: kind) {
                    case .keys: changes.append((id, RemoteChange(origin: origin, collection: collection, keys: keys)))
                    case .tags:
                        let tags = keys.map { String(decoding: $0, as: UTF8.self) }
                        changes.append((id, RemoteChange(origin: origin, collection: collection, keys: [], tags: tags)))
                    case .all:
                        changes.append(
                            (id, RemoteChange(origin: origin, collection: collection, keys: [], clearsAll: true)))
                    case nil: throw UnknownChangeKind(kind: kind)
                    }
                } catch {
                    shared.state.withLock { $0.skippedRows += 1 }
                    metrics.skippedRows.increment()
                    logger.error(
                        "PostgresBus: skipped a change row that does not decode",
                        metadata: ["id": "\(id)", "error": "\(String(reflecting: error))"])
                }
            }
            guard let bounds else { return }  // no log yet: migrate() creates it on connecting
            let log = bounds.log.uuidString
            let resetsBefore = replication.resets
            let start = try await replication.startFollowing(
                bus: configuration.name, log: log, trimmedThrough: bounds.trimmed, head: bounds.head)
            if start != after || replication.resets > resetsBefore {
                // Reset (or moved by another process): what was read is not after the position.
                if replication.resets > resetsBefore {
                    // Every own change after the reset's position is this run's (a recreated log
                    // numbers from 1 again, below a head read from the old one).
                    shared.state.withLock { $0.headBeforeOwnPublications = start }
                    metrics.resets.increment()
                    logger.notice(
                        "PostgresBus: the store could not catch up exactly (new log, or trimmed past its position); records written before now are served only stale",
                        metadata: ["log": "\(log)", "position": "\(start)"])
                }
                after = start
                applied(through: start, reset: true)
                continue
            }
            known = KnownPosition(log: bounds.log, sequence: after, recorded: after)
            guard count > 0 else { break }
            // The store's own changes are applied as others' when an earlier run of a bus
            // published them: an operating-system crash may have undone their local commit (with
            // `.cache`, the last commit) while the log kept them. This run's own are skipped.
            // (Read after the rows: a publication of this run that they hold began after it was set.)
            let boundary = shared.state.withLock { $0.headBeforeOwnPublications } ?? .max
            let result = try await replication.apply(
                changes.filter { $0.change.origin != own || $0.id <= boundary }.map(\.change),
                through: BusPosition(log: log, sequence: last), bus: configuration.name, includingOwn: true)
            noteSkipped(result, through: last)
            after = last
            known = KnownPosition(log: bounds.log, sequence: last, recorded: last)
            applied(through: last)
            if count < configuration.batchSize { break }
        }
        shared.state.withLock { $0.known = known }
        applied(through: after)
        if let grant, !Task.isCancelled { beginLease(sentAt: grant) }
    }

    /// Applies the changes `notices` carried when they follow on, one after the other, from the
    /// position the applier knows, in one transaction; returns `false` when they do not (a
    /// notification missed, a number rolled back, another log) or the store's position is not the
    /// one expected: the log is to be read instead. No round trip to PostgreSQL.
    ///
    /// This replica's own changes need no applying, and the position passes them in memory only:
    /// the others trim the log to the lowest position reported, which must be one the store holds,
    /// so it is written (and then reported) with the next change of another, or at once while a
    /// replica waits (``awaited(for:)``), whose wait may be for one of them.
    func applyNotices(_ notices: [BusNotice]) async throws -> Bool {
        let (knownNow, awaited) = shared.state.withLock { ($0.known, $0.awaitedUntil.map { $0 > .now } ?? false) }
        guard !notices.isEmpty || awaited else { return true }
        guard var known = knownNow else { return false }
        let own = try store.replication.identity()
        var changes: [RemoteChange] = []
        var through = known.sequence
        for notice in notices {
            guard notice.log == known.log else { return false }
            if notice.id <= through { continue }  // read from the log after it was sent
            guard notice.previous == through else { return false }
            if notice.change.origin != own { changes.append(notice.change) }
            through = notice.id
        }
        if !changes.isEmpty || (awaited && through > known.recorded) {
            let result = try await store.replication.apply(
                changes, through: BusPosition(log: known.log.uuidString, sequence: through), bus: configuration.name,
                expecting: known.recorded)
            if result.unexpectedPosition || result.alreadyApplied { return false }
            noteSkipped(result, through: through)
            known.recorded = through
            applied(through: through)
        }
        known.sequence = through
        shared.state.withLock { $0.known = known }
        return true
    }

    private func noteSkipped(_ result: ApplyResult, through sequence: Int64) {
        guard result.unknownSkipped > 0 else { return }
        metrics.skippedRows.increment(by: result.unknownSkipped)
        logger.warning(
            "PostgresBus: skipped changes of collections this store does not have",
            metadata: ["count": "\(result.unknownSkipped)", "through": "\(sequence)"])
    }

    /// Notes that the store has applied the log through `sequence`, for ``keepReporting()``; after
    /// a reset the position may be lower than before (a recreated log numbers from 1 again).
    private func applied(through sequence: Int64, reset: Bool = false) {
        let moved = shared.state.withLock { state in
            defer {
                state.applied = reset ? sequence : max(state.applied, sequence)
                if reset { state.reported = -1 }
            }
            return reset || sequence > state.applied
        }
        metrics.applied.record(sequence)
        if moved { reportSignal.signal() }
    }

    /// Tells the others that this replica has applied through `sequence`, and wakes those waiting
    /// when `notify`.
    func reportApplied(_ sequence: Int64, notify: Bool) async throws {
        try await client.query(
            """
            WITH updated AS (
                INSERT INTO hoard_replicas AS r (store_id, name, applied, applied_at)
                VALUES (\(try store.replication.identity()), \(configuration.replicaName), \(sequence), now())
                ON CONFLICT (store_id) DO UPDATE
                SET applied = greatest(r.applied, EXCLUDED.applied), applied_at = now()
                RETURNING 1)
            SELECT pg_notify('\(unescaped: BusSchema.channel)', 'a') FROM updated WHERE \(notify)
            """, logger: logger)
        shared.state.withLock { $0.reported = max($0.reported, sequence) }
    }

    /// Records how far this replica is behind the log, in changes and in seconds.
    func measureLag() async throws {
        let after = shared.state.withLock { $0.applied }
        let identity = try store.replication.identity()
        let lag = try await client.query(
            PostgresQuery(
                unsafeSQL: BusSchema.lag("$1::bigint", "$2::uuid"),
                binds: {
                    var binds = PostgresBindings()
                    binds.append(after)
                    binds.append(identity)
                    return binds
                }()), logger: logger)
        for try await (changes, seconds) in lag.decode((Int64, Double).self) {
            metrics.lagChanges.record(changes)
            metrics.lagSeconds.record(seconds)
        }
    }

    /// Publishes the outbox once the publications asked for before have run, giving the
    /// publication itself up after ``Configuration/operationTimeout`` (one stuck on a connection
    /// PostgreSQL dropped must not hold the queue).
    func publishInTurn() async throws -> Int64 {
        try await publishing.run("publishing") {
            try await self.bounded("publishing") { try await self.publishOutbox() }
        }
    }

    /// The log's last sequence number.
    func logHead() async throws -> Int64 {
        let rows = try await client.query("SELECT coalesce((SELECT max(id) FROM hoard_changes), 0)", logger: logger)
        var head: Int64 = 0
        for try await (value) in rows.decode(Int64.self) { head = value }
        return head
    }

    /// Publishes the outbox in one PostgreSQL statement per batch (so one transaction and one
    /// round trip, with one change row per collection), then removes what was published from it;
    /// returns the log's last sequence number.
    func publishOutbox() async throws -> Int64 {
        let replication = store.replication
        let origin = try replication.identity()
        var last: Int64 = 0
        while true {
            let pending = try replication.pendingAnnouncements(limit: configuration.batchSize)
            if pending.isEmpty { break }
            if shared.state.withLock({ $0.headBeforeOwnPublications }) == nil {
                let head = try await logHead()
                shared.state.withLock { $0.headBeforeOwnPublications = $0.headBeforeOwnPublications ?? head }
            }
            // Flattened, a collection beside each key (PostgreSQL has no arrays of arrays of
            // different lengths), and grouped back into one change per collection by the statement.
            var collections: [String] = []
            var keys: [ByteBuffer] = []
            var kinds: [Int16] = []
            func add(_ collection: String, _ key: [UInt8], _ kind: ChangeKind) {
                collections.append(collection)
                keys.append(ByteBuffer(bytes: key))
                kinds.append(kind.rawValue)
            }
            for change in pending.changes {
                for key in change.keys { add(change.collection, key, .keys) }
                for tag in change.tags { add(change.collection, Array(tag.utf8), .tags) }
                if change.clearsAll { add(change.collection, [], .all) }
            }
            let rows = try await client.query(
                """
                SELECT max(hoard_publish(\(origin), collection, keys, kind)) FROM (
                    SELECT collection, kind, array_agg(key ORDER BY n) AS keys
                    FROM unnest(\(collections)::text[], \(keys)::bytea[], \(kinds)::int2[])
                        WITH ORDINALITY AS k(collection, key, kind, n)
                    GROUP BY collection, kind) AS batch
                """, logger: logger)
            for try await (id) in rows.decode(Int64?.self) { last = max(last, id ?? 0) }
            try await replication.acknowledge(pending)
            metrics.published.increment(by: pending.count)
        }
        if last == 0 { last = try await logHead() }
        metrics.outboxDepth.record(try replication.pendingCount())
        return last
    }

    /// Deletes the changes that every replica heard from within the retention has applied (live,
    /// stopped or silent: each catches up exactly when it returns), and those past the retention;
    /// forgets the replicas silent for longer; records how far the log is trimmed (a replica
    /// behind that point resets).
    func trim() async throws {
        try await client.query(
            """
            WITH floor AS (
                SELECT min(applied) AS applied FROM hoard_replicas
                WHERE heartbeat_at > now() - make_interval(secs => \(configuration.retention.seconds))),
            forgotten AS (
                DELETE FROM hoard_replicas
                WHERE heartbeat_at <= now() - make_interval(secs => \(configuration.retention.seconds))),
            deleted AS (
                DELETE FROM hoard_changes
                WHERE id <= coalesce((SELECT applied FROM floor), 0)
                    OR created_at < now() - make_interval(secs => \(configuration.retention.seconds))
                RETURNING id)
            UPDATE hoard_bus SET trimmed_through = greatest(trimmed_through, (SELECT max(id) FROM deleted))
            WHERE EXISTS (SELECT 1 FROM deleted)
            """, logger: logger)
    }
}
/// A change row of a kind this code does not know (a newer Hoard's): skipped, as a row that does not decode.
struct UnknownChangeKind: Error, CustomStringConvertible {
    let kind: Int16
    var description: String { "the change's kind \(kind) is not one this code knows" }
}
#endif
