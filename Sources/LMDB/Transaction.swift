internal import CLMDB
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// What a transaction may do; the two kinds are ``ReadOnlyAccess`` and ``ReadWriteAccess``.
public protocol TransactionAccess: Sendable {}
/// The access of a ``ReadTransaction``: reads only.
public enum ReadOnlyAccess: TransactionAccess {}
/// The access of a ``WriteTransaction``: reads and writes.
public enum ReadWriteAccess: TransactionAccess {}

/// A read-only snapshot, handed to the closure of ``Environment/read(_:)``.
public typealias ReadTransaction = Transaction<ReadOnlyAccess>
/// A write transaction, handed to the closure of ``Environment/write(_:)``.
public typealias WriteTransaction = Transaction<ReadWriteAccess>

/// An LMDB transaction, valid only during the closure it is handed to.
///
/// It is non-copyable and borrowed by the closure, so it cannot be stored or returned: the
/// compiler enforces what LMDB requires. Values it hands out (`UnsafeRawBufferPointer`s) point into
/// the memory map and are valid until the transaction ends (for a write: until the next change to
/// that database); copy what you keep.
///
/// Code that only reads can take either kind: `func load<A>(_ txn: borrowing Transaction<A>)`.
public struct Transaction<Access: TransactionAccess>: ~Copyable {
    @usableFromInline let handle: OpaquePointer
    @usableFromInline unowned(unsafe) let environment: Environment
    @usableFromInline let state: WriteState?

    @usableFromInline
    init(handle: OpaquePointer, environment: Environment, state: WriteState?) {
        self.handle = handle
        self.environment = environment
        self.state = state
    }

    /// This transaction under another access, for a layer that wraps transactions in types of its
    /// own and knows which kind it holds: the same LMDB transaction, valid while this one is.
    @inlinable
    package func viewed<Other>(as _: Other.Type = Other.self) -> Transaction<Other> {
        Transaction<Other>(handle: handle, environment: environment, state: state)
    }
}

// MARK: - Reading

extension Transaction {
    /// Hands the value stored under `key` to `body` without copying it.
    ///
    /// - Returns: what `body` returns, or `nil` when the key is absent.
    /// - Throws: ``LMDBError/Kind/badKey`` for an empty or too-long key, or what `body` throws.
    ///
    /// The corresponding C function is `mdb_get`.
    @inlinable
    public func withValue<R>(
        forKey key: some ContiguousBytes,
        in database: Database,
        _ body: (UnsafeRawBufferPointer) throws -> R
    ) throws -> R? {
        guard let value = try key.withUnsafeBytes({ try _get($0, database) }) else { return nil }
        return try body(value)
    }

    /// A copy of the value stored under `key`, or `nil` when it is absent.
    ///
    /// The corresponding C function is `mdb_get`.
    ///
    /// - Throws: ``LMDBError`` when LMDB fails.
    @inlinable
    public func value(forKey key: some ContiguousBytes, in database: Database) throws -> [UInt8]? {
        try withValue(forKey: key, in: database) { Array($0) }
    }

    /// Whether `key` is stored in `database`.
    ///
    /// - Throws: ``LMDBError`` when LMDB fails.
    @inlinable
    public func contains(_ key: some ContiguousBytes, in database: Database) throws -> Bool {
        try key.withUnsafeBytes { try _get($0, database) } != nil
    }

