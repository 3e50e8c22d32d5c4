internal import LMDB

/// The keys a write transaction wrote in one collection, by ``keyHash(_:)``: eviction never
/// removes them, so that a transaction never loses what it wrote itself (two keys with one 64-bit
/// hash would only keep a record one write longer). Kept with the transaction
/// (``Transaction/local(_:make:)``).
final class WrittenKeys {
    // Unchecked: one write transaction, on one thread, uses it (a run-time exclusivity check on
    // every key a write stores cost more than the set's own insert).
    @exclusivity(unchecked) private var hashes: KeyHashSet
    /// Hashes added since the set was last asked: they go into it together, at the next question.
    @exclusivity(unchecked) private var added: [UInt64] = []
    /// A filter in front of the set (two bits of one word a key), without false negatives:
    /// eviction asks about every key it weighs, almost none written by the transaction, and the
    /// filter, an eighth the set's size, answers those from the first-level caches.
    @exclusivity(unchecked) private var filter: [UInt64]

    /// A set sized for `expected` keys (as many as the collection's last write wrote), so that a
    /// bulk put like the last one does not grow its set doubling by doubling.
    init(expected: Int) {
        hashes = KeyHashSet(capacity: expected)
        added.reserveCapacity(min(expected, 4_096))
        filter = Array(repeating: 0, count: Self.filterWords(for: expected))
    }

    /// The filter's size for `count` keys: a power of two, at least 64 words.
    private static func filterWords(for count: Int) -> Int {
        var words = 64
        while words * 4 < count { words <<= 1 }
        return words
    }

    /// The filter's word for `hash`, and its two bits there.
    @inline(__always)
    private static func filterSlot(_ hash: UInt64, words: Int) -> (index: Int, bits: UInt64) {
        let index = Int(truncatingIfNeeded: hash >> 32) & (words - 1)
        return (index, 1 << ((hash >> 1) & 63) | 1 << ((hash >> 7) & 63))
    }

    func insert(_ hash: UInt64) { added.append(hash) }

    func contains(_ hash: UInt64) -> Bool {
        absorb()
        let (index, bits) = Self.filterSlot(hash, words: filter.count)
        guard filter[index] & bits == bits else { return false }
        return hashes.contains(hash)
    }

    /// The share of `hashes` the filter sends on to the set (for a test of its sizing).
    func filterPassRate(_ hashes: [UInt64]) -> Double {
        absorb()
        let passed = hashes.count { hash in
            let (index, bits) = Self.filterSlot(hash, words: filter.count)
            return filter[index] & bits == bits
        }
        return Double(passed) / Double(max(1, hashes.count))
    }

    /// How many keys the transaction wrote.
    var count: Int {
        absorb()
        return hashes.count
    }

    @inline(__always)
    private func absorb() {
        guard !added.isEmpty else { return }
        hashes.insert(contentsOf: added)
        let words = Self.filterWords(for: hashes.count)
        if words > filter.count {
            // Outgrown: a larger filter, from every hash of the set.
            var larger = [UInt64](repeating: 0, count: words)
            hashes.forEach { hash in
                let (index, bits) = Self.filterSlot(hash, words: words)
                larger[index] |= bits
            }
            filter = larger
        } else {
            filter.withUnsafeMutableBufferPointer { filter in
                for hash in added {
                    let (index, bits) = Self.filterSlot(hash, words: filter.count)
                    filter[index] |= bits
                }
            }
        }
        added.removeAll(keepingCapacity: true)
    }
}

