package import LMDB

// The one writer of a collection's records. Every change to a collection's records, and to what
// is kept beside them, is made by the code in this file, in one order:
//   1. the bound's bookkeeping (BoundTracker: the bytes a record adds or frees, what eviction
//      must not take),
//   2. the record in LMDB,
//   3. the record's tags,
//   4. the change journal (this process's observers, the change log other processes read),
//   5. the counters and metrics, once the transaction commits.
// A new index or counter is one more step here, never an edit of every write path.
// `tools/scripts/check-writes.py` (run by tools/test.sh) fails when another file writes a records
// database.

/// Why a record left its collection: what the statistics and `hoard_removed_records_total`
/// (label `reason`) count, and what observers are told.
package enum RecordRemoval: Int, CaseIterable, Sendable {
    /// A delete by ID, `deleteAll`, or read-through's answer that an ID no longer exists.
    case deleted
    /// An invalidation made here: by ID, by tag or of the whole collection.
    case invalidated
    /// Another replica's invalidation, applied from a bus.
    case remote
    /// A synchronize: stored but not in the fresh collection, or undecodable.
    case synchronized
    /// Expired: a purge, or an evicting write that found it expired.
    case expired
    /// Evicted to keep a bounded collection within its capacity.
    case evicted

    /// The metric's `reason` label: the case's name.
    var label: String { "\(self)" }

    /// The change observers see.
    var recordedKind: RecordedKind {
        switch self {
        case .expired: .purged
        case .evicted: .evicted
        case .deleted, .invalidated, .remote, .synchronized: .deleted
        }
    }
}

/// What one write removed, by reason, and the tag invalidations it made: added to the statistics
/// and metrics when its transaction commits (LMDB runs a write's body again when the map grows,
/// and what an attempt that was undone removed was not removed).
struct RemovalTally: Sendable {
    /// Records removed, by ``RecordRemoval``'s raw value (eight lanes: room for two more reasons).
    private(set) var removed = SIMD8<Int>()
    private(set) var evictedBytes = 0
    private(set) var tagInvalidations = 0

    var isEmpty: Bool { removed == .zero && tagInvalidations == 0 }

    mutating func count(_ reason: RecordRemoval, _ records: Int = 1, bytes: Int = 0) {
        removed[reason.rawValue] += records
        if reason == .evicted { evictedBytes += bytes }
    }

    mutating func countTagInvalidation() { tagInvalidations += 1 }

    mutating func add(_ other: RemovalTally) {
        removed &+= other.removed
        evictedBytes += other.evictedBytes
        tagInvalidations += other.tagInvalidations
    }
}

/// What goes with the removal of a record once the bound's bookkeeping has been done: LMDB's
/// delete, the record's tags, the change journal and the tally. The writer's, and a
/// ``BoundTracker``'s for the records it evicts.
struct RemovalEffects {
    let database: Database
    let collection: String
    let store: Store
    let recorder: ChangeRecorder?
    /// The tag index, once asked for: `.some(nil)` when no record of the store is tagged.
    private var tagIndex: TagIndex??
    /// Keys removed under a cursor, whose tags go once the cursor is done.
    private var untag: [[UInt8]] = []
    private(set) var tally = RemovalTally()

    init(database: Database, collection: String, store: Store, recorder: ChangeRecorder?, tagIndex: TagIndex?? = nil) {
        self.database = database
        self.collection = collection
        self.store = store
        self.recorder = recorder
        self.tagIndex = tagIndex
    }

    /// The records' tag index; `nil` when no record of the store is tagged.
    mutating func tags(in txn: borrowing LMDB.WriteTransaction) throws -> TagIndex? {
        if let tagIndex { return tagIndex }
        let opened = try store.tagIndex(of: collection, in: txn)
        tagIndex = .some(opened)
        return opened
    }

    /// Deletes the record under `key`; whether there was one. `untagging`: the tag whose entry for
    /// the key is gone already (an invalidation by tag took it).
    mutating func remove(
        _ key: UnsafeRawBufferPointer, _ reason: RecordRemoval, untagging: [UInt8]? = nil, recordSize: Int = 0,
        in txn: borrowing LMDB.WriteTransaction
    ) throws -> Bool {
        guard try txn.delete(key, in: database) else { return false }
        try tags(in: txn)?.remove(key, in: txn, removed: untagging)
        recorder?.record(key: key, reason.recordedKind, in: txn)
        tally.count(reason, bytes: key.count + recordSize)
        return true
    }

