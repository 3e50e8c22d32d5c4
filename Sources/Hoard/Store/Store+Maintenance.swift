package import LMDB

// Store-wide maintenance, run on intervals by a service: purges, stale reader slots, gauges and
// the application's own periodic work (StoreMaintenance; HoardServiceLifecycle makes it a Service).

extension Store {
    /// Deletes the expired records of every collection, each collection in a write transaction of
    /// its own; returns how many went, by collection (collections without any left out).
    ///
    /// It needs no model types: a record's expiry is in its header. A damaged record stays. So
    /// does one that read-through may still serve stale: within the longest window of the
    /// ``Freshness`` its collection was opened with in this process (`hoard purge-expired`, which
    /// opens none, purges at expiry).
    ///
    /// - Throws: ``HoardError/storage(_:)`` when the storage fails (the collections purged before stay purged).
    @discardableResult
    public func purgeExpired() throws -> [String: Int] {
        var purged: [String: Int] = [:]
        for name in try collectionNames() {
            guard let database = try recordDatabase(of: name) else { continue }
            let step = try writeLMDB { txn in
                try purgeExpired(of: name, database: database, from: nil, scanning: .max, in: txn)
            }
            if step.purged > 0 { purged[name] = step.purged }
        }
        return purged
    }

    /// Deletes the expired records of every collection as writes of the store's group commit,
    /// each looking at no more than `batchSize` records; returns how many went, by collection.
    /// What stays is what ``purgeExpired()`` keeps.
    ///
    /// The form for a running service (``StoreMaintenance`` uses it): no write holds the writer
    /// lock for longer than one batch takes, so the service's own writes wait little behind a
    /// purge. Each batch commits on its own; a cancelled task stops after the batch in progress.
    ///
    /// - Throws: ``HoardError/storage(_:)`` when the storage fails (the batches committed before stay purged), or
    ///   `CancellationError` when the task was cancelled between batches.
    @discardableResult
    public func purgeExpired(batchSize: Int) async throws -> [String: Int] {
        precondition(batchSize > 0, "purgeExpired: batchSize must be positive")
        var purged: [String: Int] = [:]
        for name in try collectionNames() {
            guard let database = try recordDatabase(of: name) else { continue }
            var resume: [UInt8]? = []
            while let start = resume {
                try Task.checkCancellation()
                let step = try await submit { txn in
                    try self.purgeExpired(
                        of: name, database: database, from: start.isEmpty ? nil : start, scanning: batchSize, in: txn)
                }
                if step.purged > 0 { purged[name, default: 0] += step.purged }
                resume = step.resumeAt
            }
        }
        return purged
    }

    /// Deletes the expired records of collection `name` (its records in `database`) in `txn`,
    /// looking at no more than `limit` records from the first key at or after `start` (the
    /// collection's first when `nil`): the one purge, for a collection's `purgeExpired`, the
    /// store's and `hoard purge-expired`. `resumeAt` is the key the next step starts from, `nil`
    /// when the collection's end was reached.
    package func purgeExpired(
        of name: String, database: Database, keyKind: KeyKind = .custom, from start: [UInt8]?, scanning limit: Int,
        in txn: borrowing LMDB.WriteTransaction
    ) throws -> (purged: Int, resumeAt: [UInt8]?) {
        // A record that read-through may still serve stale (within the longest freshness window
        // the collection was opened with in this process) is kept until that window has passed too.
        let state = state(of: name)
        let now = options.now().addingSaturating(-state.purgeGrace.load(ordering: .relaxed))
        var writer = try writer(of: name, database: database, keyKind: keyKind, in: txn)
        let step = try writer.removeExpired(at: now, from: start, scanning: limit, in: txn)
        try writer.finish(in: txn)
        if step.purged > 0 {
            logger.info("purged expired records", metadata: ["collection": "\(name)", "count": "\(step.purged)"])
        }
        return step
    }
}