    @usableFromInline
    func _get(_ key: UnsafeRawBufferPointer, _ database: Database) throws(LMDBError) -> UnsafeRawBufferPointer? {
        try environment.validate(key: key, database: database, "mdb_get")
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val()
        let rc = mdb_get(handle, database.dbi, &k, &v)
        if rc == MDB_NOTFOUND { return nil }
        try check(rc, "mdb_get", environment.describe(key: key, in: database))
        return UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size)
    }

    /// The number of entries in `database`, read from its B-tree header (no scan).
    ///
    /// The corresponding C function is `mdb_stat`.
    ///
    /// - Throws: ``LMDBError`` when LMDB fails.
    public func count(in database: Database) throws(LMDBError) -> Int {
        try statistics(of: database).entries
    }

    /// Page statistics of `database` as this transaction sees it.
    ///
    /// The corresponding C function is `mdb_stat`.
    ///
    /// - Throws: ``LMDBError`` when LMDB fails.
    public func statistics(of database: Database) throws(LMDBError) -> Environment.Statistics {
        environment.checkOwnership(database)
        var s = MDB_stat()
        try check(
            mdb_stat(handle, database.dbi, &s), "mdb_stat", "database \(database.displayName) in \(environment.path)")
        return Environment.Statistics(s)
    }

    /// The id of this transaction (for a read: of the snapshot it sees).
    ///
    /// The corresponding C function is `mdb_txn_id`.
    public var id: Int { mdb_txn_id(handle) }

    /// Runs `body` with a cursor over `database`; the cursor is closed when `body` returns.
    ///
    /// The corresponding C functions are `mdb_cursor_open` and `mdb_cursor_close`.
    ///
    /// - Throws: what `body` throws, or ``LMDBError`` when LMDB fails.
    public func withCursor<R>(in database: Database, _ body: (borrowing Cursor<Access>) throws -> R) throws -> R {
        let cursor = try openCursor(in: database)
        defer { mdb_cursor_close(cursor) }
        return try body(Cursor(handle: cursor, environment: environment, database: database, state: state))
    }

    /// A new cursor over `database`, which must be of this environment.
    func openCursor(in database: Database) throws(LMDBError) -> OpaquePointer {
        environment.checkOwnership(database)
        var cursor: OpaquePointer?
        try check(
            mdb_cursor_open(handle, database.dbi, &cursor), "mdb_cursor_open",
            "database \(database.displayName) in \(environment.path)")
        guard let cursor else {
            throw LMDBError(.badState, operation: "mdb_cursor_open", context: "no cursor returned")
        }
        return cursor
    }

    /// Calls `body` for each entry of `range`, in key order or (with `reverse`) backwards,
    /// until `body` returns ``IterationStep/stop``.
    ///
    /// The buffers are valid only during the call of `body` for that entry.
    ///
    /// - Throws: what `body` throws, or ``LMDBError`` when LMDB fails.
    public func forEach(
        in database: Database,
        range: KeyRange = .all,
        reverse: Bool = false,
        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> IterationStep
    ) throws {
        try withCursor(in: database) { cursor in
            var entry = reverse ? try cursor.positionAtEnd(of: range) : try cursor.positionAtStart(of: range)
            while let current = entry {
                guard reverse ? range.isAboveLower(current.key) : range.isBelowUpper(current.key) else { return }
                if try body(current.key, current.value) == .stop { return }
                entry = reverse ? try cursor.previous() : try cursor.next()
            }
        }
    }

    /// Copies of the entries of `range`, at most `limit` of them.
    ///
    /// - Throws: ``LMDBError`` when LMDB fails.
    public func entries(
        in database: Database,
        range: KeyRange = .all,
        reverse: Bool = false,
        limit: Int = .max
    ) throws -> [(key: [UInt8], value: [UInt8])] {
        var result: [(key: [UInt8], value: [UInt8])] = []
        guard limit > 0 else { return result }
        try forEach(in: database, range: range, reverse: reverse) { key, value in
            result.append((Array(key), Array(value)))
            return result.count < limit ? .next : .stop
        }
        return result
    }
}

// MARK: - Writing

extension Transaction where Access == ReadWriteAccess {
    /// The bytes of keys and values this transaction has put so far (nested transactions
    /// included, undone ones too): what a caller batching writes into one transaction bounds.
    public var bytesWritten: Int { state?.bytesWritten ?? 0 }

    /// Stores `value` under `key`, replacing any value unless `options` say otherwise.
    ///
    /// - Throws: ``LMDBError/Kind/keyExists`` with ``PutOptions/noOverwrite`` (key present) or
    ///   ``PutOptions/append`` (key out of order); ``LMDBError/Kind/badKey``.
    ///
    /// The corresponding C function is `mdb_put`.
    @inlinable
    public func put(
        _ value: some ContiguousBytes,
        forKey key: some ContiguousBytes,
        in database: Database,
        options: PutOptions = []
    ) throws {
        try key.withUnsafeBytes { key in
            try value.withUnsafeBytes { value in
                try _put(key, value, database, options)
            }
        }
    }

