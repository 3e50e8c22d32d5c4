internal import LMDB

// Store-wide maintenance: what a service runs on intervals while it is up (purging expired
// records, clearing reader slots of processes that died, publishing the gauges), usable on its
// own (`StoreMaintenance.run()` in a task) or as a swift-service-lifecycle `Service`, which only
// needs a `run()` that returns when its task is cancelled.

extension Store {
    /// Deletes the expired records of every collection, each collection in a write transaction of
    /// its own; returns how many went, by collection (collections without any left out).
    ///
    /// It needs no model types: a record's expiry is in its header. A record whose header cannot
    /// be read is damaged, not expired, and stays.
    ///
    /// - Throws: `LMDBError` when LMDB fails (the collections purged before stay purged).
    @discardableResult
    public func purgeExpired() throws -> [String: Int] {
        var purged: [String: Int] = [:]
        for name in try collectionNames() {
            guard let database = try recordDatabase(of: name) else { continue }
            let count = try write { txn in try purgeExpired(in: database, collection: name, txn: txn) }
            if count > 0 { purged[name] = count }
        }
        return purged
    }

    /// Deletes the expired records of collection `name` in `txn`: the one purge loop, for a
    /// collection's `purgeExpired` and the store's.
    func purgeExpired(in database: Database, collection name: String, txn: borrowing WriteTransaction) throws -> Int {
        let now = options.now()
        var purged = 0
        try txn.withCursor(in: database) { cursor in
            var entry = try cursor.first()
            while let current = entry {
                if let header = try? RecordHeader.parse(current.value).0, header.isExpired(at: now) {
                    try cursor.deleteCurrent()
                    purged += 1
                }
                entry = try cursor.next()
            }
        }
        if purged > 0 {
            logger.info("purged expired records", metadata: ["collection": "\(name)", "count": "\(purged)"])
            state(of: name).metrics.expiredPurged.increment(by: purged)
        }
        return purged
    }
}

/// A store's background maintenance, on intervals: purging expired records
/// (``Store/purgeExpired()``), clearing the reader slots of processes that died inside a read
/// transaction, and setting the metrics gauges (``Store/publishMetrics()``).
///
/// ```swift
/// let maintenance = StoreMaintenance(store: store)
/// let task = Task { try await maintenance.run() }   // or as a service-lifecycle Service
/// …
/// task.cancel()   // returns after the step in progress
/// ```
///
/// A step that fails is logged and tried again at its next interval: maintenance never stops
/// the service. Cancelling the task that runs ``run()`` ends it after the step in progress (a
/// purge's write commits or aborts whole), which is what a graceful shutdown needs.
public struct StoreMaintenance: Sendable {
    /// The store maintained.
    public let store: Store
    /// How often expired records are deleted; `nil` never (reads hide them all the same).
    public var purgeInterval: Duration?
    /// How often the gauges are set; `nil` never.
    public var metricsInterval: Duration?
    /// How often stale reader slots are cleared; `nil` never (opening the store clears them too).
    public var readerCheckInterval: Duration?

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

    enum Step: CaseIterable { case purge, metrics, readers }

    func interval(of step: Step) -> Duration? {
        switch step {
        case .purge: store.options.readOnly ? nil : purgeInterval
        case .metrics: metricsInterval
        case .readers: readerCheckInterval
        }
    }

    /// Runs every step once, now; a step's error is logged, not thrown.
    public func runOnce() {
        for step in Step.allCases where interval(of: step) != nil { run(step) }
    }

    func run(_ step: Step) {
        do {
            switch step {
            case .purge: try store.purgeExpired()
            case .metrics: try store.publishMetrics()
            case .readers:
                let cleared = try store.environment.clearStaleReaders()
                if cleared > 0 { store.logger.notice("cleared stale reader slots", metadata: ["count": "\(cleared)"]) }
            }
        } catch {
            store.logger.warning("maintenance step failed", metadata: ["step": "\(step)", "error": "\(error)"])
        }
    }

    /// Runs every step once, then each on its interval, until the task is cancelled; then it
    /// returns (after the step in progress), without an error.
    public func run() async {
        let clock = ContinuousClock()
        var due: [Step: ContinuousClock.Instant] = [:]
        for step in Step.allCases where interval(of: step) != nil { due[step] = clock.now }
        while !Task.isCancelled, let next = due.values.min() {
            do {
                try await clock.sleep(until: next)
            } catch {
                return  // cancelled: a graceful shutdown
            }
            for (step, instant) in due where instant <= clock.now {
                run(step)
                if let interval = interval(of: step) { due[step] = clock.now + interval }
                if Task.isCancelled { return }
            }
        }
    }
}
