public import LMDB

// Hoard's own names for what the storage underneath provides, so that an app's code depends on
// Hoard alone: LMDB stays an implementation detail that a later version may replace or change.
// Each wraps the LMDB value at no cost (the same few words). Tools that measure or inspect LMDB
// itself (the `hoard` CLI, the benchmarks' floors) reach it with `@_spi(LMDB) import Hoard`.

/// What a transaction may do: ``ReadOnlyAccess`` or ``ReadWriteAccess``.
public protocol TransactionAccess: Sendable {}
/// The access of a ``ReadTransaction``: reads only.
public enum ReadOnlyAccess: TransactionAccess {}
/// The access of a ``WriteTransaction``: reads and writes.
public enum ReadWriteAccess: TransactionAccess {}

/// A consistent snapshot of every collection, handed to the closure of ``Store/read(_:)``.
public typealias ReadTransaction = Transaction<ReadOnlyAccess>
/// One write over any collections, all of it stored or nothing, handed to the closure of
/// ``Store/write(_:)-77zoe``.
public typealias WriteTransaction = Transaction<ReadWriteAccess>

/// A transaction of a store, valid only during the closure it is handed to.
///
/// It is non-copyable and borrowed by the closure, so it can be neither kept nor returned.
/// Code that only reads takes either kind: `func load<A>(_ txn: borrowing Transaction<A>)`.
public struct Transaction<Access: TransactionAccess>: ~Copyable {
    /// The LMDB transaction, seen read-only: Hoard reads through either kind the same way.
    @_spi(LMDB) public let reading: LMDB.ReadTransaction

    @_spi(LMDB) public init<Other>(_ txn: borrowing LMDB.Transaction<Other>) { reading = txn.viewed() }

    /// The transaction's number: for a read, of the snapshot it sees; it grows with every commit
    /// to the store, from any process (what ``ChangeBatch`` positions are compared with).
    public var id: Int { reading.id }
}

extension Transaction where Access == ReadWriteAccess {
    /// The LMDB write transaction.
    @_spi(LMDB) public var writing: LMDB.WriteTransaction { reading.viewed() }

    /// Runs `body` in a transaction nested in this one: when `body` throws, what it wrote is undone
    /// and this transaction goes on; when it returns, its writes are part of this one's.
    ///
    /// - Throws: what `body` throws, or ``HoardError/storage(_:)`` when the storage fails.
    public func nested<R>(_ body: (borrowing WriteTransaction) throws -> R) throws -> R {
        try storageErrors { try writing.nested { txn in try body(WriteTransaction(txn)) } }
    }
}

/// How much a commit may lose if the operating system crashes or the power fails. A process
/// crash (`kill -9`) loses no returned commit in any mode; the modes differ only for a system
/// crash or power loss (docs/RELIABILITY.md has what each costs).
public enum Durability: Sendable, Hashable {
    /// Every returned commit is on disk (data and meta page flushed). The default.
    case durable
    /// The meta page is not flushed, so a system crash may roll back the last commit or
    /// commits; the store stays consistent.
    case riskLastCommitOnOSCrash
    /// Nothing is flushed: a system crash may lose recent commits and, on a file system that
    /// reorders writes, damage the store.
    case riskStoreOnOSCrash

    var lmdb: Environment.Durability {
        switch self {
        case .durable: .durable
        case .riskLastCommitOnOSCrash: .riskLastCommitOnOSCrash
        case .riskStoreOnOSCrash: .riskStoreOnOSCrash
        }
    }
}

/// The stored keys a scan visits, in the order of their bytes (docs/FORMAT.md gives each ID
/// kind's bytes, ``HoardKey/keyBytes`` an ID's): all of them, those with a prefix (of string IDs,
/// say), or those from one key through another.
public struct KeyRange: Sendable, Hashable {
    let bytes: LMDB.KeyRange

    /// Every key.
    public static let all = KeyRange(bytes: .all)

    /// The keys that start with `prefix`: `.prefix("user:".keyBytes)` for the string IDs that
    /// start with "user:". All keys for an empty prefix.
    public static func prefix(_ prefix: [UInt8]) -> KeyRange { KeyRange(bytes: .prefix(prefix)) }

    /// The keys from `lower` through `upper`, both included; a `nil` end is open.
    public static func from(_ lower: [UInt8]?, through upper: [UInt8]?) -> KeyRange {
        KeyRange(bytes: .init(from: lower.map { .inclusive($0) }, to: upper.map { .inclusive($0) }))
    }
}

/// Whether a visit of records goes on after the current one.
public enum IterationStep: Sendable {
    /// Go on to the next record.
    case next
    /// Stop here.
    case stop

    var lmdb: LMDB.IterationStep { self == .next ? .next : .stop }
}
