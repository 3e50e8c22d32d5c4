internal import LMDB

/// The changes one write transaction made to observed collections, kept with the transaction
/// (``Transaction/local(_:make:)``) and published when it commits: one ``RawChanges`` a
/// collection, built as the writes go (keys back to back in one buffer), so that publishing
/// copies nothing. It is made by the first change a transaction records (``ChangeRecorder``), so
/// that a write of a key nobody observes allocates nothing. A nested
/// transaction that is undone takes its entries with it (``TransactionJournal``), and a write
/// that LMDB runs again after growing the map starts with a new journal.
final class ChangeJournal: TransactionJournal {
    // Unchecked: a journal belongs to one write transaction on one thread, and the checks of
    // exclusive access cost more than the rest of recording a change.
    /// The collection changed first, and its batch, held inline: most transactions change one
    /// collection, and arrays of collections and batches were three allocations a commit.
    @exclusivity(unchecked) private var firstState: CollectionState?
    @exclusivity(unchecked) private var firstBatch = RawChanges(first: 0, last: 0, origin: .thisProcess)
    /// The other collections changed, and their batches.
    @exclusivity(unchecked) private var otherStates: [CollectionState] = []
    @exclusivity(unchecked) private var otherBatches: [RawChanges] = []
    /// How many entries are recorded.
    @exclusivity(unchecked) private var count = 0
    /// For undoing the last entries: the batch of each entry from the `orderStart`th on (0 for
    /// the first collection's, `n` for `otherBatches[n - 1]`), kept only once a second collection
    /// changed (every entry before is the first collection's).
    @exclusivity(unchecked) private var order: [Int] = []
    @exclusivity(unchecked) private var orderStart: Int?

    var mark: Int { count }

    func undo(to mark: Int) {
        while count > mark {
            count -= 1
            if let orderStart, count >= orderStart, let batch = order.popLast(), batch > 0 {
                otherBatches[batch - 1].removeLast()
            } else {
                firstBatch.removeLast()
            }
        }
        // Entries recorded from here on are numbered from here.
        if let orderStart, count < orderStart { self.orderStart = count }
    }

    func record(_ collection: CollectionState, key: UnsafeRawBufferPointer, _ kind: RecordedKind) {
        let batch = self.batch(of: collection)
        if batch == 0 {
            firstBatch.append(kind, key: key)
        } else {
            otherBatches[batch - 1].append(kind, key: key)
        }
        if orderStart != nil { order.append(batch) }
        count += 1
    }

    /// Calls `body` with each collection changed and its batch, in the order they first changed.
    func forEachBatch(_ body: (CollectionState, RawChanges) throws -> Void) rethrows {
        guard let firstState else { return }
        try body(firstState, firstBatch)
        for index in otherStates.indices { try body(otherStates[index], otherBatches[index]) }
    }

    /// The batch of `collection` (0: the first collection's, `n`: `otherBatches[n - 1]`), begun if new.
    private func batch(of collection: CollectionState) -> Int {
        if firstState === collection { return 0 }
        if firstState == nil {
            firstState = collection
            return 0
        }
        if let found = otherStates.firstIndex(where: { $0 === collection }) { return found + 1 }
        if orderStart == nil { orderStart = count }
        otherStates.append(collection)
        otherBatches.append(RawChanges(first: 0, last: 0, origin: .thisProcess))
        return otherStates.count
    }
}

/// A ``ChangeKind``, or the emptying of a whole collection.
enum RecordedKind: UInt8, Sendable {
    case stored = 1, deleted, evicted, purged, expired
    case cleared = 0xFF

    var kind: ChangeKind? { ChangeKind(rawValue: rawValue) }
}

/// A batch of changes to one collection before it is handed to a subscriber: keys as bytes,
/// in the order they changed (a ``RecordedKind/cleared`` entry empties what came before it).
struct RawChanges: Sendable {
    var first: Int
    var last: Int
    var origin: ChangeOrigin
    var unknown = false
    /// A wake-up that is not a commit (a record's expiry came): read again whatever the range says.
    var expiryTick = false
    var keys: [UInt8] = []
    var entries: [Entry] = []

    struct Entry: Sendable {
        var start: Int
        var end: Int
        var kind: RecordedKind
    }

    init(first: Int, last: Int, origin: ChangeOrigin) {
        self.first = first
        self.last = last
        self.origin = origin
    }

    var isEmpty: Bool { !unknown && !expiryTick && entries.isEmpty }

    mutating func append(_ kind: RecordedKind, key: UnsafeRawBufferPointer) {
        let start = keys.count
        keys.append(contentsOf: key)
        entries.append(Entry(start: start, end: keys.count, kind: kind))
    }

    mutating func removeLast() {
        guard let entry = entries.popLast() else { return }
        keys.removeSubrange(entry.start...)
    }

    /// Whether the batch may concern the record under `key`.
    func mentions(_ key: [UInt8]) -> Bool {
        if unknown || expiryTick { return true }
        return key.withUnsafeBytes { key in
            keys.withUnsafeBytes { keys in
                entries.contains { entry in
                    entry.kind == .cleared
                        || bytesEqual(UnsafeRawBufferPointer(rebasing: keys[entry.start..<entry.end]), key)
                }
            }
        }
    }

    /// Says only "unknown" from now on, keeping no keys.
    mutating func forget() {
        unknown = true
        keys = []
        entries = []
    }

    /// Adds the later batch `next` to this one; past `limit` entries, the batch says only "unknown".
    mutating func merge(_ next: RawChanges, limit: Int) {
        first = Swift.min(first, next.first)
        last = Swift.max(last, next.last)
        origin.formUnion(next.origin)
        expiryTick = expiryTick || next.expiryTick
        // What a later emptying of the collection covers need not be kept, whatever it was.
        if let clear = next.entries.lastIndex(where: { $0.kind == .cleared }) {
            unknown = false
            keys = []
            entries = []
            let start = next.entries[clear].start
            keys.append(contentsOf: next.keys[start...])
            entries = next.entries[clear...].map { Entry(start: $0.start - start, end: $0.end - start, kind: $0.kind) }
        } else if next.unknown {
            forget()
        } else if !unknown {
            let offset = keys.count
            keys.append(contentsOf: next.keys)
            entries.append(
                contentsOf: next.entries.map { Entry(start: $0.start + offset, end: $0.end + offset, kind: $0.kind) })
        }
        if next.unknown || entries.count > limit { forget() }
    }
}
