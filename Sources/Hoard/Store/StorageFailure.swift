package import LMDB

/// A failure of the storage underneath a store (LMDB, or the operating system below it), as
/// ``HoardError/storage(_:)`` carries it: a kind to match, and LMDB's or the system's code and
/// words for diagnostics.
///
/// ```swift
/// do { try users.put(user) } catch let error as HoardError where error.storageKind == .mapFull { … }
/// ```
public struct StorageFailure: Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, as a name to match.
    public enum Kind: Sendable, Hashable {
        /// The store reached ``Store/Options/maxMapSize`` (or its map could not grow now).
        case mapFull
        /// The disk, the quota or the file-size limit is full.
        case noSpace
        /// Every reader slot (``Store/Options/maxReaders``) is taken.
        case readersFull
        /// More collections than ``Store/Options/maxCollections``.
        case collectionsFull
        /// One transaction changed more pages than LMDB allows in one.
        case transactionFull
        /// The store is already open in this process (close it first: ``Store/close()``).
        case alreadyOpen
        /// The store was closed (``Store/close()``): nothing more can be read or written through it.
        case closed
        /// What must exist does not: the path, or a collection that a read-only store does not hold.
        case notFound
        /// The path is a file where a directory is needed, or the other way round.
        case notADirectory
        /// The process may not open or write the files (or the file system is read-only).
        case permissionDenied
        /// The file is not an LMDB environment, or one of an incompatible LMDB version.
        case notLMDB
        /// The file is damaged.
        case corrupted
        /// The device reported an I/O error (LMDB also reports a write cut short by a full disk so).
        case io
        /// Anything else; ``StorageFailure/code`` tells which.
        case other
    }

    /// The named kind of the failure.
    public let kind: Kind
    /// The C code: LMDB's `MDB_*` (negative) or an `errno` value (positive); 0 for a check of
    /// Hoard's own.
    public let code: Int32
    /// What failed, in one sentence: the C call, the message, the path and what was involved.
    public let description: String

    init(_ error: LMDBError) {
        kind =
            switch error.kind {
            case .mapFull, .mapResized: .mapFull
            case .noSpace: .noSpace
            case .readersFull, .badReaderSlot: .readersFull
            case .databasesFull: .collectionsFull
            case .transactionFull: .transactionFull
            case .alreadyOpen: .alreadyOpen
            case .closed: .closed
            case .noSuchFile, .notFound: .notFound
            case .notADirectory: .notADirectory
            case .permissionDenied: .permissionDenied
            case .invalid, .versionMismatch: .notLMDB
            case .corrupted: .corrupted
            case .io: .io
            case .keyExists, .incompatible, .badKey, .badState, .system: .other
            }
        code = error.code
        description = error.description
    }
}

extension HoardError {
    /// The kind of a ``storage(_:)`` failure, or `nil` for any other error.
    public var storageKind: StorageFailure.Kind? {
        if case .storage(let failure) = self { failure.kind } else { nil }
    }
}

/// Runs `body`, throwing what LMDB throws as ``HoardError/storage(_:)``: the one place where an
/// LMDB error becomes Hoard's (every transaction of the store passes here, and the opening).
@inline(__always)
func storageErrors<R>(_ body: () throws -> R) throws -> R {
    do {
        return try body()
    } catch let error as LMDBError {
        throw HoardError.storage(StorageFailure(error))
    }
}

extension Store {
    /// Runs `body` in an LMDB read transaction; LMDB's failures as ``HoardError/storage(_:)``.
    @inline(__always)
    package func readLMDB<R>(_ body: (borrowing LMDB.ReadTransaction) throws -> R) throws -> R {
        try storageErrors { try environment.read(body) }
    }

    /// Runs `body` in an LMDB write transaction (run again when the map grows, as
    /// `Environment.write` says); LMDB's failures as ``HoardError/storage(_:)``.
    @inline(__always)
    package func writeLMDB<R>(_ body: (borrowing LMDB.WriteTransaction) throws -> R) throws -> R {
        try storageErrors { try environment.write(body) }
    }
}
