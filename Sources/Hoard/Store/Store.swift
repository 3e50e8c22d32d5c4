public import LMDB
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import Logging
public import CoreMetrics
internal import CBOR
internal import Dispatch
internal import Synchronization
internal import Tracing
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

/// A Hoard store: an LMDB environment holding typed collections and a meta database with the
/// store's format version and the key-set registry of every collection.
///
/// ```swift
/// let store = try Store(path: "/var/cache/myservice/hoard")
/// let users = try store.collection(User.self)
/// try users.put(user)
/// let same = try users.get(user.id)
/// ```
///
/// (The type is `Store` rather than `Hoard` so that it does not shadow the module's name.)
///
/// ## Topics
/// - ``HoardCollection``
/// - ``RecordHeader``
/// - ``HoardError``
public final class Store: Sendable {
    /// How to open a store.
    public struct Options: Sendable {
        /// What a commit may lose on an operating-system crash.
        public var durability: Durability
        /// The largest the store's map may grow to; `nil` for no cap.
        public var maxMapSize: Int?
        /// How many collections the store can hold (each is an LMDB named database).
        public var maxCollections: Int
        /// How many read transactions may be open at once, across all processes (LMDB's reader
        /// table; the first process to open the store sets it).
        public var maxReaders: Int
        /// Open read-only: nothing is created or written.
        public var readOnly: Bool
        /// The clock records are stamped with, and expiry is judged by: `nil` (the default) for the
        /// system clock (``Store/systemClock``, read without making a `Date`); a clock of your own
        /// for tests. Records store times to the millisecond.
        public var clock: (@Sendable () -> Date)? {
            didSet { now = Self.milliseconds(of: clock) }
        }
        /// The clock in milliseconds since 1970, as records store times: what the store reads.
        private(set) var now: @Sendable () -> Int64
        /// Where the store reports what it does (opening, registry changes, migrations, damaged
        /// records skipped, purges). By default nothing is logged.
        public var logger: Logger
        /// How many async writes one commit gathers at most (see ``Store/write(_:)-9ctiz``).
        public var groupCommit: GroupCommitLimits
        /// How this process notices the commits other processes make to the store, while one of
        /// its collections has observers (``HoardCollection/changes(limit:)``).
        public var otherProcesses: OtherProcessChanges
        /// How many of the last write transactions the store's change log keeps (docs/FORMAT.md):
        /// with it, observers in other processes learn which records a commit changed; without it
        /// (`nil`, the default), only that something changed. Costs a writer one record a commit.
        public var changeLog: Int?
        /// How the store waits until a moment of its ``clock`` (for ``HoardCollection/observe(_:)``
        /// to report a record's expiry, which makes no commit): `nil`, the default, sleeps on the
        /// system's clock; a manual clock in tests resumes it when moved past that moment.
        public var sleepUntil: (@Sendable (Date) async throws -> Void)?
        /// Where the store's counters, timers and gauges go (the Metrics article lists them);
        /// `nil`, the default, for the backend the application bootstrapped with swift-metrics'
        /// `MetricsSystem` (none: they cost a call that does nothing).
        public var metricsFactory: (any MetricsFactory)?
        /// Where the store's spans go (the Metrics article lists them): by default to the tracer
        /// the application bootstrapped with swift-distributed-tracing before opening the store,
        /// none (and no cost) unless it did.
        public var spans: SpanDestination

        /// The options to choose for a cache: durability `.riskLastCommitOnOSCrash` (one flush a
        /// commit, not two), whose whole risk is that an operating-system crash or power loss may
        /// undo the last commit; a process crash loses nothing (docs/RELIABILITY.md).
        public static var cache: Options { Options(durability: .riskLastCommitOnOSCrash) }

        /// Options with these values; each parameter is the property of the same name.
        public init(
            durability: Durability = .durable,
            maxMapSize: Int? = nil,
            maxCollections: Int = 63,
            maxReaders: Int = 126,
            readOnly: Bool = false,
            clock: (@Sendable () -> Date)? = nil,
            logger: Logger = Logger(label: "hoard", factory: { _ in SwiftLogNoOpLogHandler() }),
            groupCommit: GroupCommitLimits = GroupCommitLimits(),
            metricsFactory: (any MetricsFactory)? = nil,
            otherProcesses: OtherProcessChanges = .watchFile,
            changeLog: Int? = nil,
            sleepUntil: (@Sendable (Date) async throws -> Void)? = nil,
            spans: SpanDestination = .system
        ) {
            self.durability = durability
            self.maxMapSize = maxMapSize
            self.maxCollections = maxCollections
            self.maxReaders = maxReaders
            self.readOnly = readOnly
            self.clock = clock
            self.now = Self.milliseconds(of: clock)
            self.logger = logger
            self.groupCommit = groupCommit
            self.metricsFactory = metricsFactory
            self.otherProcesses = otherProcesses
            self.changeLog = changeLog.map { max($0, 1) }
            self.sleepUntil = sleepUntil
            self.spans = spans
        }