    /// Deletes the record at `cursor`, whose key is `key` and record `recordSize` bytes. The
    /// journal is told first, while `key` (often the cursor's own bytes) is valid; the tags go
    /// at ``flush(in:)``, once the caller's cursor is done.
    mutating func removeCurrent(
        _ cursor: borrowing Cursor<LMDB.ReadWriteAccess>, key: UnsafeRawBufferPointer, recordSize: Int,
        _ reason: RecordRemoval, in txn: borrowing LMDB.WriteTransaction
    ) throws {
        recorder?.record(key: key, reason.recordedKind, in: txn)
        if try tags(in: txn) != nil { untag.append(Array(key)) }
        tally.count(reason, bytes: key.count + recordSize)
        try cursor.deleteCurrent()
    }

    /// Removes the tags of the records removed under a cursor.
    mutating func flush(in txn: borrowing LMDB.WriteTransaction) throws {
        guard !untag.isEmpty else { return }
        let index = try tags(in: txn)
        for key in untag { try index?.remove(key, in: txn) }
        untag.removeAll()
    }

    mutating func countTagInvalidation() { tally.countTagInvalidation() }

    /// Counts `records` removed for `reason` that went together (a clear).
    mutating func count(_ reason: RecordRemoval, _ records: Int) { tally.count(reason, records) }

    /// The tally so far, which starts again from nothing.
    mutating func takeTally() -> RemovalTally {
        defer { tally = RemovalTally() }
        return tally
    }
}

/// The part of a ``RecordWriter`` that stores: all a put needs, none of it changed by a store, so
/// that a put lends it to every record it writes. A put opens this alone (without the writer's
/// removal part, which it never uses) and ends with ``finish(in:partial:)``.
struct RecordStoring {
    // Only what a store reads, so that lending it to a record (a copy) counts few references.
    /// The bound's bookkeeping; `nil` for a collection without a capacity.
    let tracker: BoundTracker?
    let recorder: ChangeRecorder?
    /// The tags given to each record stored, and the index they go in; `nil` leaves a record's
    /// tags as they were.
    let tagging: Tagging?

    /// Tags to give every record stored, and the index they go in. (A struct, not a tuple: an
    /// optional tuple is copied through run-time metadata, which a put paid for on every call.)
    struct Tagging {
        let index: TagIndex
        let tags: [[UInt8]]
    }

    /// The storing part of collection `collection`'s writer in `txn` (see ``RecordWriter/init(_:database:keyKind:state:store:writes:in:)``).
    /// `tagging`: the tags to give every record stored.
    init(
        _ collection: String, database: Database, keyKind: KeyKind, state: CollectionState, store: Store,
        writes: Int? = nil, tagging: Tagging? = nil, in txn: borrowing LMDB.WriteTransaction
    ) throws {
        self.tagging = tagging
        var recorder = store.changeRecorder(for: state, in: txn)
        if let writes { recorder = recorder?.forWrite(of: writes, in: txn) }
        self.recorder = recorder
        tracker = try BoundTracker.open(
            collection, keyKind: keyKind, database: database, store: store, recorder: recorder, txn: txn)
    }

    /// Ends the stores: evicts back within the bound and records the usage, and counts the
    /// evictions once the transaction commits (see ``RecordWriter/finish(in:partial:)``).
    func finish(in txn: borrowing LMDB.WriteTransaction, partial: Bool = false) throws {
        guard let tracker else { return }
        try tracker.finish(in: txn, partial: partial)
        let tally = tracker.takeTally()
        guard !tally.isEmpty else { return }
        let counters = tracker.state.counters
        txn.onCommit { counters.add(tally) }
    }

    /// Stores the record of `header` and `payload` under `key`, written straight into the space
    /// LMDB reserves for it. `told`: whether observers hear of it (a migration's rewrite changes
    /// the spelling, not the content, and is not told).
    @inline(__always)
    func store(
        payload: UnsafeRawBufferPointer, header: RecordHeader, forKey key: UnsafeRawBufferPointer,
        options: PutOptions = [], told: Bool = true, in database: Database, _ txn: borrowing LMDB.WriteTransaction
    ) throws {
        let size = header.size + payload.count
        try tracker?.willStore(key, recordSize: size, in: txn)
        try txn.reserve(size, forKey: key, in: database, options: options) { record in
            header.write(payload: payload, into: record)
        }
        if let tagging { try tagging.index.set(tagging.tags, for: key, in: txn) }
        if told { recorder?.record(key: key, .stored, in: txn) }
    }
}