    @usableFromInline
    func _put(
        _ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, _ database: Database, _ options: PutOptions
    ) throws(LMDBError) {
        try environment.validate(key: key, database: database, "mdb_put")
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val(mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress))
        try finishWrite(
            mdb_put(handle, database.dbi, &k, &v, Self.lmdbFlags(options)), "mdb_put", key, database, options)
        state?.bytesWritten &+= key.count &+ value.count
    }

    /// Reserves `count` bytes under `key` and lets `fill` write the value in place, saving a copy.
    ///
    /// `fill` must write all `count` bytes; the buffer is valid only during the call.
    ///
    /// The corresponding C function is `mdb_put` with `MDB_RESERVE`.
    ///
    /// - Throws: what `fill` throws, or ``LMDBError`` when LMDB fails (``LMDBError/Kind/keyExists`` with
    ///   ``PutOptions/noOverwrite``, ``LMDBError/Kind/mapFull`` when the map is full).
    @inlinable
    public func reserve<R>(
        _ count: Int,
        forKey key: some ContiguousBytes,
        in database: Database,
        options: PutOptions = [],
        _ fill: (UnsafeMutableRawBufferPointer) throws -> R
    ) throws -> R {
        let buffer = try key.withUnsafeBytes { try _reserve(count, $0, database, options) }
        return try fill(buffer)
    }

    @usableFromInline
    func _reserve(
        _ count: Int, _ key: UnsafeRawBufferPointer, _ database: Database, _ options: PutOptions
    ) throws(LMDBError) -> UnsafeMutableRawBufferPointer {
        try environment.validate(key: key, database: database, "mdb_put")
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val(mv_size: count, mv_data: nil)
        try finishWrite(
            mdb_put(handle, database.dbi, &k, &v, Self.lmdbFlags(options) | flags(MDB_RESERVE)), "mdb_put", key,
            database, options)
        state?.bytesWritten &+= key.count &+ count
        return UnsafeMutableRawBufferPointer(start: v.mv_data, count: count)
    }

    /// Runs `body` with a cursor over `database` that this transaction keeps open for the next
    /// call, instead of opening and closing one each time: for a search and a change a call, as
    /// a record's renewal makes. The cursor is positioned wherever the last call left it. LMDB
    /// closes it when the transaction ends.
    ///
    /// The corresponding C function is `mdb_cursor_open`, at the first call for `database`.
    ///
    /// - Throws: what `body` throws, or ``LMDBError`` when LMDB fails.
    public func withKeptCursor<R>(in database: Database, _ body: (borrowing Cursor<Access>) throws -> R) throws -> R {
        guard let state else { return try withCursor(in: database, body) }
        let cursor: OpaquePointer
        if let kept = state.keptCursor, kept.txn == handle, kept.dbi == database.dbi {
            environment.checkOwnership(database)
            cursor = kept.cursor
        } else {
            let opened = try openCursor(in: database)
            // One kept at a time: another of this transaction's is closed; one of the transaction
            // this one is nested in stays open until that one ends (it may not be touched now).
            if let kept = state.keptCursor, kept.txn == handle { mdb_cursor_close(kept.cursor) }
            state.keptCursor = (handle, database.dbi, opened)
            cursor = opened
        }
        return try body(Cursor(handle: cursor, environment: environment, database: database, state: state))
    }

    /// Removes `key` from `database`.
    ///
    /// - Returns: whether the key was there.
    ///
    /// The corresponding C function is `mdb_del`.
    ///
    /// - Throws: ``LMDBError`` when LMDB fails.
    @inlinable
    @discardableResult
    public func delete(_ key: some ContiguousBytes, in database: Database) throws -> Bool {
        try key.withUnsafeBytes { try _delete($0, database) }
    }

    @usableFromInline
    func _delete(_ key: UnsafeRawBufferPointer, _ database: Database) throws(LMDBError) -> Bool {
        try environment.validate(key: key, database: database, "mdb_del")
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        let rc = mdb_del(handle, database.dbi, &k, nil)
        if rc == MDB_NOTFOUND { return false }
        try finishWrite(rc, "mdb_del", key, database, [])
        return true
    }

    /// Removes every entry of `database`, keeping the database.
    ///
    /// The corresponding C function is `mdb_drop` with `del` 0.
    ///
    /// - Throws: ``LMDBError`` when LMDB fails.
    public func clear(_ database: Database) throws(LMDBError) {
        environment.checkOwnership(database)
        try finishWrite(mdb_drop(handle, database.dbi, 0), "mdb_drop", nil, database, [])
    }

    /// Deletes `database` from the environment. Its handle is closed at once (LMDB does so even if
    /// this transaction later aborts); open it again to use the name.
    ///
    /// The corresponding C function is `mdb_drop` with `del` 1.
    ///
    /// - Throws: ``LMDBError`` when LMDB fails.
    public func drop(_ database: Database) throws(LMDBError) {
        environment.checkOwnership(database)
        environment.forgetDatabase(database)
        // The handle may be given to another database in this transaction; the kept cursor must
        // not serve it (LMDB closes the cursor when the transaction ends).
        if state?.keptCursor?.dbi == database.dbi { state?.keptCursor = nil }
        try finishWrite(mdb_drop(handle, database.dbi, 1), "mdb_drop", nil, database, [])
    }

    /// Turns a write's return code into an error, remembering `MDB_MAP_FULL` so that the write
    /// loop grows the map and runs again, whatever the closure does with the error.
    func finishWrite(
        _ rc: Int32, _ operation: StaticString, _ key: UnsafeRawBufferPointer?, _ database: Database,
        _ options: PutOptions
    ) throws(LMDBError) {
        guard rc != 0 else { return }
        if rc == MDB_MAP_FULL { state?.mapFull = true }
        var context =
            key.map { environment.describe(key: $0, in: database) }
            ?? "database \(database.displayName) in \(environment.path)"
        if rc == MDB_KEYEXIST && options.contains(.append) {
            context += "; with .append the key must sort after every stored key"
        }
        throw LMDBError(code: rc, operation: "\(operation)", context: context)
    }

    static func lmdbFlags(_ options: PutOptions) -> UInt32 {
        var result: UInt32 = 0
        if options.contains(.noOverwrite) { result |= flags(MDB_NOOVERWRITE) }
        if options.contains(.append) { result |= flags(MDB_APPEND) }
        return result
    }
}

