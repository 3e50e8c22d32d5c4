internal import CLMDB

#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

/// An error from LMDB, from the operating system underneath it, or from this layer's own checks.
///
/// The error keeps the C code and LMDB's message, plus what this layer knows about the context
/// (the operation and the path, database or key involved). Match the kinds callers handle:
///
/// ```swift
/// do {
///     try env.write { txn in try txn.put(value, forKey: key, in: db, options: .noOverwrite) }
/// } catch let error as LMDBError where error.kind == .keyExists {
///     // someone else stored it first
/// }
/// ```
///
/// A key that is not found is not an error: `get` returns `nil`.
public struct LMDBError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, as a name callers can match. The C code is in ``code``.
    public enum Kind: Sendable, Equatable, Hashable {
        /// `MDB_KEYEXIST`: a put with ``PutOptions/noOverwrite`` found the key.
        case keyExists
        /// `MDB_NOTFOUND`: a named database or an item that must exist does not.
        case notFound
        /// `MDB_MAP_FULL`: the map is full and cannot grow (its cap is reached, or growth is not possible now).
        case mapFull
        /// `MDB_READERS_FULL`: every reader slot is taken, even after clearing stale ones.
        case readersFull
        /// `MDB_BAD_RSLOT`: a reader slot is unusable.
        case badReaderSlot
        /// `MDB_DBS_FULL`: more named databases than ``Environment/Options/maxDatabases``.
        case databasesFull
        /// `MDB_TXN_FULL`: one transaction changed too many pages.
        case transactionFull
        /// `MDB_MAP_RESIZED`: another process grew the map and it could not be adopted now.
        case mapResized
        /// `MDB_INVALID`: the file is not an LMDB environment.
        case invalid
        /// `MDB_VERSION_MISMATCH`: the environment was written by an incompatible LMDB version.
        case versionMismatch
        /// `MDB_INCOMPATIBLE`: the operation does not fit the database's flags, or a non-database key.
        case incompatible
        /// `MDB_CORRUPTED`, `MDB_PAGE_NOTFOUND`, `MDB_PANIC`: the file is damaged or LMDB gave up.
        case corrupted
        /// `MDB_BAD_VALSIZE` or this layer's check: an empty key, a key longer than the environment allows.
        case badKey
        /// `MDB_BAD_TXN`, `MDB_BAD_DBI`, `MDB_CURSOR_FULL`, `MDB_PAGE_FULL`, `MDB_TLS_FULL`: misuse or an internal limit.
        case badState
        /// The environment is already open in this process (LMDB forbids a second open).
        case alreadyOpen
        /// The environment was closed (``Environment/close()``): nothing more can be read or written through it.
        case closed
        /// `ENOENT`: the file or directory does not exist.
        case noSuchFile
        /// `ENOTDIR` or a store path that is a file where a directory is needed.
        case notADirectory
        /// `EACCES`, `EPERM`, `EROFS`: the process may not open or write the file.
        case permissionDenied
        /// `ENOSPC`, `EDQUOT`, `EFBIG`: the disk, the quota or the file-size limit is full.
        case noSpace
        /// `EIO`: the device reported an I/O error.
        case io
        /// Any other operating-system error; ``LMDBError/code`` holds the `errno`.
        case system
    }

    /// The named kind of the error.
    public let kind: Kind
    /// The C code: an LMDB `MDB_*` code (negative) or an `errno` value (positive); 0 for this layer's own checks.
    public let code: Int32
    /// The C function or operation that failed, e.g. `mdb_put`.
    public let operation: String
    /// The context: the path, database and key involved, and any advice.
    public let context: String

    /// Creates an error from a C return code.
    init(code: Int32, operation: String, context: String) {
        self.kind = Self.kind(of: code)
        self.code = code
        self.operation = operation
        self.context = context
    }

    /// Creates an error raised by this layer itself, not by a C call.
    init(_ kind: Kind, operation: String, context: String, code: Int32 = 0) {
        self.kind = kind
        self.code = code
        self.operation = operation
        self.context = context
    }

    /// LMDB's (or the system's) own text for ``code``.
    public var message: String {
        if code == 0 { return "\(kind)" }
        return String(cString: mdb_strerror(code))
    }

    /// The failed operation, LMDB's message, and the path, database and key involved.
    public var description: String {
        var text = "LMDB \(operation) failed: \(message)"
        if !context.isEmpty { text += " (\(context))" }
        if operation == "mdb_txn_commit" && (kind == .io || kind == .noSpace) {
            // LMDB turns a write cut short (a full disk, a file-size limit) into EIO.
            text +=
                "; the disk may be full, over a file-size limit or failing. The transaction did not complete; earlier commits are intact; retry once the cause is fixed"
        }
        return text
    }

    static func kind(of code: Int32) -> Kind {
        switch code {
        case MDB_KEYEXIST: return .keyExists
        case MDB_NOTFOUND: return .notFound
        case MDB_MAP_FULL: return .mapFull
        case MDB_READERS_FULL: return .readersFull
        case MDB_BAD_RSLOT: return .badReaderSlot
        case MDB_DBS_FULL: return .databasesFull
        case MDB_TXN_FULL: return .transactionFull
        case MDB_MAP_RESIZED: return .mapResized
        case MDB_INVALID: return .invalid
        case MDB_VERSION_MISMATCH: return .versionMismatch
        case MDB_INCOMPATIBLE: return .incompatible
        case MDB_CORRUPTED, MDB_PAGE_NOTFOUND, MDB_PANIC: return .corrupted
        case MDB_BAD_VALSIZE: return .badKey
        case MDB_BAD_TXN, MDB_BAD_DBI, MDB_CURSOR_FULL, MDB_PAGE_FULL, MDB_TLS_FULL: return .badState
        case ENOENT: return .noSuchFile
        case ENOTDIR: return .notADirectory
        case EACCES, EPERM, EROFS: return .permissionDenied
        case ENOSPC, EDQUOT, EFBIG: return .noSpace
        case EIO: return .io
        default: return .system
        }
    }
}