/// One write's bookkeeping on a bounded collection: what the write stores and removes, and, at
/// its end (``finish(in:)``), eviction back within the bound and the recorded usage.
///
/// The ``RecordWriter`` of every write makes one (`nil` without a capacity); what it evicts goes
/// through the writer's ``RemovalEffects``. Records are LMDB's own count; bytes are a sum kept in
/// the capacity's record, so only a bound in bytes costs a look-up of the old record a write.
final class BoundTracker: EvictionSource {
    let collection: String
    let keyKind: KeyKind
    let store: Store
    let database: Database
    let state: CollectionState
    // Unchecked, as the properties below: a tracker belongs to one write transaction on one
    // thread, and eviction reads the bound for every record it weighs.
    @exclusivity(unchecked) private(set) var bound: StoredBound
    private let recorded: StoredBound
    private let written: WrittenKeys
    /// What goes with each record evicted (its delete, tags, change and count): the writer's
    /// part, which ``RecordWriter/finish(in:partial:)`` takes the tally of.
    @exclusivity(unchecked) private var effects: RemovalEffects
    /// The keys this write stored that the policy has not taken yet: a partial settle (a bulk
    /// put part way through) leaves the newest here for the next.
    @exclusivity(unchecked) private var stored = WrittenBatch()
    @exclusivity(unchecked) private(set) var recordCount: Int
    private let now: Int64
    /// The records a settle chose to evict, not deleted yet (a collection bounded in records
    /// only): their keys back to back, and where each is. ``flushEvictions(in:)`` deletes them in
    /// key order with one cursor, so that neighbours cost no search of their own; the record
    /// count already leaves them out.
    @exclusivity(unchecked) private var evictingBytes = KeyBytes()
    @exclusivity(unchecked) private var evicting: [Range<Int>] = []
    @exclusivity(unchecked) private var evictingSorted = true
    /// The first 8 bytes of the last key in `evicting` as a number (``keyPrefix(_:)``): a key
    /// after it in the order is most often told by this alone.
    @exclusivity(unchecked) private var lastEvictingPrefix: UInt64 = 0

    /// The tracker of a write to `collection` in `txn` (the ``RecordWriter``'s); `nil` when the
    /// collection has no capacity. `recorder`: what tells observers of the records it evicts.
    static func open(
        _ collection: String, keyKind: KeyKind, database: Database, store: Store, recorder: ChangeRecorder?,
        txn: borrowing LMDB.WriteTransaction
    ) throws -> BoundTracker? {
        guard let bound = try StoredBound.read(collection, in: store, txn: txn) else { return nil }
        let effects = RemovalEffects(
            database: database, collection: collection, store: store, recorder: recorder,
            tagIndex: .some(try store.tagIndex(of: collection, in: txn)))
        return BoundTracker(
            collection: collection, keyKind: keyKind, database: database, store: store, bound: bound,
            recordCount: try txn.count(in: database), effects: effects, txn: txn)
    }

    private init(
        collection: String, keyKind: KeyKind, database: Database, store: Store, bound: StoredBound, recordCount: Int,
        effects: RemovalEffects, txn: borrowing LMDB.WriteTransaction
    ) {
        self.collection = collection
        self.effects = effects
        self.keyKind = keyKind
        self.store = store
        self.database = database
        self.bound = bound
        recorded = bound
        self.recordCount = recordCount
        settleInterval = max(1_024, bound.capacity.trackedRecords(stored: recordCount) / 16)
        state = store.state(of: collection)
        written = txn.local(ObjectIdentifier(state)) { [state] in
            WrittenKeys(expected: state.writtenKeys.load(ordering: .relaxed))
        }
        now = store.options.now()
    }

    var tracksBytes: Bool { bound.capacity.bytes != nil }

    /// How many records a bulk put stores between evictions (a sixteenth of the bound, at least
    /// 1,024): deletes in the middle of a write cost LMDB more than the same deletes at its end.
    let settleInterval: Int

    var isOverCapacity: Bool {
        if let records = bound.capacity.records, recordCount > records { return true }
        if let bytes = bound.capacity.bytes, bound.usedBytes > bytes { return true }
        return false
    }

    var recordsOver: Int { bound.capacity.records.map { max(0, recordCount - $0) } ?? 0 }

    var policy: EvictionPolicy { state.policy(sizedFor: bound.capacity.trackedRecords(stored: recordCount)) }

    /// Call before storing a record of `recordSize` bytes under `key`. (The number of records is
    /// LMDB's count, read again by ``finish(in:)``; only bytes are summed here.) `pin`: whether
    /// eviction must leave the record for the rest of the transaction (`false` for a load, which
    /// keeps the bound by evicting what it loaded too).
    func willStore(
        _ key: UnsafeRawBufferPointer, recordSize: Int, pin: Bool = true, in txn: borrowing LMDB.WriteTransaction
    ) throws {
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
        let hash = keyHash(key)
        // The pin lasts the whole transaction, the batch until this tracker's next settle.
        if pin { written.insert(hash) }
        stored.append(key, hash: hash)
    }

    /// Call when a record changes from `old` to `new` bytes without being stored anew (a renewal
    /// whose header grows or shrinks).
    func resized(from old: Int, to new: Int) {
        if tracksBytes { bound.usedBytes += new - old }
    }