        /// The factory the store's instruments are made with.
        var metrics: any MetricsFactory { metricsFactory ?? MetricsSystem.factory }

        private static func milliseconds(of clock: (@Sendable () -> Date)?) -> @Sendable () -> Int64 {
            guard let clock else { return Store.systemClock }
            return { clock().storedMilliseconds }
        }
    }

    /// The store format this code reads and writes. Format 1 had no tags, format 2 tagged
    /// records, format 3 wrote records in record format 2, format 4 writes them in record format 3
    /// (``RecordHeader``: keys by number). Code of this version opens stores of every format up to
    /// this one and makes a store it opens for writing format 4 in that open, so that older code,
    /// which cannot read the records it will write, refuses the store with
    /// ``HoardError/newerFormat(path:found:supported:)``.
    public static let formatVersion = 4
    /// The name of the meta database.
    static let metaName = "hoard.meta"
    /// The name of the outbox database: keys to announce to other replicas.
    static let outboxName = "hoard.outbox"
    /// The name of the tag index's database (Tags/).
    static let tagsName = "hoard.tags"
    /// The prefix of collection databases.
    static let collectionPrefix = "c:"

    /// The LMDB environment underneath, for tools that inspect or measure LMDB itself.
    @_spi(LMDB) public let environment: Environment
    /// The path the store was opened with.
    public var path: String { environment.path }
    /// The options the store was opened with (its clock, durability, logger…).
    public let options: Options
    package let meta: Database?
    /// Where async writes run (see Store+Async.swift).
    let writerQueue = DispatchQueue(label: "hoard.store.writer")
    /// What the handles of one collection share in this process, by collection name.
    let collectionStates = Mutex<[String: CollectionState]>([:])
    /// The store's own metrics (commits, gauges).
    let metrics: StoreMetrics
    /// The async writes waiting for the next commit (Store+GroupCommit.swift).
    let groupCommit = GroupCommit()
    /// The keys to announce to other replicas (Replication/); `nil` in a read-only store without one.
    let outbox: Database?
    /// The records' tags (Tags/); `nil` in a read-only store without the database.
    let tags: Database?
    /// What replication keeps in memory: the identity, the last reset, the race guard.
    let replicationState = ReplicationState()
    /// The subscribers to changes, the commit listener and the change log (Observation/).
    let observation: Observation
    /// Where this store's spans go (Spans/); `nil` when nowhere.
    let tracer: (any Tracer)?

    /// Opens the store at `path`, creating it (unless read-only) when it does not exist.
    ///
    /// - Throws: ``HoardError/notAHoardStore(path:found:)`` for an LMDB environment that holds
    ///   other data, ``HoardError/newerFormat(path:found:supported:)`` for a store of a newer
    ///   format, ``HoardError/storage(_:)`` when the files cannot be opened (``StorageFailure/Kind/alreadyOpen``
    ///   when this process has the store open already). None of them changes the files.
    public convenience init(path: String, options: Options = Options()) throws {
        do {
            try self.init(opening: path, options: options)
        } catch let error as LMDBError {
            throw HoardError.storage(StorageFailure(error))
        }
    }