// MARK: - Checks shared by transactions and cursors

extension Environment {
    @usableFromInline
    func validate(key: UnsafeRawBufferPointer, database: Database, _ operation: StaticString) throws(LMDBError) {
        checkOwnership(database)
        if key.isEmpty || key.count > maxKeySize {
            throw LMDBError(
                .badKey, operation: "\(operation)",
                context: key.isEmpty
                    ? "empty key in database \(database.displayName) of \(path); keys must have 1 to \(maxKeySize) bytes"
                    : "key of \(key.count) bytes in database \(database.displayName) of \(path); keys must have 1 to \(maxKeySize) bytes"
            )
        }
    }

    /// A programmer error: a database handle of another environment.
    @usableFromInline
    func checkOwnership(_ database: Database) {
        precondition(
            database.environmentID == ObjectIdentifier(self),
            "LMDB: database \(database.displayName) belongs to another environment than \(path)"
        )
    }

    /// "key 'abc' in database 'x' of /path": by the database's describer when it has one
    /// (``describeKeys(of:with:)``), else printable keys as text and others as hex, both shortened.
    func describe(key: UnsafeRawBufferPointer, in database: Database) -> String {
        if let describer = keyDescribers.withLock({ $0[database.dbi] }) {
            return "key \(describer(key)) in database \(database.displayName) of \(path)"
        }
        let shown = key.prefix(64)
        let printable = shown.allSatisfy { $0 >= 0x20 && $0 < 0x7F }
        var text =
            printable
            ? "'" + String(decoding: shown, as: UTF8.self) + "'"
            : "0x" + shown.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        if key.count > shown.count { text += "… (\(key.count) bytes)" }
        return "key \(text) in database \(database.displayName) of \(path)"
    }

    /// Names the keys of `database` with `describe` in the context of errors (an `LMDBError`
    /// about a key): for a layer above that knows what its keys encode. Looked up only when an
    /// error is made, so it costs nothing on the paths that succeed.
    public func describeKeys(
        of database: Database, with describe: @escaping @Sendable (UnsafeRawBufferPointer) -> String
    ) {
        checkOwnership(database)
        keyDescribers.withLock { $0[database.dbi] = describe }
    }
}

// MARK: - Free pages

extension Transaction {
    /// The number of pages on LMDB's free list as this snapshot sees it: pages freed by earlier
    /// transactions that later writes reuse before the file grows.
    ///
    /// The free list is LMDB's internal database 0; each value is a list of page numbers whose
    /// first machine word is the list's length (as `mdb_stat -f` reads it).
    ///
    /// - Throws: ``LMDBError`` when LMDB fails.
    public func freePageCount() throws -> Int {
        var cursor: OpaquePointer?
        try check(mdb_cursor_open(handle, 0, &cursor), "mdb_cursor_open", "free list of \(environment.path)")
        guard let cursor else { return 0 }
        defer { mdb_cursor_close(cursor) }
        var key = MDB_val()
        var value = MDB_val()
        var total = 0
        var rc = mdb_cursor_get(cursor, &key, &value, MDB_FIRST)
        while rc == 0 {
            if value.mv_size >= MemoryLayout<Int>.size, let data = value.mv_data {
                total += data.loadUnaligned(as: Int.self)
            }
            rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)
        }
        if rc != MDB_NOTFOUND { try check(rc, "mdb_cursor_get", "free list of \(environment.path)") }
        return total
    }
}
