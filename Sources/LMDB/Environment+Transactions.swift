internal import CLMDB

#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

/// What a write transaction learned while it ran.
@usableFromInline
final class WriteState {
    /// A put or delete inside the closure hit `MDB_MAP_FULL`; LMDB has poisoned the transaction.
    var mapFull = false
    /// Bytes of keys and values put so far (``Transaction/bytesWritten``).
    var bytesWritten = 0
    /// What layers above keep for the length of this transaction (``Transaction/local(_:make:)``):
    /// one or two objects, the first held inline and any other in order (a dictionary's hashing
    /// and storage, or an array's, cost a small write more than the rest of keeping one).
    /// Unchecked: a write transaction's state is used on its own thread only, and the runtime's
    /// checks of exclusive access cost as much as the lookup.
    @exclusivity(unchecked) private var firstLocal: (key: ObjectIdentifier, object: AnyObject)?
    @exclusivity(unchecked) private var otherLocals: [(key: ObjectIdentifier, object: AnyObject)] = []

    /// The object kept under `key`, if any.
    @usableFromInline
    func local(_ key: ObjectIdentifier) -> AnyObject? {
        if let firstLocal, firstLocal.key == key { return firstLocal.object }
        for entry in otherLocals where entry.key == key { return entry.object }
        return nil
    }

    /// Keeps `object` under `key` (which holds nothing yet).
    @usableFromInline
    func keep(_ object: AnyObject, as key: ObjectIdentifier) {
        if firstLocal == nil { firstLocal = (key, object) } else { otherLocals.append((key, object)) }
    }

    /// Whether an object is kept.
    var keepsLocals: Bool { firstLocal != nil }

    /// Every object kept.
    var locals: [AnyObject] {
        (firstLocal.map { [$0.object] } ?? []) + otherLocals.map(\.object)
    }
    /// What runs once this transaction has committed (``Transaction/onCommit(_:)``).
    var afterCommit: [() -> Void] = []
    /// The cursor ``Transaction/withKeptCursor(in:_:)`` keeps open: the transaction (this one or
    /// one nested in it) and database it belongs to. LMDB closes it when that transaction ends.
    var keptCursor: (txn: OpaquePointer, dbi: MDB_dbi, cursor: OpaquePointer)?
}

extension Environment {
    /// Runs `body` in a read-only transaction: a consistent snapshot of every database.
    ///
    /// The snapshot stays the same while other threads or processes commit. Values read inside
    /// are valid only until `body` returns; copy what you keep. Keep read transactions short: a
    /// long one stops LMDB from reusing pages freed by later writes. A read transaction never
    /// blocks a writer, and it may be opened on a thread that is inside a write.
    ///
    /// - Returns: what `body` returns.
    /// - Throws: ``LMDBError`` if the transaction cannot begin, or what `body` throws.
    ///
    /// The corresponding C functions are `mdb_txn_begin` (with `MDB_RDONLY`) and `mdb_txn_abort`.
    public func read<R>(_ body: (borrowing ReadTransaction) throws -> R) throws -> R {
        let txn = try begin(writing: false)
        defer {
            mdb_txn_abort(txn)
            gate.leave(writing: false)
        }
        return try body(ReadTransaction(handle: txn, environment: self, state: nil))
    }

    /// Runs `body` in a write transaction that commits when `body` returns and aborts when it throws.
    ///
    /// Writers are serialized, across threads and processes; readers never wait for them.
    ///
    /// **`body` may run more than once.** When the map fills up, LMDB poisons the transaction; the
    /// environment then aborts it, grows the map (doubling, up to ``Options/maxMapSize``) and runs
    /// `body` again from the start on a fresh transaction. Keep side effects outside of `body`, or
    /// make them idempotent. With a cap that is reached, the write fails with ``LMDBError/Kind/mapFull``
    /// and nothing of it is stored.
    ///
    /// A thread may not start a write while it is inside another write of the same environment
    /// (LMDB's writer lock is not recursive): that traps. Do not call it from Swift's cooperative
    /// thread pool where waiting for another process's write lock would block it; hand it to a
    /// thread of your own.
    ///
    /// - Returns: what `body` returns.
    /// - Throws: ``LMDBError`` (the commit failed; nothing was stored), or what `body` throws (nothing was stored).
    ///
    /// The corresponding C functions are `mdb_txn_begin`, `mdb_txn_commit` and `mdb_txn_abort`.
    public func write<R>(_ body: (borrowing WriteTransaction) throws -> R) throws -> R {
        try writeRetryingOnMapFull(afterEachAttempt: {}) { txn, state in
            try body(WriteTransaction(handle: txn, environment: self, state: state))
        }
    }