/// The one writer of a collection's records in one write transaction (see the top of this file).
/// A write path makes one for its call, stores, renews and removes through it, and ends with
/// ``finish(in:partial:)``.
package struct RecordWriter {
    let state: CollectionState
    /// The part that stores (a put opens it alone).
    private(set) var storing: RecordStoring
    private var effects: RemovalEffects

    var database: Database { effects.database }
    /// The bound's bookkeeping; `nil` for a collection without a capacity.
    var tracker: BoundTracker? { storing.tracker }

    /// The writer of collection `collection` (records in `database`) in `txn`. `writes`: about
    /// how many records the call writes, when that is many (observers then may be told that
    /// which records changed is not known: ``ChangeRecorder/forWrite(of:in:)``).
    init(
        _ collection: String, database: Database, keyKind: KeyKind, state: CollectionState, store: Store,
        writes: Int? = nil, in txn: borrowing LMDB.WriteTransaction
    ) throws {
        self.state = state
        storing = try RecordStoring(
            collection, database: database, keyKind: keyKind, state: state, store: store, writes: writes, in: txn)
        effects = RemovalEffects(
            database: database, collection: collection, store: store, recorder: storing.recorder)
    }

    // MARK: - Storing

    /// Stores the record of `header` and `payload` under `key` (``RecordStoring/store(payload:header:forKey:options:told:in:_:)``).
    @inline(__always)
    func store(
        payload: UnsafeRawBufferPointer, header: RecordHeader, forKey key: UnsafeRawBufferPointer,
        options: PutOptions = [], told: Bool = true, in txn: borrowing LMDB.WriteTransaction
    ) throws {
        try storing.store(
            payload: payload, header: header, forKey: key, options: options, told: told, in: database, txn)
    }

    /// Stores `record` (a header and its payload, whole) under `key`: for writers that hold
    /// records rather than models (`hoard put` and `load`, a migration by key names). `told` as for
    /// ``RecordStoring/store(payload:header:forKey:options:told:in:_:)``; `pinned`: whether eviction must leave
    /// the record for the rest of the transaction (a load of more records than the bound keeps
    /// the bound by evicting loaded ones too).
    package func store(
        record: [UInt8], forKey key: [UInt8], options: PutOptions = [], told: Bool = true, pinned: Bool = true,
        in txn: borrowing LMDB.WriteTransaction
    ) throws {
        try key.withUnsafeBytes { key in
            try tracker?.willStore(key, recordSize: record.count, pin: pinned, in: txn)
            try txn.put(record, forKey: key, in: database, options: options)
            if told { effects.recorder?.record(key: key, .stored, in: txn) }
        }
    }

    /// Rewrites the header of the record under `key`, its version and payload kept (in the
    /// current header layout, which may change its size; a text-keyed payload keeps format 2).
    /// `header` gets the stored write time and expiry and returns the new header, or `nil` to
    /// leave the record as it is. Observers hear of nothing: a renewal does not change a record's
    /// value. Returns `nil` when there is no valid record (a damaged one is not given a fresh
    /// checksum), `false` when `header` declined, `true` when rewritten.
    ///
    /// One search: a cursor finds the record and replaces it in place, the new record made first
    /// (the bytes a read returns are LMDB's only until the next write).
    func restamp(
        _ key: UnsafeRawBufferPointer, in txn: borrowing LMDB.WriteTransaction,
        header: (_ writtenAt: Int64, _ expiresAt: Int64?) -> RecordHeader?
    ) throws -> Bool? {
        try txn.withKeptCursor(in: database) { cursor in
            guard let record = try cursor.seek(exactly: key)?.value,
                let (stored, payload) = try? RecordHeader.parse(record)
            else { return nil }
            guard var new = header(stored.writtenAt, stored.expiresAt) else { return false }
            new.version = stored.version
            // The payload is kept, and with it its keying: a text-keyed one (formats 1 and 2) gets
            // a header of format 2, which a migration later rewrites as any older record.
            new.recordFormat = max(stored.recordFormat, 2)
            let size = new.size + payload.count
            return try withUnsafeTemporaryAllocation(byteCount: size, alignment: 1) { renewed in
                new.write(payload: payload, into: renewed)
                tracker?.resized(from: record.count, to: size)
                try cursor.replaceCurrent(key: key, reserving: size) {
                    $0.copyMemory(from: UnsafeRawBufferPointer(renewed))
                }
                return true
            }
        }
    }

    // MARK: - Removing

    /// Removes the record under `key`; whether there was one. `untagging`: the tag whose index
    /// entry for the key an invalidation by tag took already.
    @discardableResult
    package mutating func remove(
        _ key: [UInt8], _ reason: RecordRemoval, untagging: [UInt8]? = nil, in txn: borrowing LMDB.WriteTransaction
    ) throws -> Bool {
        try key.withUnsafeBytes { key in
            try tracker?.willRemove(key, in: txn)
            return try effects.remove(key, reason, untagging: untagging, in: txn)
        }
    }

    /// Removes every record, with their tags; observers hear of one clear. Returns how many there were.
    mutating func removeAll(_ reason: RecordRemoval, in txn: borrowing LMDB.WriteTransaction) throws -> Int {
        let removed = try txn.count(in: database)
        try txn.clear(database)
        try effects.tags(in: txn)?.removeAll(in: txn)
        effects.recorder?.record(key: [], .cleared, in: txn)
        tracker?.emptied()
        effects.count(reason, removed)
        return removed
    }

    /// Removes the records expired at `now`, looking at no more than `limit` records from the
    /// first key at or after `start` (the first of all when `nil`). A record whose header cannot
    /// be read is damaged, not expired, and stays. `resumeAt` is the key to go on from, `nil`
    /// once the collection's end was reached.
    package mutating func removeExpired(
        at now: Int64, from start: [UInt8]?, scanning limit: Int, in txn: borrowing LMDB.WriteTransaction
    ) throws -> (purged: Int, resumeAt: [UInt8]?) {
        var purged = 0
        var scanned = 0
        let resumeAt = try txn.withCursor(in: database) { cursor -> [UInt8]? in
            var entry = try start.map { try cursor.seek(atLeast: $0) } ?? cursor.first()
            while let current = entry {
                if scanned == limit { return Array(current.key) }
                scanned += 1
                if let header = try? RecordHeader.parse(current.value).0, header.isExpired(at: now) {
                    tracker?.removed(keySize: current.key.count, recordSize: current.value.count)
                    try effects.removeCurrent(
                        cursor, key: current.key, recordSize: current.value.count, .expired, in: txn)
                    purged += 1
                }
                entry = try cursor.next()
            }
            return nil
        }
        try effects.flush(in: txn)
        return (purged, resumeAt)
    }

    /// Counts an invalidation by tag made here (its records are counted as they are removed).
    mutating func countTagInvalidation() { effects.countTagInvalidation() }

    // MARK: - Finishing

    /// Ends the writer's work in the transaction: evicts back within the bound and records the
    /// usage (``BoundTracker/finish(in:partial:)``), and counts what was removed once the
    /// transaction commits. `partial` when the same call writes more after this (a bulk put part
    /// way through: the writer goes on).
    ///
    /// - Throws: ``HoardError/overCapacity(collection:reason:)`` when what the transaction wrote
    ///   alone exceeds the bound; ``HoardError/storage(_:)`` when the storage fails.
    package mutating func finish(in txn: borrowing LMDB.WriteTransaction, partial: Bool = false) throws {
        try effects.flush(in: txn)
        try storing.finish(in: txn, partial: partial)
        let tally = effects.takeTally()
        guard !tally.isEmpty else { return }
        let counters = state.counters
        txn.onCommit { counters.add(tally) }
    }
}

