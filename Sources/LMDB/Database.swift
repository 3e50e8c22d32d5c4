/// A handle to a named database inside an ``Environment``.
///
/// Get one from ``Environment/openDatabase(_:create:)``; it stays valid while the environment is
/// open, in every transaction of that environment, unless the database is dropped.
/// Using it with another environment is a programmer error and traps.
public struct Database: Sendable, Hashable {
    @usableFromInline let dbi: UInt32
    /// The name it was opened with; `nil` for the main database.
    public let name: String?
    @usableFromInline let environmentID: ObjectIdentifier

    init(dbi: UInt32, name: String?, environmentID: ObjectIdentifier) {
        self.dbi = dbi
        self.name = name
        self.environmentID = environmentID
    }

    var displayName: String { name.map { "'\($0)'" } ?? "the main database" }
}

/// How a put treats an existing key.
public struct PutOptions: OptionSet, Sendable, Hashable {
    /// The options as bits of the project's own (not LMDB's flag values).
    public let rawValue: UInt8
    /// Options of these bits.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Fail with ``LMDBError/Kind/keyExists`` instead of overwriting (`MDB_NOOVERWRITE`).
    public static let noOverwrite = PutOptions(rawValue: 1 << 0)
    /// The key is greater than every key in the database: store it without a search (`MDB_APPEND`).
    /// A key out of order fails with ``LMDBError/Kind/keyExists``. Fast bulk loads of sorted data.
    public static let append = PutOptions(rawValue: 1 << 1)
}

/// Whether an iteration goes on after the current item.
public enum IterationStep: Sendable {
    /// Go on to the next item.
    case next
    /// Stop here.
    case stop
}