    private init(opening path: String, options: Options) throws {
        self.options = options
        metrics = StoreMetrics(factory: options.metrics)
        observation = Observation(options: options)
        tracer = options.spans.resolved
        environment = try Environment(
            path: path,
            // maxDatabases: the collections, the meta database, the outbox, the tags and the change log.
            options: .init(
                maxMapSize: options.maxMapSize, maxDatabases: options.maxCollections + 4,
                maxReaders: options.maxReaders, readOnly: options.readOnly, durability: options.durability.lmdb
            ))
        if environment.recoveredUnfinishedCreation {
            options.logger.warning(
                "the data file held only the torn first pages of a store whose creation was cut short (a power cut?); created the store anew",
                metadata: ["path": "\(path)"])
        }
        let names = try Self.databaseNames(environment)
        let formatKey = Array("format".utf8)
        if try Self.hasMeta(environment) {
            let meta = try environment.openDatabase(Self.metaName)
            let (format, metaIsEmpty) = try environment.read { txn in
                (
                    try txn.value(forKey: formatKey, in: meta).flatMap { String(decoding: $0, as: UTF8.self) }.flatMap {
                        Int($0)
                    },
                    try txn.count(in: meta) == 0
                )
            }
            if let format {
                guard format <= Self.formatVersion else {
                    throw HoardError.newerFormat(path: path, found: format, supported: Self.formatVersion)
                }
            }
            if let format, format == Self.formatVersion || options.readOnly {
                // Up to date, or read as it is.
            } else if format != nil || (metaIsEmpty && names == [Self.metaName]) {
                // An older format, made current before this code writes its records; or an empty
                // meta database and nothing else, a creation cut short by older code, which wrote
                // the format in a second transaction: finished now.
                if !options.readOnly {
                    try environment.write { txn in
                        try txn.put(Array(String(Self.formatVersion).utf8), forKey: formatKey, in: meta)
                    }
                }
            } else {
                throw HoardError.notAHoardStore(path: path, found: names)
            }
            self.meta = meta
        } else if names.isEmpty {
            if options.readOnly {
                meta = nil  // an empty environment opened read-only: no collections to read
            } else {
                // The meta database and the format in one transaction: a process killed while
                // creating the store leaves either nothing or a whole store.
                meta = try environment.createDatabase(Self.metaName) { txn, meta in
                    try txn.put(Array(String(Self.formatVersion).utf8), forKey: formatKey, in: meta)
                }
            }
        } else {
            throw HoardError.notAHoardStore(path: path, found: names)
        }
        outbox = try Self.openOrCreate(Self.outboxName, environment, readOnly: options.readOnly || meta == nil)
        tags = try Self.openOrCreate(Self.tagsName, environment, readOnly: options.readOnly || meta == nil)
        if options.changeLog != nil, !options.readOnly {
            observation.changeLog = try environment.openDatabase(ChangeLogFormat.databaseName, create: true)
            environment.setCommitListenerOnce(observation)
        }
        if let meta,
            let resetAt = try environment.read({ txn in
                try txn.value(forKey: Array(MetaKey.staleBefore.utf8), in: meta)
            }).flatMap(Self.decodeMilliseconds)
        {
            replicationState.staleBefore.store(resetAt, ordering: .relaxed)
        }
        options.logger.info(
            "opened store",
            metadata: [
                "path": "\(path)", "created": "\(environment.wasCreated)", "readOnly": "\(options.readOnly)",
            ])
    }

    package var logger: Logger { options.logger }

    /// Milliseconds since 1970 from the system clock, as of the kernel's last tick on Linux
    /// (`CLOCK_REALTIME_COARSE`, one tick behind at most: every put stamps its record). Pass
    /// another `clock` in ``Options`` for more precision.
    public static let systemClock: @Sendable () -> Int64 = {
        var now = timespec()
        #if os(Linux)
        clock_gettime(CLOCK_REALTIME_COARSE, &now)
        #else
        clock_gettime(CLOCK_REALTIME, &now)
        #endif
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }

    /// A database of the store's own (`hoard.outbox`, `hoard.tags`), made at the first open by code that knows it.
    static func openOrCreate(_ name: String, _ environment: Environment, readOnly: Bool) throws -> Database? {
        do {
            return try environment.openDatabase(name)
        } catch let error as LMDBError where error.kind == .notFound {
            return readOnly ? nil : try environment.openDatabase(name, create: true)
        }
    }

    /// Whether the environment has the meta database: asked directly, not by listing names,
    /// so that a store with many collections is never taken for a foreign environment.
    static func hasMeta(_ environment: Environment) throws -> Bool {
        let main = try environment.openDatabase(nil)
        return try environment.read { txn in try txn.contains(Array(metaName.utf8), in: main) }
    }

    /// The names of the named databases (the keys of LMDB's main database), the first 64, for messages.
    static func databaseNames(_ environment: Environment) throws -> [String] {
        let main = try environment.openDatabase(nil)
        return try environment.read { txn in
            try txn.entries(in: main, limit: 64).map { String(decoding: $0.key, as: UTF8.self) }
        }
    }