extension HoardCollection {
    /// The storing part of this collection's writer in `txn`, all a put needs (see ``RecordStoring``).
    @inline(__always)
    func storing(
        writes: Int? = nil, tagging: RecordStoring.Tagging? = nil, in txn: borrowing LMDB.WriteTransaction
    ) throws -> RecordStoring {
        try RecordStoring(
            name, database: database, keyKind: Model.ID.keyKind, state: state, store: store, writes: writes,
            tagging: tagging, in: txn)
    }

    /// The writer of this collection's records in `txn` (see ``RecordWriter``).
    @inline(__always)
    func writer(writes: Int? = nil, in txn: borrowing LMDB.WriteTransaction) throws -> RecordWriter {
        try RecordWriter(
            name, database: database, keyKind: Model.ID.keyKind, state: state, store: store, writes: writes, in: txn)
    }
}

extension Store {
    /// The writer of collection `name`'s records, in `database` (``recordDatabase(of:create:)``,
    /// opened before `txn` began), for writers without the model type: purges, a replica's
    /// invalidations, the `hoard` tool.
    package func writer(
        of name: String, database: Database, keyKind: KeyKind = .custom, in txn: borrowing LMDB.WriteTransaction
    ) throws -> RecordWriter {
        try RecordWriter(name, database: database, keyKind: keyKind, state: state(of: name), store: self, in: txn)
    }
}
