internal import CLMDB
import Synchronization

#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

/// An open LMDB environment: one memory-mapped file holding named databases.
///
/// ```swift
/// let env = try Environment(path: "/var/cache/myservice/store")
/// let users = try env.openDatabase("users", create: true)
/// try env.write { txn in
///     try txn.put(Array("Ada".utf8), forKey: Array("u1".utf8), in: users)
/// }
/// let name = try env.read { txn in try txn.value(forKey: Array("u1".utf8), in: users) }
/// ```
///
/// An environment is safe to share between threads and tasks. Transactions are scoped closures
/// (``read(_:)`` and ``write(_:)``); a write that fills the map grows it and runs its closure again,
/// so users never see `MDB_MAP_FULL` unless they set ``Options/maxMapSize``.
///
/// One environment per file per process: LMDB's locks are per process, so opening the same
/// environment twice would break them. A second open throws ``LMDBError/Kind/alreadyOpen``
/// until the first `Environment` is released. The file is closed when the last reference goes.
///
/// ## Topics
/// - ``Options``
/// - ``Durability``
/// - ``read(_:)``
/// - ``write(_:)``
/// - ``openDatabase(_:create:)``
public final class Environment: @unchecked Sendable {
    // @unchecked: MDB_env is safe to use from many threads with MDB_NOTLS; the Swift-side mutable
    // state lives in `gate` (its own lock) and `databases` (a Mutex).

    /// How much a commit may lose if the operating system crashes or the power fails.
    ///
    /// A process crash (`kill -9`) loses no returned commit in any mode: the data is already in the
    /// operating system's page cache. The modes differ only for a system crash or power loss.
    public enum Durability: Sendable, Hashable {
        /// Every returned commit is on disk (data and meta page fsynced). The default.
        case durable
        /// `MDB_NOMETASYNC`: the meta page is not fsynced, so a system crash may roll back the last
        /// commit(s); the store stays consistent.
        case riskLastCommitOnOSCrash
        /// `MDB_NOSYNC`: nothing is fsynced. A system crash may lose recent commits and, on a file
        /// system that reorders writes, damage the store. Call ``Environment/sync(force:)`` to flush.
        case riskStoreOnOSCrash
    }

    /// Where the environment's files live.
    public enum Layout: Sendable, Hashable {
        /// `path` is a directory holding `data.mdb` and `lock.mdb`. The default.
        case directory
        /// `path` is the data file itself; the lock file is `path-lock` (`MDB_NOSUBDIR`).
        case singleFile
    }

    /// How to open an environment.
    public struct Options: Sendable, Hashable {
        /// The initial map size in bytes; the map grows from here (doubling) when a write fills it.
        public var mapSize: Int
        /// The largest the map may grow to; `nil` means no cap. A write that needs more fails with ``LMDBError/Kind/mapFull``.
        public var maxMapSize: Int?
        /// The maximum number of named databases.
        public var maxDatabases: Int
        /// The maximum number of concurrent read transactions across all processes.
        public var maxReaders: Int
        /// Open read-only (`MDB_RDONLY`): nothing is created, writes are refused.
        public var readOnly: Bool
        /// The permission bits of files created for a new environment. Directories get 0700.
        public var fileMode: UInt16
        /// What a commit may lose on a system crash.
        public var durability: Durability
        /// Directory or single-file layout.
        public var layout: Layout

        /// Options with these values; each parameter is the property of the same name.
        public init(
            mapSize: Int = 16 << 20,
            maxMapSize: Int? = nil,
            maxDatabases: Int = 64,
            maxReaders: Int = 126,
            readOnly: Bool = false,
            fileMode: UInt16 = 0o600,
            durability: Durability = .durable,
            layout: Layout = .directory
        ) {
            self.mapSize = mapSize
            self.maxMapSize = maxMapSize
            self.maxDatabases = maxDatabases
            self.maxReaders = maxReaders
            self.readOnly = readOnly
            self.fileMode = fileMode
            self.durability = durability
            self.layout = layout
        }
    }

    let handle: OpaquePointer
    /// The path the environment was opened with.
    public let path: String
    /// The options it was opened with.
    public let options: Options
    /// The longest key the environment accepts, in bytes (511 with the default build of liblmdb).
    public let maxKeySize: Int
    /// The path of the data file.
    public let dataFilePath: String
    /// Whether this open created the environment.
    public let wasCreated: Bool
    /// Whether this open found a data file whose creation was cut short (at most two pages that
    /// LMDB refuses: its first write torn by a power cut) and created the environment anew.
    public let recoveredUnfinishedCreation: Bool

