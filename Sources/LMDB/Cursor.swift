internal import CLMDB
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

/// A position in a database, for walking it in key order. Handed out by
/// ``Transaction/withCursor(in:_:)``, valid only inside that closure.
///
/// Each move returns the entry it lands on, or `nil` when there is none. The entry's buffers are
/// valid until the next move or change.
public struct Cursor<Access: TransactionAccess>: ~Copyable {
    /// A key and its value, pointing into the memory map.
    public typealias Entry = (key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)

    let handle: OpaquePointer
    unowned(unsafe) let environment: Environment
    let database: Database
    // Unmanaged, and the key size limit copied: the transaction that hands out the cursor holds
    // both objects for longer than the cursor lives, and the retains and releases of using them
    // cost a search-and-replace as much as the search.
    let state: Unmanaged<WriteState>?
    let maxKeySize: Int

    init(handle: OpaquePointer, environment: Environment, database: Database, state: WriteState?) {
        self.handle = handle
        self.environment = environment
        self.database = database
        self.state = state.map { Unmanaged.passUnretained($0) }
        maxKeySize = environment.maxKeySize
    }

    /// Notes in the transaction's state a write's bytes, and whether LMDB found the map full.
    func noteWrite(_ rc: Int32, bytes: Int) {
        state?._withUnsafeGuaranteedRef { state in
            if rc == MDB_MAP_FULL { state.mapFull = true }
            if rc == 0 { state.bytesWritten &+= bytes }
        }
    }

    /// The first entry. The corresponding C call is `mdb_cursor_get` with `MDB_FIRST`.
    ///
    /// - Throws: ``LMDBError`` when LMDB fails (an absent entry is `nil`, not an error).
    public func first() throws(LMDBError) -> Entry? { try move(MDB_FIRST) }
    /// The last entry. The corresponding C call is `mdb_cursor_get` with `MDB_LAST`.
    ///
    /// - Throws: ``LMDBError`` when LMDB fails (an absent entry is `nil`, not an error).
    public func last() throws(LMDBError) -> Entry? { try move(MDB_LAST) }
    /// The entry after the current one. The corresponding C call is `mdb_cursor_get` with `MDB_NEXT`.
    ///
    /// - Throws: ``LMDBError`` when LMDB fails (an absent entry is `nil`, not an error).
    public func next() throws(LMDBError) -> Entry? { try move(MDB_NEXT) }
    /// The entry before the current one. The corresponding C call is `mdb_cursor_get` with `MDB_PREV`.
    ///
    /// - Throws: ``LMDBError`` when LMDB fails (an absent entry is `nil`, not an error).
    public func previous() throws(LMDBError) -> Entry? { try move(MDB_PREV) }
    /// The entry at the cursor. The corresponding C call is `mdb_cursor_get` with `MDB_GET_CURRENT`.
    ///
    /// - Throws: ``LMDBError`` when LMDB fails (an absent entry is `nil`, not an error).
    public func current() throws(LMDBError) -> Entry? { try move(MDB_GET_CURRENT) }

    /// The first entry whose key is `key` or greater. The corresponding C call is `mdb_cursor_get` with `MDB_SET_RANGE`.
    ///
    /// - Throws: ``LMDBError`` when LMDB fails (an absent entry is `nil`, not an error).
    public func seek(atLeast key: some ContiguousBytes) throws -> Entry? {
        try key.withUnsafeBytes { try move(MDB_SET_RANGE, key: $0) }
    }

    /// The entry whose key is exactly `key`. The corresponding C call is `mdb_cursor_get` with `MDB_SET_KEY`.
    ///
    /// - Throws: ``LMDBError`` when LMDB fails (an absent entry is `nil`, not an error).
    public func seek(exactly key: some ContiguousBytes) throws -> Entry? {
        try key.withUnsafeBytes { try move(MDB_SET_KEY, key: $0) }
    }

