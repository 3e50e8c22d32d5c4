#if Postgres
internal import Foundation
internal import Hoard
internal import Logging
internal import PostgresNIO

// The replica's lease (docs/REPLICAS.md, "The lease"). PostgreSQL grants it, recording on its own
// clock until when (`hoard_replicas.lease_until`: its `now()` plus the lease and the margin); the
// replica counts it on its own monotonic clock from the moment it *sent* the renewal, without the
// margin. A writer's wait counts a replica until its recorded lease has run out, so once a wait has
// stopped counting a replica, that replica's own count has run out too (the clocks drift apart by
// less than the margin): its store no longer serves its records as fresh.
//
// A lease that ran out is not simply renewed: a writer may have stopped waiting for this replica
// meanwhile, and its change may be one this replica has not applied. So a grant answered while the
// replica held no lease begins a lease only once a catch-up, begun after that answer, has applied
// the whole log; every change whose wait skipped this replica committed before that catch-up read
// the log (the wait's `now()` came before the grant's commit, which came before its answer).
//
// A renewal names the number of the last grant the replica heard of, and PostgreSQL grants it
// only if that is still the last: a replica that PostgreSQL hears but that does not hear
// PostgreSQL (a one-way partition) gets at most one grant it never learns of, and its lease at
// PostgreSQL runs out after that one, so that the writers stop waiting for it.

extension PostgresBus {
    /// What the lease is now, for ``Status``.
    public enum Lease: Sendable, Hashable {
        /// The replica holds its lease until then: its store serves its records as fresh, and the
        /// others wait for it.
        case held(until: ContinuousClock.Instant)
        /// The replica has held no lease since then: its store serves nothing as fresh (a get
        /// answers as for an expired record, read-through calls the upstream).
        case out(since: ContinuousClock.Instant)
    }

    /// The lease PostgreSQL records: the replica's own, and the margin.
    var grantLength: Duration { configuration.lease + configuration.leaseMargin }

    /// How often the replica renews its lease and beats: the heartbeat, or a third of the lease if
    /// that is shorter, so that two renewals may fail before it runs out.
    var beatInterval: Duration { min(configuration.heartbeat, configuration.lease / 3) }

    /// The deadline on the replica's own clock of a lease whose renewal was sent at `sent`: the
    /// lease less the clock's tick, by which a reading may lag.
    func localDeadline(sentAt sent: LeaseInstant) -> LeaseInstant {
        sent.advanced(by: configuration.lease - LeaseInstant.resolution)
    }

    /// Records this replica in `hoard_replicas` (or refreshes its row) with a lease: at every
    /// connection of the listening loop, which then reads the log (and so begins the lease).
    func register() async throws {
        let identity = try store.replication.identity()
        guard !shared.state.withLock({ $0.leaving }) else { return }
        let sent = LeaseInstant.now()
        let rows = try await client.query(
            """
            INSERT INTO hoard_replicas AS r (store_id, name, heartbeat_at, lease_until, lease_grant)
            VALUES (\(identity), \(configuration.replicaName), now(),
                now() + make_interval(secs => \(grantLength.seconds)), 1)
            ON CONFLICT (store_id) DO UPDATE SET name = EXCLUDED.name, left_at = NULL,
                \(unescaped: BusSchema.grant(grantLength)), lease_grant = r.lease_grant + 1
            RETURNING lease_grant
            """, logger: logger)
        for try await (number) in rows.decode(Int64.self) { leaseGranted(number: number, sentAt: sent) }
    }

    /// Renews the lease (the heartbeat), naming the last grant this replica heard of. When
    /// PostgreSQL granted one since that this replica never heard of (its answer was lost), it
    /// learns the number and asks again once; when its row is gone, it registers again.
    func renewLease() async throws {
        let identity = try store.replication.identity()
        for _ in 0..<2 {
            guard let expected = shared.state.withLock({ $0.leaseGrant }) else { return }  // not registered yet
            let sent = LeaseInstant.now()
            // The second select reads the row as it was before the update (one snapshot).
            let rows = try await client.query(
                """
                WITH granted AS (
                    UPDATE hoard_replicas SET \(unescaped: BusSchema.grant(grantLength)), lease_grant = lease_grant + 1
                    WHERE store_id = \(identity) AND left_at IS NULL AND lease_grant = \(expected)
                    RETURNING lease_grant)
                SELECT (SELECT lease_grant FROM granted),
                    (SELECT lease_grant FROM hoard_replicas WHERE store_id = \(identity) AND left_at IS NULL)
                """, logger: logger)
            var answer: (granted: Int64?, last: Int64?) = (nil, nil)
            for try await row in rows.decode((Int64?, Int64?).self) { answer = row }
            if let granted = answer.granted {
                leaseGranted(number: granted, sentAt: sent)
                return
            }
            guard let last = answer.last else {
                // The row is gone (forgotten after the retention) or marked as left: register.
                if !Task.isCancelled { try await register() }
                return
            }
            shared.state.withLock { $0.leaseGrant = last }
        }
    }

