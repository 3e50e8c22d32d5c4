#if Postgres
public import Hoard
internal import Logging
internal import PostgresNIO
internal import Synchronization
internal import CoreMetrics

// Shared fills: a read-through miss asks PostgreSQL before the upstream, so that the replicas
// fetch a key once for all of them. A record fetched under a lease is kept in `hoard_fills`;
// `hoard_publish` deletes the fills and leases a change makes obsolete in the transaction that
// appends it to the log, so a fill begun before a change is never stored after it, and a fill
// read after a change's publication began after it (docs/REPLICAS.md, "Shared fills").

extension PostgresBus {
    /// How the replicas share their read-through fetches (``Configuration/sharedFills``).
    ///
    /// A replica that misses a key of one of `collections` reads `hoard_fills` first. When it
    /// holds no record of the key that a change published since its fetch began has made
    /// obsolete, the replica takes the key's lease, fetches, and stores what it fetched there for
    /// the others, who wait for it (for at most ``lease``) instead of calling the upstream too.
    /// PostgreSQL away or slow (past ``timeout``), a replica fetches by itself, as without the
    /// tier; a read never fails because of it.
    public struct SharedFills: Sendable, Hashable {
        /// The names of the collections whose fills are shared.
        public var collections: Set<String>
        /// How long a replica holds the lease of a key it fetches: the others wait that long at
        /// most for its record before one of them fetches the key.
        public var lease: Duration
        /// How long one step of the tier with PostgreSQL may take before the replica fetches by itself.
        public var timeout: Duration
        /// The most records the table keeps: past it, the oldest fills are deleted (at the
        /// heartbeat that trims the log), as are expired ones.
        public var maxRecords: Int

        /// Settings; each parameter is the property of the same name.
        public init(
            collections: Set<String>, lease: Duration = .seconds(5), timeout: Duration = .milliseconds(500),
            maxRecords: Int = 100_000
        ) {
            self.collections = collections
            self.lease = lease
            self.timeout = timeout
            self.maxRecords = maxRecords
        }
    }

    /// What this replica's shared fills did since the bus was made.
    public struct SharedFillStatistics: Sendable, Hashable {
        /// Keys answered with a record from the table (at once or after a wait).
        public var hits: Int
        /// Keys this replica fetched from the upstream through the tier.
        public var misses: Int
        /// Keys whose fetch waited for another replica's.
        public var waits: Int
        /// Leases taken.
        public var leases: Int
        /// Leases whose record was not stored: a change voided them, or another replica took over
        /// a lease that had run out.
        public var voided: Int
        /// Fetches that went to the upstream without the tier: PostgreSQL away or slow, or a wait
        /// for another replica that lasted a whole lease.
        public var bypassed: Int
    }

    /// What this replica's shared fills did since the bus was made.
    public var sharedFillStatistics: SharedFillStatistics { fillCounters.statistics }
}

extension PostgresBus: SharedFillTier {
    /// A key as `hoard_fill_begin` answers it.
    private struct FillRow {
        var key: [UInt8]
        var record: SharedRecord?
        var token: Int64?
        var waitMilliseconds: Int64?
    }