    /// The write loop: begin, run, commit; on `MDB_MAP_FULL` abort, grow and run again.
    func writeRetryingOnMapFull<R>(
        afterEachAttempt: () -> Void,
        _ body: (OpaquePointer, WriteState) throws -> R
    ) throws -> R {
        guard !options.readOnly else {
            throw LMDBError(
                .permissionDenied, operation: "write", context: "\(path) was opened read-only", code: EACCES)
        }
        while true {
            let txn = try begin(writing: true)
            // The map's size as this attempt runs with it, read while the transaction holds the
            // gate (no resize or close can overlap it, and no lock of the gate's is taken again).
            var mapInfo = MDB_envinfo()
            mdb_env_info(handle, &mapInfo)
            let sizeAtStart = mapInfo.me_mapsize
            let state = WriteState()
            let id = mdb_txn_id(txn)
            // The listener as it is when the body has run (not when the transaction began): one set
            // while a body runs hears about the writes that body made after it was set.
            var listener: (any CommitListener)?
            // Whether the listener was told this transaction is about to commit.
            var announced = false
            let result: R
            do {
                result = try body(txn, state)
                if state.keepsLocals || listenerHearsEveryCommit.load(ordering: .acquiring) {
                    listener = currentCommitListener
                }
                if let listener, !state.mapFull {
                    announced = true
                    try listener.willCommit(WriteTransaction(handle: txn, environment: self, state: state))
                }
            } catch {
                mdb_txn_abort(txn)
                gate.leave(writing: true)
                if announced { listener?.didNotCommit(transaction: id, local: { state.local($0) }) }
                afterEachAttempt()
                if state.mapFull {
                    try growMap(from: sizeAtStart)
                    continue
                }
                throw error
            }
            if state.mapFull {
                // The closure swallowed the MAP_FULL error; the transaction is poisoned all the same.
                mdb_txn_abort(txn)
                gate.leave(writing: true)
                afterEachAttempt()
                try growMap(from: sizeAtStart)
                continue
            }
            // Noted under the writer lock, so in the order of the commits.
            let noted = ownCommits.begin(id)
            let rc = mdb_txn_commit(txn)  // frees the transaction whatever the outcome
            gate.leave(writing: true)
            if noted { ownCommits.settle(id, committed: rc == 0) }
            if rc != 0, announced { listener?.didNotCommit(transaction: id, local: { state.local($0) }) }
            afterEachAttempt()
            if rc == MDB_MAP_FULL {
                try growMap(from: sizeAtStart)
                continue
            }
            try check(rc, "mdb_txn_commit", path)
            listener?.didCommit(transaction: id, local: { state.local($0) })
            for action in state.afterCommit { action() }
            return result
        }
    }

    /// Begins a transaction and registers it with the gate; adopts a map grown by another
    /// process and clears stale reader slots when LMDB asks for it.
    func begin(writing: Bool) throws(LMDBError) -> OpaquePointer {
        var clearedReaders = false
        while true {
            guard gate.enter(writing: writing) else { throw closedError("mdb_txn_begin") }
            var txn: OpaquePointer?
            let rc = mdb_txn_begin(handle, nil, writing ? 0 : flags(MDB_RDONLY), &txn)
            if rc == 0, let txn { return txn }
            gate.leave(writing: writing)
            switch rc {
            case MDB_MAP_RESIZED:
                try adoptMapGrownElsewhere()
            case MDB_READERS_FULL where !clearedReaders:
                clearedReaders = true
                _ = try? clearStaleReaders()
            case MDB_READERS_FULL:
                throw LMDBError(
                    code: rc, operation: "mdb_txn_begin",
                    context:
                        "\(path): all \(options.maxReaders) reader slots are in use; raise Options.maxReaders or shorten read transactions"
                )
            default:
                throw LMDBError(code: rc, operation: "mdb_txn_begin", context: path)
            }
        }
    }
}