    let gate = TransactionGate()
    let identity: FileIdentity
    /// Named databases opened so far; `mdb_dbi_open` must not run concurrently in one process.
    let databases = Mutex<[String: Database]>([:])
    /// Serializes transactions that open databases, as lmdb.h requires.
    let databaseOpenLock = Lock()
    /// How the keys of some databases read in error messages, by `dbi` (``describeKeys(of:with:)``).
    let keyDescribers = Mutex<[UInt32: @Sendable (UnsafeRawBufferPointer) -> String]>([:])
    /// Told about write transactions (``setCommitListener(_:everyCommit:)``); the flag spares a writer the lock when none is set.
    let commitListener = Mutex<(any CommitListener)?>(nil)
    let hasCommitListener = Atomic<Bool>(false)
    /// Whether the listener hears of every write transaction, or only of those that kept a
    /// local object (``setCommitListener(_:everyCommit:)``).
    let listenerHearsEveryCommit = Atomic<Bool>(true)
    /// This process's write transactions, noted while it is on (for a watch of the data file).
    package let ownCommits = OwnCommitLedger()

    /// Environments open in this process, by data-file identity.
    private static let registry = Mutex<Set<FileIdentity>>([])

    /// Opens the environment at `path`, creating it when missing unless ``Options/readOnly``.
    ///
    /// A new store directory is created with mode 0700 and its files with ``Options/fileMode``;
    /// the new entries are fsynced so that a fresh store survives a power loss. A data file that
    /// a power cut left with the torn first write of a new environment (at most two pages, which
    /// LMDB refuses) is created anew; see ``recoveredUnfinishedCreation``. Reader slots left by
    /// crashed processes are cleared (`mdb_reader_check`).
    ///
    /// - Throws: ``LMDBError`` — ``LMDBError/Kind/notADirectory``, ``LMDBError/Kind/permissionDenied``,
    ///   ``LMDBError/Kind/noSuchFile`` (read-only and missing), ``LMDBError/Kind/invalid`` (not an LMDB file),
    ///   ``LMDBError/Kind/versionMismatch``, ``LMDBError/Kind/alreadyOpen``.
    ///
    /// The corresponding C functions are `mdb_env_create` and `mdb_env_open`.
    public init(path: String, options: Options = Options()) throws(LMDBError) {
        precondition(!path.isEmpty, "LMDB: an environment path must not be empty")
        self.path = path
        self.options = options
        let (dataPath, lockPath, directory): (String, String, String)
        switch options.layout {
        case .directory:
            (dataPath, lockPath, directory) = (path + "/data.mdb", path + "/lock.mdb", path)
        case .singleFile:
            (dataPath, lockPath, directory) = (path, path + "-lock", FileSystem.parent(of: path))
        }
        dataFilePath = dataPath

        var created = false
        var recoveredCreation = false
        if options.readOnly {
            guard try FileSystem.status(directory) != nil else {
                throw LMDBError(.noSuchFile, operation: "open", context: "\(directory) does not exist", code: ENOENT)
            }
            if options.layout == .directory, let st = try FileSystem.status(path), !FileSystem.isDirectory(st) {
                throw LMDBError(.notADirectory, operation: "open", context: "\(path) is not a directory", code: ENOTDIR)
            }
            guard try FileSystem.status(dataPath) != nil else {
                throw LMDBError(
                    .noSuchFile, operation: "open", context: "no LMDB environment at \(path) (\(dataPath) is missing)",
                    code: ENOENT)
            }
        } else {
            try FileSystem.makeDirectories(directory, mode: 0o700)
            // An empty data file is what LMDB treats as a new environment; creating it here gives the
            // store a file identity before LMDB opens it, so the registry check below cannot race.
            created = try FileSystem.createFileIfMissing(dataPath, mode: mode_t(options.fileMode))
        }
        guard let id = FileIdentity(path: dataPath) else {
            throw LMDBError(code: errno, operation: "stat", context: dataPath)
        }
        identity = id

        var openFlags = flags(MDB_NOTLS)
        switch options.durability {
        case .durable: break
        case .riskLastCommitOnOSCrash: openFlags |= flags(MDB_NOMETASYNC)
        case .riskStoreOnOSCrash: openFlags |= flags(MDB_NOSYNC)
        }
        if options.layout == .singleFile { openFlags |= flags(MDB_NOSUBDIR) }
        if options.readOnly { openFlags |= flags(MDB_RDONLY) }
        let env = try Self.registry.withLock { (open: inout Set<FileIdentity>) throws(LMDBError) -> OpaquePointer in
            guard !open.contains(id) else {
                throw LMDBError(
                    .alreadyOpen, operation: "open",
                    context: "\(path) is already open in this process; share that Environment")
            }
            var (env, rc) = try Self.openHandle(path, options: options, flags: openFlags)
            if rc == MDB_INVALID && !options.readOnly {
                // A power cut while LMDB wrote the first two pages of a new file (before the
                // creating open synced them) leaves meta pages that every later open refuses, and
                // a store that could never open again. A file of at most two pages holds no commit,
                // so it is made empty, which LMDB treats as a new environment. Under LMDB's setup
                // lock, so that no other process is creating or using it meanwhile.
                mdb_env_close(env)
                _ = try FileSystem.withSetupLock(lockPath) { () throws(LMDBError) in
                    guard FileSystem.isUnfinishedCreation(dataPath) else { return }
                    try FileSystem.truncateToEmpty(dataPath)
                    created = true
                    recoveredCreation = true
                }
                (env, rc) = try Self.openHandle(path, options: options, flags: openFlags)
            }
            guard rc == 0 else {
                mdb_env_close(env)
                if rc == MDB_INVALID {
                    throw LMDBError(
                        code: rc, operation: "mdb_env_open",
                        context:
                            "\(dataPath) is not an LMDB data file, or its meta pages are damaged; move it aside to start a new store there, or restore a copy"
                    )
                }
                throw LMDBError(code: rc, operation: "mdb_env_open", context: path)
            }
            open.insert(id)
            return env
        }
        handle = env
        wasCreated = created
        recoveredUnfinishedCreation = recoveredCreation
        maxKeySize = Int(mdb_env_get_maxkeysize(env))

        var identities: Set<FileIdentity> = [id]
        if let lock = FileIdentity(path: lockPath) { identities.insert(lock) }
        FileSystem.setCloseOnExec(forFilesMatching: identities)

        var stale: Int32 = 0
        _ = mdb_reader_check(env, &stale)
        if created {
            // A fresh store is durable before the first write returns: flush LMDB's initial meta
            // pages and the directory entries that name the files.
            _ = mdb_env_sync(env, 1)
            try? FileSystem.syncDirectory(directory)
        }
    }

