internal import LMDB

/// The keys a write transaction wrote in one collection: eviction never removes them, so that a
/// transaction never loses what it wrote itself. Kept with the transaction (``Transaction/local(_:make:)``).
final class WrittenKeys {
    var keys: Set<[UInt8]> = []
}

/// One write's bookkeeping on a bounded collection: what the write stores and removes, and, at
/// its end (``finish(in:)``), eviction back within the bound and the recorded usage.
///
/// Every write of the store to a collection's records makes one (`nil` when the collection has no
/// capacity, which costs one look-up in the meta database): puts, deletes, synchronize, purges,
/// migrations, read-through. The number of records is LMDB's own count; the bytes are a sum kept
/// in the capacity's record, so only a collection bounded in bytes pays a look-up of the old
/// record on each write.
final class BoundTracker: EvictionSource {
    let collection: String
    let keyKind: KeyKind
    let store: Store
    let database: Database
    let state: CollectionState
    private(set) var bound: StoredBound
    private let recorded: StoredBound
    private let written: WrittenKeys
    private(set) var recordCount: Int
    private let now: Int64
    /// The record sizes `standing(of:in:)` saw, for the eviction that follows it.
    private var sizeSeen: (key: [UInt8], bytes: Int)?

    /// The tracker of a write to `collection` in `txn`; `nil` when the collection has no capacity.
    static func open(
        _ collection: String, keyKind: KeyKind, database: Database, store: Store, txn: borrowing WriteTransaction
    ) throws -> BoundTracker? {
        guard let bound = try StoredBound.read(collection, in: store, txn: txn) else { return nil }
        return BoundTracker(
            collection: collection, keyKind: keyKind, database: database, store: store, bound: bound,
            recordCount: try txn.count(in: database), txn: txn)
    }

    private init(
        collection: String, keyKind: KeyKind, database: Database, store: Store, bound: StoredBound, recordCount: Int,
        txn: borrowing WriteTransaction
    ) {
        self.collection = collection
        self.keyKind = keyKind
        self.store = store
        self.database = database
        self.bound = bound
        recorded = bound
        self.recordCount = recordCount
        state = store.state(of: collection)
        written = txn.local(ObjectIdentifier(state)) { WrittenKeys() }
        now = store.options.now()
    }

    var tracksBytes: Bool { bound.capacity.bytes != nil }

    var isOverCapacity: Bool {
        if let records = bound.capacity.records, recordCount > records { return true }
        if let bytes = bound.capacity.bytes, bound.usedBytes > bytes { return true }
        return false
    }

    var policy: EvictionPolicy { state.policy(sizedFor: bound.capacity.records ?? recordCount) }

    /// Call before storing a record of `recordSize` bytes under `key`. (The number of records is
    /// LMDB's count, read again by ``finish(in:)``; only bytes are summed here.)
    func willStore(_ key: UnsafeRawBufferPointer, recordSize: Int, in txn: borrowing WriteTransaction) throws {
        if let bytes = bound.capacity.bytes {
            if key.count + recordSize > bytes {
                throw HoardError.overCapacity(
                    collection: collection,
                    reason:
                        "the record under \(StoredKey(key, kind: keyKind)) takes \(key.count + recordSize) bytes (key and record), more than the capacity of \(bytes) bytes"
                )
            }
            let old = try txn.withValue(forKey: key, in: database) { $0.count }
            bound.usedBytes += key.count + recordSize - (old.map { key.count + $0 } ?? 0)
        }
        let keyBytes = Array(key)
        written.keys.insert(keyBytes)
        policy.written(keyBytes)
    }

    /// Call after removing a record of `recordSize` bytes under a key of `keySize` bytes.
    func removed(keySize: Int, recordSize: Int) {
        recordCount -= 1
        if tracksBytes { bound.usedBytes -= keySize + recordSize }
    }

    /// Call before removing the record under `key`.
    func willRemove(_ key: UnsafeRawBufferPointer, in txn: borrowing WriteTransaction) throws {
        guard tracksBytes, let size = try txn.withValue(forKey: key, in: database, { $0.count }) else { return }
        removed(keySize: key.count, recordSize: size)
    }

    /// Keeps `key` from eviction for the rest of the transaction, as if the transaction had written it.
    func keep(_ key: [UInt8]) { written.keys.insert(key) }

    /// Sets the bytes the records occupy, counted by a scan.
    func recount(_ bytes: Int) { bound.usedBytes = bytes }

    /// Call after removing every record.
    func emptied() { bound.usedBytes = 0 }

    /// Evicts back within the bound and records the usage; throws ``HoardError/overCapacity(collection:reason:)``
    /// when what the running transaction wrote alone exceeds the bound.
    func finish(in txn: borrowing WriteTransaction) throws {
        recordCount = try txn.count(in: database)
        // Settled even within the bound: the policy moves the keys past its window to probation
        // then, which costs no look-up.
        var source = self
        _ = try policy.settle(&source, in: txn)
        if isOverCapacity {
            recordCount = try txn.count(in: database)
            if isOverCapacity {
                throw HoardError.overCapacity(
                    collection: collection,
                    reason:
                        "it leaves \(recordCount) records\(tracksBytes ? " of \(bound.usedBytes) bytes" : ""), all written by the running transaction, against a capacity of \(bound.capacity)"
                )
            }
        }
        if bound != recorded { try bound.write(collection, in: store, txn: txn) }
    }

    // MARK: - What eviction sees

    func key(after key: [UInt8]?, in txn: borrowing WriteTransaction) throws -> [UInt8]? {
        try txn.withCursor(in: database) { cursor in
            guard let key else { return try cursor.first().map { Array($0.key) } }
            guard let entry = try cursor.seek(atLeast: key) else { return nil }
            if entry.key.elementsEqual(key) { return try cursor.next().map { Array($0.key) } }
            return Array(entry.key)
        }
    }

    func standing(of key: [UInt8], in txn: borrowing WriteTransaction) throws -> RecordStanding {
        guard
            let (size, expiry) = try txn.withValue(
                forKey: key, in: database, { ($0.count, RecordHeader.peekExpiry($0)) })
        else { return .absent }
        if written.keys.contains(key) { return .pinned }
        sizeSeen = (key, size)
        if let expiry, expiry <= now { return .expired }
        return .evictable
    }

    func evict(_ key: [UInt8], expired: Bool, in txn: borrowing WriteTransaction) throws {
        let size: Int
        if let seen = sizeSeen, seen.key == key {
            size = seen.bytes
        } else {
            guard let found = try txn.withValue(forKey: key, in: database, { $0.count }) else { return }
            size = found
        }
        guard try txn.delete(key, in: database) else { return }
        removed(keySize: key.count, recordSize: size)
        state.counters.add(expired ? .expiredRemoved : .evictions)
        if !expired { state.counters.add(.evictedBytes, key.count + size) }
    }
}