// MARK: - Named databases

extension Environment {
    /// Opens a named database, creating it when `create` is true.
    ///
    /// Handles are cached: opening the same name again returns the same ``Database`` at no cost.
    /// Open databases before the transactions that use them; creating one runs (and commits) a
    /// write transaction of its own.
    ///
    /// - Parameters:
    ///   - name: the database's name, or `nil` for the unnamed main database (which also lists the
    ///     named ones: do not mix the two uses).
    ///   - create: create the database when it does not exist.
    /// - Throws: ``LMDBError/Kind/notFound`` when it does not exist and `create` is false;
    ///   ``LMDBError/Kind/databasesFull`` past ``Options/maxDatabases``.
    ///
    /// The corresponding C function is `mdb_dbi_open`.
    public func openDatabase(_ name: String?, create: Bool = false) throws -> Database {
        try openDatabase(name, create: create, initialize: nil)
    }

    /// Opens a named database, creating it when it does not exist, and runs `initialize` in the
    /// same write transaction: no reader, and no process killed at any moment, ever sees the
    /// database without what `initialize` writes (creating it and filling it in two
    /// transactions would leave it empty after a kill between them). When this process has the
    /// database open already, it is returned as it is; otherwise `initialize` runs whether or not
    /// the database existed, so make it idempotent. If it throws, nothing is created.
    /// `initialize` must not open databases itself (LMDB lets one transaction at a time open
    /// them, and this one holds that turn). In a read-only environment the database is only
    /// opened, as ``openDatabase(_:create:)`` would.
    ///
    /// - Throws: what ``openDatabase(_:create:)`` throws, or what `initialize` throws.
    public func createDatabase(
        _ name: String, initialize: (borrowing WriteTransaction, Database) throws -> Void
    ) throws -> Database {
        // (An optional closure parameter counts as escaping; this one is called only inside.)
        try withoutActuallyEscaping(initialize) { try openDatabase(name, create: true, initialize: $0) }
    }

    private func openDatabase(
        _ name: String?, create: Bool, initialize: ((borrowing WriteTransaction, Database) throws -> Void)?
    ) throws -> Database {
        let key = name ?? ""
        if let cached = databases.withLock({ $0[key] }) { return cached }

        // lmdb.h: a transaction that opens a database must end before another transaction in the
        // process may open one. The lock is taken only once the transaction has begun, so nobody
        // waits for it while also waiting for LMDB's writer lock or for a map resize.
        var holding = false
        let release = {
            if holding {
                self.databaseOpenLock.unlock()
                holding = false
            }
        }
        defer { release() }
        func openInside(_ txn: OpaquePointer) throws(LMDBError) -> Database {
            databaseOpenLock.lock()
            holding = true
            var dbi = MDB_dbi()
            let rc = mdb_dbi_open(txn, name, create ? flags(MDB_CREATE) : 0, &dbi)
            if rc == MDB_NOTFOUND {
                throw LMDBError(code: rc, operation: "mdb_dbi_open", context: "no database named '\(key)' in \(path)")
            }
            try check(rc, "mdb_dbi_open", "database '\(key)' in \(path)")
            return Database(dbi: dbi, name: name, environmentID: ObjectIdentifier(self))
        }

        let database: Database
        if create && !options.readOnly {
            database = try writeRetryingOnMapFull(afterEachAttempt: release) { txn, state in
                let database = try openInside(txn)
                try initialize?(WriteTransaction(handle: txn, environment: self, state: state), database)
                return database
            }
        } else {
            let txn = try begin(writing: false)
            do {
                database = try openInside(txn)
            } catch {
                mdb_txn_abort(txn)
                gate.leave(writing: false)
                throw error
            }
            // A read transaction must commit (not abort) for the handle to outlive it.
            let rc = mdb_txn_commit(txn)
            gate.leave(writing: false)
            try check(rc, "mdb_txn_commit", path)
        }
        release()
        databases.withLock { $0[key] = database }
        return database
    }

    /// Forgets a cached handle after `mdb_drop` closed it.
    func forgetDatabase(_ database: Database) {
        databases.withLock { cache in
            cache = cache.filter { $0.value.dbi != database.dbi }
        }
    }
}