    /// PostgreSQL granted lease number `number` for a renewal sent at `sent`. Answered while the
    /// lease runs, it extends it; otherwise it begins one at the end of the next catch-up.
    func leaseGranted(number: Int64, sentAt sent: LeaseInstant) {
        let received = LeaseInstant.now()
        let deadline = localDeadline(sentAt: sent)
        // The store's lease is moved under the bus's lock, so that it never disagrees with the
        // bus's own account, and nothing moves it once the bus has begun to leave.
        let (extended, ranOut) = shared.state.withLock { state -> (Bool, LeaseInstant?) in
            state.leaseGrant = max(state.leaseGrant ?? 0, number)
            guard !state.leaving else { return (false, nil) }
            if let held = state.leaseUntil, received < held {
                state.leaseUntil = max(held, deadline)
                store.replication.extendLease(until: deadline)
                return (true, nil)
            }
            state.grantedWithoutLease = max(state.grantedWithoutLease ?? sent, sent)
            return (false, state.leaseUntil)
        }
        if extended {
            leaseSignal.signal()
            return
        }
        if ranOut != nil { leaseRanOut() }
        // The catch-up that begins the lease: read the log now.
        inbox.readLog()
        changesSignal.signal()
    }

    /// Begins the lease of the renewal sent at `sent` (granted while the replica held none), once a
    /// catch-up begun after its answer has applied the log; nothing if its deadline has passed
    /// meanwhile (the next renewal brings another) or a lease is held.
    func beginLease(sentAt sent: LeaseInstant) {
        let deadline = localDeadline(sentAt: sent)
        guard LeaseInstant.now() < deadline else { return }
        // Begun under the bus's lock, as it is extended and ended.
        let begun: (began: Bool, outFor: Duration?)
        do {
            begun = try shared.state.withLock { state throws -> (began: Bool, outFor: Duration?) in
                guard !state.leaving, state.leaseUntil == nil else { return (false, nil) }
                try store.replication.beginLease(until: deadline)
                state.leaseUntil = deadline
                if state.grantedWithoutLease == sent { state.grantedWithoutLease = nil }
                defer { state.leaseOutSince = nil }
                return (true, state.leaseOutSince.map { $0.duration(to: .now) })
            }
        } catch {
            logger.error("PostgresBus: cannot begin the lease", metadata: ["error": "\(String(reflecting: error))"])
            return
        }
        guard begun.began else { return }
        metrics.leaseHeld.record(1)
        if let outFor = begun.outFor {
            metrics.secondsWithoutLease.increment(by: outFor.seconds)
            logger.notice(
                "PostgresBus: the lease is held; the store serves its records as fresh",
                metadata: ["withoutLease": "\(outFor)"])
        }
        leaseSignal.signal()
    }

    /// Notes that the lease ran out, if it has (the store stopped vouching at its deadline
    /// already, on its own read path): one warning, the gauge, the status.
    func leaseRanOut() {
        let now = LeaseInstant.now()
        let ended = shared.state.withLock { state -> Bool in
            guard let until = state.leaseUntil, now >= until else { return false }
            state.leaseUntil = nil
            state.leaseOutSince = ContinuousClock.now - until.duration(to: now)
            return true
        }
        guard ended else { return }
        metrics.leaseHeld.record(0)
        logger.warning(
            "PostgresBus: the lease ran out (no renewal answered in time); the store serves nothing as fresh until it is renewed and the store has caught up",
            metadata: ["lastError": "\(status.lastError ?? "none")"])
    }

    /// Wakes at the lease's deadline to note that it ran out, unless a renewal moved it.
    func keepWatchingLease() async {
        while !Task.isCancelled {
            let generation = leaseSignal.generation
            guard let until = shared.state.withLock({ $0.leaseUntil }) else {
                await leaseSignal.wait(after: generation)
                continue
            }
            let left = LeaseInstant.now().duration(to: until)
            if left <= .zero {
                leaseRanOut()
            } else {
                await leaseSignal.wait(after: generation, until: .now + left)
            }
        }
    }

    /// Ends the lease as the bus stops, before the others learn that it left (they stop waiting
    /// for it then).
    func endLease() {
        let held = shared.state.withLock { state -> Bool in
            state.leaving = true
            store.replication.endLease()
            defer {
                state.leaseUntil = nil
                state.grantedWithoutLease = nil
            }
            if state.leaseUntil != nil { state.leaseOutSince = .now }
            return state.leaseUntil != nil
        }
        if held { metrics.leaseHeld.record(0) }
    }

    /// The lease as ``Status`` shows it.
    var leaseStatus: Lease {
        shared.state.withLock { state in
            if let until = state.leaseUntil { return .held(until: .now + LeaseInstant.now().duration(to: until)) }
            return .out(since: state.leaseOutSince ?? .now)
        }
    }

    /// Passes the store's count of reads without a lease on to the metrics.
    func recordReadsWithoutLease() {
        let count = store.replication.readsWithoutLease
        let added = shared.state.withLock { state in
            defer { state.readsWithoutLease = count }
            return count - state.readsWithoutLease
        }
        if added > 0 { metrics.readsWithoutLease.increment(by: added) }
    }
}
#endif