    /// The records of `keys` in `collection`: from `hoard_fills` when a row is still valid, else
    /// after another replica's fetch under its lease, else fetched through `upstream` under a lease
    /// of this replica's and shared unless a change voided the lease meanwhile.
    ///
    /// - Throws: what `upstream` throws, and `CancellationError`; PostgreSQL's errors never reach
    ///   the caller (the keys are then fetched through `upstream`).
    public func fill<Fetched: Sendable>(
        collection: String, keys: [[UInt8]],
        upstream: @escaping @Sendable ([[UInt8]]) async throws -> (fetched: Fetched, records: [[UInt8]: SharedRecord])
    ) async throws -> SharedFill<Fetched> {
        var remaining = Array(Set(keys))
        var shared: [[UInt8]: SharedRecord] = [:]
        var fetched: [Fetched] = []
        var waited = false
        guard let settings = configuration.sharedFills else {
            return SharedFill(shared: [:], fetched: [try await upstream(remaining).fetched], waited: false)
        }
        // The longest this call waits for other replicas' fetches, in all.
        let giveUp = ContinuousClock.now + settings.lease
        while !remaining.isEmpty {
            try Task.checkCancellation()
            let rows: [FillRow]
            do {
                let asked = remaining
                rows = try await boundedFill(settings) { try await self.beginFills(collection, asked, settings) }
            } catch {
                fillCounters.add(.bypassed, remaining.count)
                logger.debug(
                    "PostgresBus: the shared fills could not be read; fetching by itself",
                    metadata: ["collection": "\(collection)", "error": "\(String(reflecting: error))"])
                fetched.append(try await upstream(remaining).fetched)
                break
            }
            var leased: [[UInt8]: Int64] = [:]
            var held: [[UInt8]] = []
            var nextLook = giveUp
            for row in rows {
                if let record = row.record {
                    shared[row.key] = record
                } else if let token = row.token {
                    leased[row.key] = token
                } else {
                    held.append(row.key)
                    // Another's lease: look again when it runs out, if no fill is announced first.
                    let wait = Duration.milliseconds(row.waitMilliseconds ?? 10) + .milliseconds(5)
                    nextLook = min(nextLook, ContinuousClock.now + wait)
                }
            }
            fillCounters.add(.hits, rows.count { $0.record != nil })
            if !leased.isEmpty {
                fillCounters.add(.leases, leased.count)
                fillCounters.add(.misses, leased.count)
                let answer: (fetched: Fetched, records: [[UInt8]: SharedRecord])
                do {
                    answer = try await upstream(Array(leased.keys))
                } catch {
                    endFills(collection, leased, records: [:], settings)
                    throw error
                }
                fetched.append(answer.fetched)
                endFills(collection, leased, records: answer.records, settings)
            }
            remaining = held
            guard !remaining.isEmpty else { break }
            if ContinuousClock.now >= giveUp {
                fillCounters.add(.bypassed, remaining.count)
                fetched.append(try await upstream(remaining).fetched)
                break
            }
            if !waited { fillCounters.add(.waits, remaining.count) }
            waited = true
            await fillWaits.wait(collection: collection, keys: remaining, until: nextLook)
        }
        return SharedFill(shared: shared, fetched: fetched, waited: waited)
    }

    /// Runs a step of the tier, bounded by its timeout; not tried while the bus is not connected.
    private func boundedFill<R: Sendable>(
        _ settings: SharedFills, _ operation: @escaping @Sendable () async throws -> R
    ) async throws -> R {
        guard status.connected else {
            throw PostgresBusError.notConnected(operation: "a shared fill", lastError: status.lastError)
        }
        return try await withTimeout(
            settings.timeout, "a shared fill", abandonedBy: connectionLost, in: outstanding, operation)
    }

    /// `hoard_fill_begin` for `keys`.
    private func beginFills(
        _ collection: String, _ keys: [[UInt8]], _ settings: SharedFills
    ) async throws
        -> [FillRow]
    {
        let leaseMilliseconds = Int64((settings.lease.seconds * 1_000).rounded(.up))
        let rows = try await client.query(
            """
            SELECT o_key, o_record, o_tags, o_expires_ms, o_token, o_wait_ms
            FROM hoard_fill_begin(\(collection), \(keys.map { ByteBuffer(bytes: $0) }), \(leaseMilliseconds))
            """, logger: logger)
        var found: [FillRow] = []
        for try await (key, record, tags, expires, token, wait) in rows.decode(
            (ByteBuffer, ByteBuffer?, [ByteBuffer]?, Int64?, Int64?, Int64?).self)
        {
            found.append(
                FillRow(
                    key: Array(buffer: key),
                    record: record.map {
                        SharedRecord(
                            bytes: Array(buffer: $0), tags: (tags ?? []).map { Array(buffer: $0) }, expiresAt: expires)
                    },
                    token: token, waitMilliseconds: wait))
        }
        return found
    }

    /// Stores the records fetched under `leased` (giving up the leases of keys without one), in
    /// a task of its own: the fetch's caller does not wait for it, the other replicas are told
    /// when it is done.
    private func endFills(
        _ collection: String, _ leased: [[UInt8]: Int64], records: [[UInt8]: SharedRecord], _ settings: SharedFills
    ) {
        _ = outstanding.spawn("storing shared fills") {
            var voided = 0
            for (key, token) in leased {
                let record = records[key]
                do {
                    let stored = try await self.boundedFill(settings) {
                        try await self.endFill(collection, key: key, token: token, record: record)
                    }
                    if !stored && record != nil { voided += 1 }
                } catch {
                    // The lease runs out, and another replica fetches.
                    self.logger.debug(
                        "PostgresBus: a shared fill could not be stored",
                        metadata: ["collection": "\(collection)", "error": "\(String(reflecting: error))"])
                }
            }
            self.fillCounters.add(.voided, voided)
        }
    }

