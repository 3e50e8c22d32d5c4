#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

// The values a bus and a store exchange.

/// A position in a change bus's log: the log's identity (a log recreated from scratch has a new
/// one) and the sequence number of the last change applied from it.
public struct BusPosition: Sendable, Hashable, CustomStringConvertible {
    /// The identity of the log (for example a UUID the log was created with).
    public var log: String
    /// The sequence number of the last change applied; 0 before the first.
    public var sequence: Int64

    /// A position in log `log` after change `sequence`.
    public init(log: String, sequence: Int64) {
        self.log = log
        self.sequence = sequence
    }

    /// `log@sequence`.
    public var description: String { "\(log)@\(sequence)" }

    /// The position as the meta database keeps it: the sequence, 8 bytes big-endian, then the log's UTF-8.
    var stored: [UInt8] { withUnsafeBytes(of: sequence.bigEndian, Array.init) + Array(log.utf8) }

    init?(stored bytes: some Collection<UInt8>) {
        guard bytes.count >= 8, let log = String(validating: bytes.dropFirst(8), as: UTF8.self) else { return nil }
        sequence = bytes.prefix(8).reduce(Int64(0)) { $0 << 8 | Int64($1) }
        self.log = log
    }
}

/// Keys of one collection that changed elsewhere, as a bus delivers them: the records under them
/// are no longer current.
public struct RemoteChange: Sendable, Hashable {
    /// The identity of the store that announced the change (``Replication/identity()``), or `nil`
    /// when it came from elsewhere (a database trigger): a store ignores the changes it announced.
    public var origin: UUID?
    /// The collection's name in the store.
    public var collection: String
    /// The records' keys: the key bytes of their IDs (docs/FORMAT.md, "Keys").
    public var keys: [[UInt8]]
    /// Tags whose records are no longer current (``HoardCollection/invalidate(tag:)-1cd3z``): each
    /// replica removes the records it holds with the tag.
    public var tags: [String]
    /// Whether no record of the collection is current any more (``HoardCollection/invalidateAll()-2h2zi``).
    public var clearsAll: Bool

    /// A change of `keys`, the records tagged with `tags` and, with `clearsAll`, every record
    /// in `collection`, announced by `origin`.
    public init(origin: UUID?, collection: String, keys: [[UInt8]], tags: [String] = [], clearsAll: Bool = false) {
        self.origin = origin
        self.collection = collection
        self.keys = keys
        self.tags = tags
        self.clearsAll = clearsAll
    }
}

/// What ``Replication/apply(_:through:bus:expecting:includingOwn:)`` did.
public struct ApplyResult: Sendable, Hashable {
    /// Records removed.
    public var removed = 0
    /// Changes this store announced itself, skipped.
    public var ownSkipped = 0
    /// Changes of collections this store does not have, skipped.
    public var unknownSkipped = 0
    /// Whether the batch had been applied already (its position is not after the store's): nothing was done.
    public var alreadyApplied = false
    /// Whether the store's position was not the one the caller expected: nothing was done.
    public var unexpectedPosition = false
}

/// Keys waiting in the store's outbox to be announced to the other replicas, read by a bus
/// (``Replication/pendingAnnouncements(limit:)``) and removed once published
/// (``Replication/acknowledge(_:)``).
public struct Announcements: Sendable {
    /// The keys by collection, in the outbox's order.
    public var changes: [RemoteChange]
    /// The outbox entries read, each with the transaction that last wrote it: an entry written
    /// again after it was read is not removed by the acknowledgement, and is announced again.
    let entries: [(key: [UInt8], stamp: [UInt8])]

    /// How many keys.
    public var count: Int { entries.count }
    /// Whether the outbox held nothing.
    public var isEmpty: Bool { entries.isEmpty }
}