    /// Call after removing a record of `recordSize` bytes under a key of `keySize` bytes.
    func removed(keySize: Int, recordSize: Int) {
        recordCount -= 1
        if tracksBytes { bound.usedBytes -= keySize + recordSize }
    }

    /// Call before removing the record under `key`.
    func willRemove(_ key: UnsafeRawBufferPointer, in txn: borrowing LMDB.WriteTransaction) throws {
        guard tracksBytes, let size = try txn.withValue(forKey: key, in: database, { $0.count }) else { return }
        removed(keySize: key.count, recordSize: size)
    }

    /// Keeps `key` from eviction for the rest of the transaction, as if the transaction had written it.
    func keep(_ key: [UInt8]) { written.insert(key.withUnsafeBytes(keyHash)) }

    /// Call after removing every record.
    func emptied() { bound.usedBytes = 0 }

    /// Evicts back within the bound and records the usage; throws ``HoardError/overCapacity(collection:reason:)``
    /// when what the running transaction wrote alone exceeds the bound. `partial` when the same
    /// call stores more records after this (a bulk put part way through): the policy keeps the
    /// newest of those stored so far for the next call (``EvictionPolicy/settle(_:written:partial:in:)``).
    func finish(in txn: borrowing LMDB.WriteTransaction, partial: Bool = false) throws {
        recordCount = try txn.count(in: database)
        // Settled even within the bound: the policy moves the keys past its window to probation
        // then, which costs no look-up.
        var source = self
        _ = try policy.settle(&source, written: &stored, partial: partial, in: txn)
        try flushEvictions(in: txn)
        // A record chosen for eviction that was gone already left the count over: settle again
        // while a settle finds any to choose (each round deletes or uses up queued keys).
        while isOverCapacity {
            recordCount = try txn.count(in: database)
            guard try policy.settle(&source, in: txn) > 0 else { break }
            try flushEvictions(in: txn)
        }
        // Still over (the count read again just before the settle that found nothing to choose):
        // what is left was written by the running transaction.
        if isOverCapacity {
            throw HoardError.overCapacity(
                collection: collection,
                reason:
                    "it leaves \(recordCount) records\(tracksBytes ? " of \(bound.usedBytes) bytes" : ""), all written by the running transaction, against a capacity of \(bound.capacity)"
            )
        }
        if bound != recorded { try bound.write(collection, in: store, txn: txn) }
        state.writtenKeys.store(written.count, ordering: .relaxed)
    }

    /// What this tracker's evictions removed since the last call, for the writer to count.
    func takeTally() -> RemovalTally { effects.takeTally() }

    // MARK: - What eviction sees

    func walk(
        after position: [UInt8]?, in txn: borrowing LMDB.WriteTransaction,
        _ visit: (UnsafeRawBufferPointer, UInt64) throws -> Bool
    ) throws -> [UInt8]? {
        // The walk must not meet records already chosen to go.
        try flushEvictions(in: txn)
        return try txn.withCursor(in: database) { cursor in
            var entry = try firstEntry(after: position, in: cursor)
            while let current = entry {
                let hash = keyHash(current.key)
                if !written.contains(hash), try !visit(current.key, hash) { return Array(current.key) }
                entry = try cursor.next()
            }
            return nil
        }
    }

    /// The first record after `position` in key order (the first of all when `nil`): where the hand
    /// and the expiry walk resume.
    private func firstEntry(
        after position: [UInt8]?, in cursor: borrowing Cursor<LMDB.ReadWriteAccess>
    ) throws -> Cursor<LMDB.ReadWriteAccess>.Entry? {
        guard let position else { return try cursor.first() }
        let entry = try cursor.seek(atLeast: position)
        guard let entry, bytesEqual(position[...], entry.key) else { return entry }
        return try cursor.next()
    }