    /// Opens (creating when needed) the collection of `Model`, named after the type unless `name` says otherwise.
    ///
    /// The first open records the type's key sets in the registry; later opens check that every
    /// local key set recorded before is unchanged and record new versions.
    ///
    /// Every call returns a new handle, with the settings given here; the handles of one
    /// collection share its state in this process (lazy migrations, fetches in flight, statistics).
    ///
    /// - Throws: ``HoardError/keySetChanged(type:collection:version:differences:)`` when a recorded
    ///   key set differs from the code's; ``HoardError/invalidCapacity(collection:reason:)`` for a
    ///   capacity below one record.
    ///
    /// - Parameters:
    ///   - type: the model type; its local key sets are what the registry records.
    ///   - name: the collection's name in the store; the type's name when `nil`. Two types may
    ///     share a name only if their key sets agree.
    ///   - timeToLive: how long records live when a put does not say (stored to the millisecond); `nil` for forever.
    ///   - capacity: the most records and/or bytes the collection keeps, recorded in the store for
    ///     every process that writes it (a write that passes it evicts, see ``Capacity``); `nil`
    ///     keeps what the store records, ``Capacity/unbounded`` removes it.
    ///   - freshness: how read-through (``HoardCollection/get(_:timeouts:orFetch:)``) serves records past
    ///     their expiry; by default it does not.
    ///   - migration: whether records read in an older version are rewritten in the current one
    ///     lazily (in the collection's next write) or left as they are.
    public func collection<Model>(
        _ type: Model.Type, named name: String? = nil, timeToLive: Duration? = nil, capacity: Capacity? = nil,
        freshness: Freshness = Freshness(), migration: MigrationPolicy = .never
    ) throws -> HoardCollection<Model> {
        let name = name ?? String(describing: Model.self)
        return try storageErrors {
            let collection = try HoardCollection<Model>(
                store: self, name: name, state: state(of: name), timeToLive: timeToLive, freshness: freshness,
                migration: migration)
            try collection.applyCapacity(capacity)
            return collection
        }
    }

    /// The state of collection `name` if a handle of it was opened in this process.
    func existingState(of name: String) -> CollectionState? {
        collectionStates.withLock { $0[name] }
    }

    /// The state the handles of collection `name` share, made at its first open.
    func state(of name: String) -> CollectionState {
        collectionStates.withLock { states in
            if let state = states[name] { return state }
            let state = CollectionState(
                name: name, metrics: CollectionMetrics(collection: name, factory: options.metrics))
            states[name] = state
            return state
        }
    }

    /// Runs `body` in a read transaction: a consistent snapshot of every collection.
    ///
    /// - Throws: what `body` throws, or ``HoardError/storage(_:)`` (no free reader slot, say).
    public func read<R>(_ body: (borrowing ReadTransaction) throws -> R) throws -> R {
        try readLMDB { txn in try body(ReadTransaction(txn)) }
    }

    /// Runs `body` in one write transaction over any collections: all of it is stored, or nothing.
    ///
    /// `body` may run more than once: when the store's map must grow, the transaction is undone,
    /// the map grown, and `body` run again from the start. Keep side effects out of it.
    ///
    /// - Throws: what `body` throws (then nothing of it is stored), or ``HoardError/storage(_:)``
    ///   (``StorageFailure/Kind/mapFull`` when the map is at ``Options/maxMapSize``).
    public func write<R>(_ body: (borrowing WriteTransaction) throws -> R) throws -> R {
        try writeLMDB { txn in try body(WriteTransaction(txn)) }
    }

    /// Flushes every commit made so far to disk, whatever the durability: what a store opened with
    /// ``Durability/riskStoreOnOSCrash`` (whose commits are not flushed as they return) calls to
    /// make them survive an operating-system crash.
    ///
    /// - Throws: ``HoardError/storage(_:)`` when the flush fails.
    public func sync() throws { try storageErrors { try environment.sync(force: true) } }

    /// Closes the store: the async writes already made commit, the reads and writes under way
    /// end, then the files are closed (what was committed flushed, in every durability mode), and
    /// the path can be opened again in this process at once. Every subscriber's sequence of
    /// changes ends. A later use of this store, or of a collection opened from it, throws
    /// ``HoardError/storage(_:)`` ``StorageFailure/Kind/closed``; a second close does nothing.
    ///
    /// Without it, a store closes when the last reference to it goes. Call it where a path must be
    /// free again: a service's shutdown, a test that opens the same path next. Closing from inside
    /// one of the store's transactions (or an async write's body) traps: it would wait for itself.
    public func close() {
        dispatchPrecondition(condition: .notOnQueue(writerQueue))
        // The writes queued before the close: the writer's drain, scheduled with them, runs first.
        writerQueue.sync {}
        observation.close(store: self)
        environment.close()
    }
}
