internal import LMDB

/// How much a bounded collection may hold: a number of records, a number of bytes, or both.
///
/// ```swift
/// let users = try store.collection(User.self, capacity: .records(1_000_000))
/// let photos = try store.collection(Photo.self, capacity: Capacity(records: 50_000, bytes: 2 << 30))
/// ```
///
/// Bytes count what the records occupy as stored: each record's key and its bytes (its header
/// and payload). They are not the size of the store's file, which LMDB never shrinks
/// (the Capacity and eviction article says how pages relate). The capacity is recorded in the store, so every
/// process that writes the collection keeps the same bound; a write that passes it evicts in
/// the same transaction.
public struct Capacity: Sendable, Hashable, CustomStringConvertible {
    /// The most records the collection keeps; `nil` for no bound on their number.
    public var records: Int?
    /// The most bytes (keys and records as stored) the collection keeps; `nil` for no bound on bytes.
    public var bytes: Int?
    /// How this process chooses what to evict. Not recorded in the store: each process evicts by
    /// its own strategy and what it has seen of the collection's reads; the bound is the same for all.
    public var strategy: EvictionStrategy

    /// A capacity of at most `records` records and at most `bytes` bytes (either may be `nil`),
    /// evicting by `strategy`.
    public init(records: Int? = nil, bytes: Int? = nil, strategy: EvictionStrategy = .frequency) {
        self.records = records
        self.bytes = bytes
        self.strategy = strategy
    }

    /// The records the eviction policy's state is sized for: the bound on records, or for a
    /// collection bounded in bytes only, the larger of the records it holds (`stored`) and one
    /// per KiB of the byte bound (a guess at the record size, which the bound does not give).
    func trackedRecords(stored: Int) -> Int { records ?? max(stored, (bytes ?? 0) / 1_024) }

    /// Whether the two bound the same records and bytes (the strategy aside): what the store records.
    func sameBound(as other: Capacity) -> Bool { records == other.records && bytes == other.bytes }

    /// At most `count` records.
    public static func records(_ count: Int) -> Capacity { Capacity(records: count) }
    /// At most `count` bytes of keys and records.
    public static func bytes(_ count: Int) -> Capacity { Capacity(bytes: count) }
    /// No bound: opening a collection with it removes a capacity recorded before.
    public static let unbounded = Capacity()

    /// Whether neither records nor bytes are bounded.
    public var isUnbounded: Bool { records == nil && bytes == nil }

    /// The capacity as `hoard stat` shows it: "1000000 records", "2147483648 bytes", both, or "unbounded".
    public var description: String {
        let parts = [records.map { "\($0) records" }, bytes.map { "\($0) bytes" }].compactMap { $0 }
        return parts.isEmpty ? "unbounded" : parts.joined(separator: ", ")
    }

    /// The smallest record a collection can hold: a one-byte key, the header and a one-byte payload.
    static let smallestRecord = 1 + RecordHeader.minimumSize + 1

    /// Throws unless every bound given is one a collection can keep.
    func validate(collection: String) throws {
        if let records, records < 1 {
            throw HoardError.invalidCapacity(
                collection: collection, reason: "\(records) records; a bounded collection keeps at least 1")
        }
        if let bytes, bytes < Self.smallestRecord {
            throw HoardError.invalidCapacity(
                collection: collection,
                reason:
                    "\(bytes) bytes is smaller than one record (at least \(Self.smallestRecord) bytes: key, \(RecordHeader.minimumSize)-byte header, payload)"
            )
        }
    }
}

/// How a bounded collection chooses the records it gives up (docs/EVICTION.md).
public enum EvictionStrategy: Sendable, Hashable {
    /// Keeps the records asked for most often (the default): a new record is kept only when it
    /// has been asked for more often than the record it would push out, as W-TinyLFU decides,
    /// unless a trial of both rules on a sample of the keys finds that keeping every new record
    /// would hit more now (new records asked for again soon after, a hot set that moved). Best
    /// where popularity lasts (most caches): Zipf-like traffic, scans, loops; about recency's hits
    /// where it does not.
    case frequency
    /// Keeps the records asked for most recently: a record read since eviction last passed it
    /// stays once more, every new record is kept (CLOCK, close to LRU). Best where what was asked
    /// for last is what comes next, whatever came before.
    case recency
}

/// What a bounded collection holds against its capacity, as recorded in the store.
public struct CapacityUsage: Sendable, Hashable {
    /// The recorded capacity.
    public var capacity: Capacity
    /// The records stored now, expired ones not yet removed included.
    public var records: Int
    /// The bytes of keys and records stored now; `nil` when the capacity does not bound bytes (the
    /// store then does not keep the sum).
    public var bytes: Int?
}

/// A collection's capacity as the meta database keeps it, under `capacity:NAME`: three
/// little-endian 64-bit integers, the records bound, the bytes bound (0 for none) and the bytes
/// the records occupy now (kept only when bytes are bounded, 0 otherwise). docs/FORMAT.md.
struct StoredBound: Equatable {
    var capacity: Capacity
    var usedBytes: Int

    static let size = 24

    static func key(_ collection: String) -> [UInt8] { Array("capacity:\(collection)".utf8) }

    /// The bound of `collection` as `txn` sees it; `nil` when it has none.
    static func read<Access>(
        _ collection: String, in store: Store, txn: borrowing LMDB.Transaction<Access>
    ) throws -> StoredBound? {
        guard let meta = store.meta else { return nil }
        return try txn.withValue(forKey: key(collection), in: meta) { bytes in
            try parse(bytes, collection: collection)
        }
    }

    static func parse(_ bytes: UnsafeRawBufferPointer, collection: String) throws -> StoredBound {
        guard bytes.count == size else {
            throw HoardError.corruptRegistry(
                collection: collection, reason: "its capacity has \(bytes.count) bytes, not \(size)")
        }
        func field(_ index: Int) -> Int {
            Int(
                truncatingIfNeeded: UInt64(
                    littleEndian: bytes.loadUnaligned(fromByteOffset: index * 8, as: UInt64.self)))
        }
        let records = field(0)
        let limit = field(1)
        let used = field(2)
        guard records >= 0, limit >= 0, used >= 0 else {
            throw HoardError.corruptRegistry(collection: collection, reason: "its capacity holds a negative number")
        }
        return StoredBound(
            capacity: Capacity(records: records == 0 ? nil : records, bytes: limit == 0 ? nil : limit), usedBytes: used)
    }

    var bytes: [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(Self.size)
        for value in [capacity.records ?? 0, capacity.bytes ?? 0, usedBytes] {
            withUnsafeBytes(of: UInt64(truncatingIfNeeded: value).littleEndian) { result.append(contentsOf: $0) }
        }
        return result
    }

    /// Writes this bound for `collection` in `txn`.
    func write(_ collection: String, in store: Store, txn: borrowing LMDB.WriteTransaction) throws {
        guard let meta = store.meta else { return }
        try txn.put(bytes, forKey: Self.key(collection), in: meta)
    }

    /// Removes the bound of `collection` in `txn`.
    static func remove(_ collection: String, in store: Store, txn: borrowing LMDB.WriteTransaction) throws {
        guard let meta = store.meta else { return }
        try txn.delete(key(collection), in: meta)
    }

    /// The bytes of keys and records in `database`, counted by a scan (when a byte bound is set
    /// on a collection that had none, and after tools wrote records without counting them).
    static func countBytes<Access>(in database: Database, txn: borrowing LMDB.Transaction<Access>) throws -> Int {
        var total = 0
        try txn.forEach(in: database, range: .all) { key, value in
            total += key.count + value.count
            return .next
        }
        return total
    }
}