    func evict(_ key: [UInt8], hash: UInt64, in txn: borrowing LMDB.WriteTransaction) throws -> EvictionOutcome {
        if written.contains(hash) { return .pinned }
        if !tracksBytes {
            // Counted gone now, deleted with the others when the settle ends.
            key.withUnsafeBytes { key in
                let prefix = keyPrefix(key)
                if let last = evicting.last {
                    if prefix < lastEvictingPrefix
                        || (prefix == lastEvictingPrefix
                            && !evictingBytes.withBytes(in: last, { keyPrecedes($0, key) }))
                    {
                        evictingSorted = false
                    }
                } else {
                    // The first of the settle's evictions: room for as many as the collection is
                    // over, rather than growing step by step.
                    evicting.reserveCapacity(recordsOver)
                    evictingBytes.reserve(recordsOver * key.count)
                }
                lastEvictingPrefix = prefix
                let start = evictingBytes.count
                evicting.append(start..<(start + key.count))
                // A check and a copy, not an array's generic `append(contentsOf:)`.
                evictingBytes.append(key)
            }
            recordCount -= 1
            return .evicted
        }
        // Bounded in bytes: the record's size decides whether the settle goes on, so it goes now.
        let outcome = try txn.withCursor(in: database) { cursor -> EvictionOutcome in
            guard let entry = try cursor.seek(exactly: key) else { return .absent }
            let size = entry.value.count
            let expired = RecordHeader.peekExpiry(entry.value).map { $0 <= now } ?? false
            try key.withUnsafeBytes { key in
                try effects.removeCurrent(cursor, key: key, recordSize: size, expired ? .expired : .evicted, in: txn)
            }
            removed(keySize: key.count, recordSize: size)
            return expired ? .expired : .evicted
        }
        try effects.flush(in: txn)
        return outcome
    }

    /// Deletes the records ``evict(_:hash:in:)`` chose, in key order with one cursor (a delete
    /// leaves it on the next record, often the next to go); a record already gone counts back in.
    func flushEvictions(in txn: borrowing LMDB.WriteTransaction) throws {
        guard !evicting.isEmpty else { return }
        if !evictingSorted {
            // By their first 8 bytes as a number (all of an integer's key), their bytes compared
            // only on a tie: a fraction of comparing the bytes of every pair.
            let keyed = evicting.map { (prefix: evictingBytes.withBytes(in: $0, keyPrefix), range: $0) }
            evicting = keyed.sorted { a, b in
                guard a.prefix == b.prefix else { return a.prefix < b.prefix }
                return evictingBytes.withBytes(in: a.range) { a in
                    evictingBytes.withBytes(in: b.range) { keyPrecedes(a, $0) }
                }
            }.map(\.range)
        }
        try txn.withCursor(in: database) { cursor in
            // The record after the one just deleted, where the cursor stands: when it is the next
            // to go (records written together are evicted together), no search finds it.
            var next: Cursor<LMDB.ReadWriteAccess>.Entry?
            for range in evicting {
                let found = try evictingBytes.withBytes(in: range) { key -> Cursor<LMDB.ReadWriteAccess>.Entry? in
                    if let next, bytesEqual(next.key, key) { return next }
                    return try cursor.seek(exactly: key)
                }
                // Valid only until the cursor moves, which a search may have done.
                next = nil
                guard let entry = found else {
                    recordCount += 1
                    continue
                }
                let expired = RecordHeader.peekExpiry(entry.value).map { $0 <= now } ?? false
                try effects.removeCurrent(
                    cursor, key: entry.key, recordSize: entry.value.count, expired ? .expired : .evicted, in: txn)
                next = try cursor.current()
            }
        }
        try effects.flush(in: txn)
        evicting.removeAll(keepingCapacity: true)
        evictingBytes.removeAll()
        evictingSorted = true
    }

    func removeExpired(
        after position: [UInt8]?, limit: Int, in txn: borrowing LMDB.WriteTransaction
    ) throws -> (position: [UInt8]?, removed: Int) {
        try flushEvictions(in: txn)
        // Records that read-through may still serve stale are kept, as the purge keeps them.
        let cutoff = now.addingSaturating(-state.purgeGrace.load(ordering: .relaxed))
        var expired: [(key: [UInt8], bytes: Int)] = []
        let stopped: [UInt8]? = try txn.withCursor(in: database) { cursor in
            var entry = try firstEntry(after: position, in: cursor)
            var steps = 0
            while let current = entry {
                if let expiry = RecordHeader.peekExpiry(current.value), expiry <= cutoff {
                    if !written.contains(keyHash(current.key)) {
                        expired.append((Array(current.key), current.value.count))
                    }
                }
                steps += 1
                if steps == limit { return Array(current.key) }
                entry = try cursor.next()
            }
            return nil
        }
        for (key, bytes) in expired {
            guard try key.withUnsafeBytes({ try effects.remove($0, .expired, in: txn) }) else { continue }
            removed(keySize: key.count, recordSize: bytes)
        }
        return (stopped, expired.count)
    }
}