    /// `hoard_fill_end` for one key: whether the lease still held.
    private func endFill(_ collection: String, key: [UInt8], token: Int64, record: SharedRecord?) async throws -> Bool {
        let tags = record?.tags.map { ByteBuffer(bytes: $0) }
        let rows = try await client.query(
            """
            SELECT hoard_fill_end(\(collection), \(ByteBuffer(bytes: key)), \(token),
                \(record.map { ByteBuffer(bytes: $0.bytes) }), \(tags), \(record?.expiresAt))
            """, logger: logger)
        var stored = false
        for try await (ended) in rows.decode(Bool.self) { stored = ended }
        return stored
    }

    /// Deletes expired fills, leases long run out, and the oldest fills past
    /// ``SharedFills/maxRecords`` (at the heartbeat that trims the log).
    func purgeFills() async throws {
        guard let settings = configuration.sharedFills else { return }
        try await client.query(
            """
            DELETE FROM hoard_fills
            WHERE (record IS NOT NULL AND expires_at <= now())
                OR (record IS NULL AND lease_until < now() - make_interval(secs => \(settings.lease.seconds)))
                OR ctid = ANY (ARRAY(
                    SELECT ctid FROM hoard_fills WHERE filled_at IS NOT NULL
                    ORDER BY filled_at DESC OFFSET \(Int64(settings.maxRecords))))
            """, logger: logger)
    }

    /// Handles a notification `f|KEY|COLLECTION`: a shared fill ended.
    func fillEnded(_ payload: String) {
        let parts = payload.split(separator: "|", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, let key = BusNotice.bytes(hex: parts[1].utf8) else { return }
        fillWaits.ended(collection: String(parts[2]), key: key)
    }
}

/// The fetches waiting for other replicas' fills, each woken when one of its keys' fill ends.
final class FillWaits: Sendable {
    private struct Waiter {
        var collection: String
        var keys: Set<[UInt8]>
        var wakeup: Wakeup
    }
    private let waiters = Mutex<(next: Int, all: [Int: Waiter])>((0, [:]))

    /// Returns when the fill of one of `keys` ends, at `deadline`, or when the task is cancelled.
    func wait(collection: String, keys: [[UInt8]], until deadline: ContinuousClock.Instant) async {
        let wakeup = Wakeup()
        let seen = wakeup.generation
        let id = waiters.withLock { waiters in
            waiters.next += 1
            waiters.all[waiters.next] = Waiter(collection: collection, keys: Set(keys), wakeup: wakeup)
            return waiters.next
        }
        defer { _ = waiters.withLock { $0.all.removeValue(forKey: id) } }
        await wakeup.wait(after: seen, until: deadline)
    }

    func ended(collection: String, key: [UInt8]) {
        let woken = waiters.withLock { waiters in
            waiters.all.values.filter { $0.collection == collection && $0.keys.contains(key) }.map(\.wakeup)
        }
        for wakeup in woken { wakeup.signal() }
    }
}

/// The counts behind ``PostgresBus/SharedFillStatistics``, and their metrics.
final class FillCounters: Sendable {
    enum Kind: Int, CaseIterable {
        case hits, misses, waits, leases, voided, bypassed
    }
    private let counts = Mutex([Int](repeating: 0, count: Kind.allCases.count))
    private let metrics: [Counter]

    init(factory: any MetricsFactory) {
        metrics = Kind.allCases.map { Counter(label: "hoard_bus_shared_fill_\($0)_total", factory: factory) }
    }

    func add(_ kind: Kind, _ amount: Int) {
        guard amount != 0 else { return }
        counts.withLock { $0[kind.rawValue] += amount }
        metrics[kind.rawValue].increment(by: amount)
    }

    var statistics: PostgresBus.SharedFillStatistics {
        let counts = counts.withLock { $0 }
        return PostgresBus.SharedFillStatistics(
            hits: counts[Kind.hits.rawValue], misses: counts[Kind.misses.rawValue], waits: counts[Kind.waits.rawValue],
            leases: counts[Kind.leases.rawValue], voided: counts[Kind.voided.rawValue],
            bypassed: counts[Kind.bypassed.rawValue])
    }
}
#endif
