internal import LMDB

/// What an attempt to evict one record did.
enum EvictionOutcome {
    /// There is no record under the key (any more).
    case absent
    /// The record was written in the running transaction: it stays.
    case pinned
    /// The record went.
    case evicted
    /// The record went, and it had expired.
    case expired

    var removed: Bool { self == .evicted || self == .expired }
}

/// The records of one bounded collection as eviction sees them, inside the write transaction
/// that must end within the bound (`txn`; a source over memory, in tests, ignores it).
protocol EvictionSource {
    /// How many records the collection holds now.
    var recordCount: Int { get }
    /// Whether the collection is over its bound now.
    var isOverCapacity: Bool { get }
    /// How many records the collection holds past its bound in records (0 when it is within it,
    /// or has none).
    var recordsOver: Int { get }
    /// Calls `visit` with the keys in key order after `position` (from the first when `nil`),
    /// and their ``keyHash(_:)``, passing over those the running transaction wrote (they may not
    /// go), until it returns `false` or the keys run out; returns the last key visited, `nil` when
    /// the walk ran past the last key. One cursor for the whole walk.
    mutating func walk(
        after position: [UInt8]?, in txn: borrowing LMDB.WriteTransaction,
        _ visit: (UnsafeRawBufferPointer, UInt64) throws -> Bool
    ) throws -> [UInt8]?
    /// Deletes the record under `key` unless it is absent or was written by the running
    /// transaction. `hash` is the key's ``keyHash(_:)``. A source may count the record gone at
    /// once and delete it later, before its next walk (``BoundTracker`` does, for a bound in
    /// records only); it then reports `.evicted` for a record it finds absent at that point, and
    /// sets the count right.
    mutating func evict(_ key: [UInt8], hash: UInt64, in txn: borrowing LMDB.WriteTransaction) throws -> EvictionOutcome
    /// Looks at up to `limit` records in key order after `position` (from the first when `nil`)
    /// and deletes those that have expired and were not written by the running transaction;
    /// returns the last key looked at (`nil` when the walk reached the end) and how many went.
    mutating func removeExpired(
        after position: [UInt8]?, limit: Int, in txn: borrowing LMDB.WriteTransaction
    ) throws -> (position: [UInt8]?, removed: Int)
}
