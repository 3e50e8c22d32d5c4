internal import LMDB

/// The changes one write transaction made to observed collections, kept with the transaction
/// and published when it commits: one ``RawChanges`` a collection, built as the writes go, so
/// that publishing copies nothing. Taken by the first change recorded (``ChangeRecorder``), from
/// the store's spares when one is free. An undone nested transaction takes its entries with it
/// (``TransactionJournal``); a write LMDB runs again after growing the map starts a new journal.
final class ChangeJournal: TransactionJournal, @unchecked Sendable {
    // Unchecked: a journal belongs to one write transaction on one thread at a time (the next
    // takes it through the spare's lock).
    /// The collection changed first, and its batch, held inline: most transactions change one.
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
    /// Whether a ``RecordedKind/unknown`` entry was recorded (and may still be, if not undone).
    @exclusivity(unchecked) private var recordedUnknown = false

    var mark: Int { count }

    /// The journal's place in the order in which this process's commits are published
    /// (``Observation/announce(_:)``); 0 until its transaction is about to commit.
    var publication = 0

    /// Empties the journal for another transaction, keeping its buffers when the subscribers let
    /// them go (``Observation/takeJournal()``).
    func reset() {
        publication = 0
        firstState = nil
        firstBatch.reset()
        otherStates.removeAll()
        otherBatches.removeAll()
        count = 0
        order.removeAll(keepingCapacity: true)
        orderStart = nil
        recordedUnknown = false
    }

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

    @inline(__always)
    func record(_ collection: CollectionState, key: UnsafeRawBufferPointer, _ kind: RecordedKind) {
        // Most transactions change one collection: its entries need no order kept.
        if firstState === collection, orderStart == nil {
            firstBatch.append(kind, key: key)
            count += 1
        } else {
            record(inAnyBatch: collection, key: key, kind)
        }
    }

    /// Records that which records of `collection` changed is not known: an entry like the others
    /// (undone with a nested transaction), which ``stamp(transaction:)`` makes an unknown batch.
    func recordUnknown(_ collection: CollectionState) {
        record(inAnyBatch: collection, key: UnsafeRawBufferPointer(start: nil, count: 0), .unknown)
        recordedUnknown = true
    }

    private func record(inAnyBatch collection: CollectionState, key: UnsafeRawBufferPointer, _ kind: RecordedKind) {
        let batch = self.batch(of: collection)
        if batch == 0 {
            firstBatch.append(kind, key: key)
        } else {
            otherBatches[batch - 1].append(kind, key: key)
        }
        if orderStart != nil { order.append(batch) }
        count += 1
    }

    /// Whether the journal is worth keeping for another transaction: not when its buffers
    /// take more than a MiB (a large write's), which a spare would hold on to for good.
    var isWorthKeeping: Bool {
        otherBatches.isEmpty && firstBatch.bufferSize <= 1 << 20
    }

    /// Whether no subscriber holds the journal's buffers any more, so that ``reset()`` keeps them.
    var buffersAreFree: Bool { firstBatch.buffersAreFree }