/// A store's background maintenance, on intervals: purging expired records
/// (``Store/purgeExpired(batchSize:)``), clearing the reader slots of processes that died inside
/// a read transaction, setting the metrics gauges (``Store/publishMetrics()``), and whatever
/// periodic work the application adds with ``every(_:_:do:)``.
///
/// ```swift
/// var maintenance = StoreMaintenance(store: store)
/// maintenance.every(.minutes(5), "users: lazy migration write-back") {
///     try await users.flushMigrations()
/// }
/// let task = Task { await maintenance.run() }
/// …
/// task.cancel()   // returns after the write in progress
/// ```
///
/// In a swift-service-lifecycle `ServiceGroup`, run it as the `Service` that the
/// HoardServiceLifecycle module makes of it (`maintenance.service`), which also stops on a
/// graceful shutdown.
///
/// A step that fails is logged and tried again at its next interval: maintenance never stops
/// the service. Cancelling the task that runs ``run()`` ends it after the write in progress (a
/// purge commits in batches, each whole or not at all), which is what a graceful shutdown needs.
public struct StoreMaintenance: Sendable {
    /// The store maintained.
    public let store: Store
    /// How often expired records are deleted; `nil` never (reads hide them all the same).
    public var purgeInterval: Duration?
    /// How many records one purge write looks at (see ``Store/purgeExpired(batchSize:)``).
    public var purgeBatchSize = 1_000
    /// How often the gauges are set; `nil` never.
    public var metricsInterval: Duration?
    /// How often stale reader slots are cleared; `nil` never (opening the store clears them too).
    public var readerCheckInterval: Duration?
    /// The application's own steps, in the order they were added.
    private var added: [Step] = []

    /// Maintenance of `store` with these intervals (by default: purge every minute, gauges every
    /// 10 seconds, reader slots every minute).
    public init(
        store: Store, purgeInterval: Duration? = .minutes(1), metricsInterval: Duration? = .seconds(10),
        readerCheckInterval: Duration? = .minutes(1)
    ) {
        self.store = store
        self.purgeInterval = purgeInterval
        self.metricsInterval = metricsInterval
        self.readerCheckInterval = readerCheckInterval
    }

    /// Adds `work`, run every `interval` (and once at the start) beside the store's own steps;
    /// `name` is what the log says when it fails.
    ///
    /// Lazy migrations are the usual case: rewriting the records a collection remembered needs
    /// the collection's model type, which the store alone does not know
    /// (`try await users.flushMigrations()`).
    public mutating func every(
        _ interval: Duration, _ name: String, do work: @escaping @Sendable () async throws -> Void
    ) {
        added.append(Step(name: name, interval: interval, work: work))
    }

    /// One periodic piece of work.
    struct Step: Sendable {
        let name: String
        let interval: Duration
        let work: @Sendable () async throws -> Void
    }

    /// The steps this maintenance runs: the store's (those with an interval) and the added ones.
    var steps: [Step] {
        let store = store
        let batchSize = purgeBatchSize
        var steps: [Step] = []
        if let purgeInterval, !store.options.readOnly {
            steps.append(
                Step(name: "purge expired records", interval: purgeInterval) {
                    try await store.purgeExpired(batchSize: batchSize)
                })
        }
        if let metricsInterval {
            steps.append(Step(name: "publish metrics", interval: metricsInterval) { try store.publishMetrics() })
        }
        if let readerCheckInterval {
            steps.append(
                Step(name: "clear stale reader slots", interval: readerCheckInterval) {
                    let cleared = try store.environment.clearStaleReaders()
                    if cleared > 0 {
                        store.logger.notice("cleared stale reader slots", metadata: ["count": "\(cleared)"])
                    }
                })
        }
        return steps + added
    }

    /// Runs every step once, now, one after the other; a step's error is logged, not thrown.
    public func runOnce() async {
        for step in steps { await run(step) }
    }

    func run(_ step: Step) async {
        do {
            try await step.work()
        } catch is CancellationError {
            // Shutting down: not a failure.
        } catch let error as HoardError where error.storageKind == .closed {
            // The store was closed under a step that had begun: shutting down too.
        } catch {
            store.logger.warning("maintenance step failed", metadata: ["step": "\(step.name)", "error": "\(error)"])
        }
    }

    /// Runs every step once, then each on its interval, until the task is cancelled; then it
    /// returns (after the write in progress), without an error.
    public func run() async {
        let clock = ContinuousClock()
        let steps = steps
        var due = Array(repeating: clock.now, count: steps.count)
        while !Task.isCancelled, let next = due.min() {
            do {
                try await clock.sleep(until: next)
            } catch {
                return  // cancelled: a graceful shutdown
            }
            for index in steps.indices where due[index] <= clock.now {
                await run(steps[index])
                due[index] = clock.now + steps[index].interval
                if Task.isCancelled { return }
            }
        }
    }
}