    /// The entry whose key is exactly the bytes of `key`, without a generic call's cost: for
    /// callers that search once a write. The corresponding C call is `mdb_cursor_get` with
    /// `MDB_SET_KEY`.
    ///
    /// - Throws: ``LMDBError`` when LMDB fails (an absent entry is `nil`, not an error).
    public func seek(exactly key: UnsafeRawBufferPointer) throws(LMDBError) -> Entry? {
        try move(MDB_SET_KEY, key: key)
    }

    func move(_ op: MDB_cursor_op, key: UnsafeRawBufferPointer? = nil) throws(LMDBError) -> Entry? {
        var k = MDB_val()
        if let key {
            // The database was checked when the cursor was opened; only a bad key is left, and
            // the environment's check names it.
            if key.isEmpty || key.count > maxKeySize {
                try environment.validate(key: key, database: database, "mdb_cursor_get")
            }
            k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        }
        var v = MDB_val()
        let rc = mdb_cursor_get(handle, &k, &v, op)
        if rc == MDB_NOTFOUND { return nil }
        // MDB_GET_CURRENT on an unpositioned cursor reports EINVAL: no entry there.
        if rc == EINVAL && op == MDB_GET_CURRENT { return nil }
        try check(rc, "mdb_cursor_get", "database \(database.displayName) in \(environment.path)")
        return (
            UnsafeRawBufferPointer(start: k.mv_data, count: k.mv_size),
            UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size)
        )
    }

    /// Moves to the first entry of `range` (which may lie past its upper end).
    func positionAtStart(of range: KeyRange) throws -> Entry? {
        switch range.lower {
        case nil:
            return try first()
        case .inclusive(let bound):
            return try seek(atLeast: bound)
        case .exclusive(let bound):
            guard let entry = try seek(atLeast: bound) else { return nil }
            return compareKeys(entry.key, bound) == 0 ? try next() : entry
        }
    }

    /// Moves to the last entry of `range` (which may lie before its lower end).
    func positionAtEnd(of range: KeyRange) throws -> Entry? {
        guard let upper = range.upper else { return try last() }
        // The first key at or past the bound; then step back over what the bound excludes.
        guard let entry = try seek(atLeast: upper.key) else { return try last() }
        switch upper {
        case .inclusive(let bound):
            return compareKeys(entry.key, bound) > 0 ? try previous() : entry
        case .exclusive:
            return try previous()
        }
    }
}

extension Cursor where Access == ReadWriteAccess {
    /// Deletes the entry at the cursor; a following ``next()`` returns the entry after the deleted one.
    ///
    /// The corresponding C function is `mdb_cursor_del`.
    ///
    /// - Throws: ``LMDBError`` when LMDB fails.
    public func deleteCurrent() throws(LMDBError) {
        let rc = mdb_cursor_del(handle, 0)
        noteWrite(rc, bytes: 0)
        try check(rc, "mdb_cursor_del", "database \(database.displayName) in \(environment.path)")
    }

    /// Replaces the value of the entry at the cursor with `count` bytes that `fill` writes in
    /// place, without searching the tree again; `key` must be the entry's key. `fill` must write
    /// all `count` bytes, and must not read them first: they are not the old value. A value the
    /// caller wants to keep in part is copied out before this call, since the entry's buffers end
    /// with the change.
    ///
    /// The corresponding C function is `mdb_cursor_put` with `MDB_CURRENT | MDB_RESERVE`.
    ///
    /// - Throws: what `fill` throws, or ``LMDBError`` when LMDB fails (``LMDBError/Kind/mapFull``
    ///   when the map is full).
    public func replaceCurrent<R>(
        key: UnsafeRawBufferPointer, reserving count: Int, _ fill: (UnsafeMutableRawBufferPointer) throws -> R
    ) throws -> R {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val(mv_size: count, mv_data: nil)
        let rc = mdb_cursor_put(handle, &k, &v, flags(MDB_CURRENT, MDB_RESERVE))
        noteWrite(rc, bytes: key.count &+ count)
        try check(rc, "mdb_cursor_put", environment.describe(key: key, in: database))
        return try fill(UnsafeMutableRawBufferPointer(start: v.mv_data, count: count))
    }
}