    /// Marks every batch as transaction `id`'s, and makes one with a ``RecordedKind/unknown``
    /// entry say only "unknown".
    func stamp(transaction id: Int) {
        (firstBatch.first, firstBatch.last) = (id, id)
        for index in otherBatches.indices { (otherBatches[index].first, otherBatches[index].last) = (id, id) }
        guard recordedUnknown else { return }
        if firstBatch.hasUnknownEntry { firstBatch.forget() }
        for index in otherBatches.indices where otherBatches[index].hasUnknownEntry { otherBatches[index].forget() }
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

/// The journals kept for the next write transactions (``Observation/takeJournal()``): two, so
/// that a subscriber has a whole commit more to let go of a batch's buffers before they are
/// needed again (emptied while held, they would be copied).
struct SpareJournals {
    private var older: ChangeJournal?
    private var newer: ChangeJournal?

    /// A spare journal whose buffers are free, the older first; `nil` when neither's are (a new
    /// journal costs no more than emptying one, and the spares may be free by the next commit).
    mutating func take() -> ChangeJournal? {
        if let older, older.buffersAreFree {
            self.older = nil
            return older
        }
        if let newer, newer.buffersAreFree {
            self.newer = nil
            return newer
        }
        return nil
    }

    /// Keeps `journal`, letting go of the older one if there are two.
    mutating func keep(_ journal: ChangeJournal) {
        if let newer { older = newer }
        newer = journal
    }
}

/// A ``ChangeKind``, or the emptying of a whole collection.
enum RecordedKind: UInt8, Sendable {
    case stored = 1, deleted, evicted, purged, expired
    /// Which records changed is not known (``ChangeRecorder/forWrite(of:in:)``). Only ever in a
    /// journal: its batch is published as unknown (``ChangeJournal/stamp(transaction:)``).
    case unknown = 0xFE
    case cleared = 0xFF

    var kind: ChangeKind? { ChangeKind(rawValue: rawValue) }
}

/// A batch of changes to one collection before it is handed to a subscriber: keys back to back
/// in the order they changed (a ``RecordedKind/cleared`` entry empties what came before it); an
/// entry is its key's end and its kind.
struct RawChanges: Sendable {
    var first: Int
    var last: Int
    var origin: ChangeOrigin
    var unknown = false
    /// A wake-up that is not a commit (a record's expiry came): read again whatever the range says.
    var expiryTick = false
    var keys = KeyBytes()
    var entries: [Entry] = []

    struct Entry: Sendable {
        /// Where the entry's key ends in ``RawChanges/keys``.
        var end: Int
        var kind: RecordedKind
    }

    init(first: Int, last: Int, origin: ChangeOrigin) {
        self.first = first
        self.last = last
        self.origin = origin
    }

    var isEmpty: Bool { !unknown && !expiryTick && entries.isEmpty }

    /// Where the key of the entry at `index` is in ``keys``.
    func keyRange(_ index: Int) -> Range<Int> {
        (index == 0 ? 0 : entries[index - 1].end)..<entries[index].end
    }

    mutating func append(_ kind: RecordedKind, key: UnsafeRawBufferPointer) {
        keys.append(key)
        entries.append(Entry(end: keys.count, kind: kind))
    }

    mutating func removeLast() {
        guard !entries.isEmpty else { return }
        entries.removeLast()
        keys.removeSuffix(from: entries.last?.end ?? 0)
    }

    /// Empties the batch for another transaction, keeping its buffers when nothing else holds them.
    mutating func reset() {
        (first, last, origin, unknown, expiryTick) = (0, 0, .thisProcess, false, false)
        keys.removeAll()
        entries.removeAll(keepingCapacity: true)
    }

    /// The bytes its buffers take.
    var bufferSize: Int { keys.capacity + entries.capacity * MemoryLayout<Entry>.stride }

    /// Whether this copy alone holds its buffers: its keys', which a copy shares along with the
    /// entries' (an array tells no one whether it is shared).
    var buffersAreFree: Bool {
        mutating get { keys.isUniquelyHeld }
    }

    var hasUnknownEntry: Bool { entries.contains { $0.kind == .unknown } }

    /// Whether the batch may concern the record under `key`.
    func mentions(_ key: [UInt8]) -> Bool {
        if unknown || expiryTick { return true }
        return key.withUnsafeBytes { key in
            entries.indices.contains { index in
                entries[index].kind == .cleared || keys.withBytes(in: keyRange(index)) { bytesEqual($0, key) }
            }
        }
    }

    /// The batch saying only "unknown", over the same transactions.
    var forgotten: RawChanges {
        var forgotten = RawChanges(first: first, last: last, origin: origin)
        (forgotten.unknown, forgotten.expiryTick) = (true, expiryTick)
        return forgotten
    }

    /// Says only "unknown" from now on, keeping no keys.
    mutating func forget() {
        unknown = true
        keys = KeyBytes()
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
            keys = KeyBytes()
            entries = []
            let start = next.keyRange(clear).lowerBound
            keys.append(next.keys, from: start)
            entries = next.entries[clear...].map { Entry(end: $0.end - start, kind: $0.kind) }
        } else if next.unknown {
            forget()
        } else if !unknown {
            let offset = keys.count
            keys.append(next.keys, from: 0)
            entries.append(contentsOf: next.entries.lazy.map { Entry(end: $0.end + offset, kind: $0.kind) })
        }
        if next.unknown || entries.count > limit { forget() }
    }
}