    /// Creates an LMDB handle with the options and opens it; the caller closes it when the open fails.
    private static func openHandle(
        _ path: String, options: Options, flags openFlags: UInt32
    ) throws(LMDBError) -> (OpaquePointer, Int32) {
        var env: OpaquePointer?
        try check(mdb_env_create(&env), "mdb_env_create")
        guard let env else { throw LMDBError(.system, operation: "mdb_env_create", context: "no environment returned") }
        do {
            // A cap below the initial size is the size: the map never exceeds its cap.
            let size = min(options.mapSize, options.maxMapSize ?? .max)
            try check(mdb_env_set_mapsize(env, size), "mdb_env_set_mapsize", path)
            try check(mdb_env_set_maxreaders(env, UInt32(clamping: options.maxReaders)), "mdb_env_set_maxreaders", path)
            try check(mdb_env_set_maxdbs(env, UInt32(clamping: options.maxDatabases)), "mdb_env_set_maxdbs", path)
        } catch {
            mdb_env_close(env)
            throw error
        }
        return (env, mdb_env_open(env, path, openFlags, mode_t(options.fileMode)))
    }

    /// Closes the environment once every transaction open in this process has ended: what was
    /// committed is flushed (in every durability mode), the files are closed, and the path may be
    /// opened again in this process at once. Every later use of this environment throws
    /// ``LMDBError/Kind/closed``; a second close does nothing. Without it, the environment closes
    /// when its last reference goes.
    ///
    /// Closing from a thread that holds one of the environment's transactions is a programmer
    /// error (the close would wait for itself) and traps.
    ///
    /// The corresponding C function is `mdb_env_close`.
    public func close() {
        let closed = gate.close { closeHandle() }
        precondition(closed, "LMDB: close() called inside a transaction of the environment at \(path)")
    }

    /// The error of a use after ``close()``.
    func closedError(_ operation: String) -> LMDBError {
        LMDBError(.closed, operation: operation, context: "the environment at \(path) was closed")
    }

    /// Runs `body` with the C handle, which stays open for the call (outside a transaction: a
    /// statistic, a copy, a sync).
    func withHandle<R>(_ operation: String, _ body: (OpaquePointer) throws(LMDBError) -> R) throws(LMDBError) -> R {
        guard gate.enter(writing: false) else { throw closedError(operation) }
        defer { gate.leave(writing: false) }
        return try body(handle)
    }

    private func closeHandle() {
        if !options.readOnly && options.durability != .durable {
            // A clean close loses nothing in any mode: the commits whose flush the mode skipped
            // (the last meta page with `.riskLastCommitOnOSCrash`) are flushed now.
            mdb_env_sync(handle, 1)
        }
        // Closed under the registry's lock: once the data file's descriptor is closed, its inode
        // may name another environment's new file (its path deleted while this one was open), and
        // that open must not find the inode still registered here.
        let (handle, id) = (self.handle, identity)
        Self.registry.withLock { open in
            mdb_env_close(handle)
            _ = open.remove(id)
        }
    }

    deinit {
        if !gate.isClosed { closeHandle() }
    }
}
