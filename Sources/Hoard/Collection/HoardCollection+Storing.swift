internal import LMDB
internal import CBOR

// Storing models in a write transaction, for every form of put (HoardCollection+Put.swift) and
// read-through's fills: the record's header, the payload through generated code or `encode(to:)`,
// then the writer's storing part. A bulk put shares its clock read and emit buffer.

/// What the records of one put call share. Outside the generic collection, so that a put moves it
/// without asking the runtime for a generic type's metadata.
private struct PutBatch {
    let header: RecordHeader
    let options: PutOptions
    /// What storing each record needs: the writer's, lent (the writer itself, which its finish
    /// changes, stays apart).
    let storing: RecordStoring
}

/// A bulk put's keys that sort after every key of the collection go in by LMDB's append path,
/// which fills the last page before it starts the next (an ordinary insert at the end leaves the
/// page it splits a little emptier, and a search finds the place first).
private final class AppendOrder {
    /// The greatest key of the collection, in `capacity` bytes: its last when the put began, then
    /// the last appended. Copied into place, not into an array, as it changes with every record.
    private let greatest: UnsafeMutableRawPointer
    private var count = 0
    /// Whether any key may still be appended: not when the last key does not fit the buffer.
    private var appending = true
    /// LMDB's largest key (511 bytes unless built otherwise); a longer key is simply not appended.
    private static let capacity = 511

    init(_ database: Database, in txn: borrowing LMDB.WriteTransaction) throws {
        greatest = .allocate(byteCount: Self.capacity, alignment: 8)
        try txn.withCursor(in: database) { cursor in
            guard let last = try cursor.last()?.key else { return }
            guard last.count <= Self.capacity else {
                appending = false
                return
            }
            if let base = last.baseAddress { greatest.copyMemory(from: base, byteCount: last.count) }
            count = last.count
        }
    }

    deinit { greatest.deallocate() }

    /// `options` with `.append` when `key` sorts after the greatest key, which it then becomes.
    func options(for key: UnsafeRawBufferPointer, _ options: PutOptions) -> PutOptions {
        guard appending, key.count <= Self.capacity, let base = key.baseAddress,
            keyPrecedes(UnsafeRawBufferPointer(start: greatest, count: count), key)
        else { return options }
        greatest.copyMemory(from: base, byteCount: key.count)
        count = key.count
        return options.union(.append)
    }
}

/// The options of one put call, checked once (its tags normalized) for every form of the call.
struct PutRequest {
    let expiry: Expiry
    let tags: [[UInt8]]?
    let insertOnly: Bool
    var announce: Bool

    init(_ expiry: Expiry, _ tags: [String]?, insertOnly: Bool, announce: Bool, collection: String) throws {
        self.expiry = expiry
        self.tags = try tags.map { try TagIndex.normalized($0, collection: collection) }
        self.insertOnly = insertOnly
        self.announce = announce
    }

    init(expiry: Expiry, tags: [[UInt8]]? = nil) {
        self.expiry = expiry
        self.tags = tags
        insertOnly = false
        announce = false
    }
}

extension HoardCollection {
    /// Stores `model` in `txn` as `request` says.
    func put(_ model: Model, _ request: PutRequest, in txn: borrowing LMDB.WriteTransaction) throws {
        let batch = try batch(request, writes: nil, in: txn)
        let order: AppendOrder? = nil
        if let table = currentEmitted {
            try encoder.withFieldEmitting(table: table) { session in try put(model, batch, &session, order, in: txn) }
        } else {
            try putOrdinarily(model, batch, order, in: txn)
        }
        try batch.storing.finish(in: txn)
        state.counters.add(.puts)
        if request.announce { try announce([model.id.keyBytes], in: txn) }
    }

    /// Stores `models` in `txn` as `request` says, as one put each would, with the work that is the
    /// same for every record done once.
    func put(_ models: some Sequence<Model>, _ request: PutRequest, in txn: borrowing LMDB.WriteTransaction) throws {
        if request.announce {
            // Visited twice (stored, then announced): a sequence may be visited only once.
            let models = Array(models)
            var storing = request
            storing.announce = false
            try put(models, storing, in: txn)
            return try announce(models.map { $0.id.keyBytes }, in: txn)
        }
        let batch = try batch(request, writes: models.underestimatedCount, in: txn)
        let order = try AppendOrder(database, in: txn)
        // Counted once a call, not a counter call per record.
        var stored = 0
        defer { state.counters.add(.puts, stored) }
        // A bounded collection is brought back within its bound every so many records (see
        // `BoundTracker.settleInterval`), so that a large put never holds more than that many
        // records over it.
        func count(_ records: Int) throws {
            stored += records
            if let tracker = batch.storing.tracker, stored % tracker.settleInterval == 0 {
                try batch.storing.finish(in: txn, partial: true)
            }
        }
        if let table = currentEmitted {
            try encoder.withFieldEmitting(table: table) { session in
                // Models in contiguous memory (an array) are visited by index, without the generic
                // iterator (about a hundred instructions a record).
                let done: Void? = try models.withContiguousStorageIfAvailable { models in
                    for index in models.indices {
                        try put(models[index], batch, &session, order, in: txn)
                        try count(1)
                    }
                }
                if done == nil {
                    for model in models {
                        try put(model, batch, &session, order, in: txn)
                        try count(1)
                    }
                }
            }
        } else {
            for model in models {
                try putOrdinarily(model, batch, order, in: txn)
                try count(1)
            }
        }
        try batch.storing.finish(in: txn)
    }

    /// What the records of a put as `request` says share.
    @inline(__always)
    private func batch(_ request: PutRequest, writes: Int?, in txn: borrowing LMDB.WriteTransaction) throws -> PutBatch
    {
        var tagging: RecordStoring.Tagging?
        if let tags = request.tags {
            // Code from before tags, which would leave the index behind its records, refuses
            // the store: a store opened for writing is made the current format at the open.
            guard let tagIndex else { throw HoardError.notAHoardStore(path: store.path, found: []) }
            tagging = RecordStoring.Tagging(index: tagIndex, tags: tags)
        }
        return PutBatch(
            header: header(for: request.expiry), options: request.insertOnly ? .noOverwrite : [],
            storing: try storing(writes: writes, tagging: tagging, in: txn))
    }

    /// The header of a record written now with `expiry`.
    @inline(__always)
    func header(for expiry: Expiry) -> RecordHeader {
        let now = store.options.now()
        let expiresAt: Int64? =
            switch expiry {
            case .collectionDefault: timeToLiveMilliseconds.map { now.addingSaturating($0) }
            case .never: nil
            case .at(let time): time.storedMilliseconds
            case .after(let duration): now.addingSaturating(duration.storedMilliseconds)
            }
        return RecordHeader(version: currentVersion, writtenAt: store.writeStamp(now), expiresAt: expiresAt)
    }

    /// Stores one model of a batch through its generated code, or the ordinary way when that declines.
    private func put(
        _ model: Model, _ batch: PutBatch, _ session: inout CBOREmitSession, _ order: AppendOrder?,
        in txn: borrowing LMDB.WriteTransaction
    ) throws {
        try model.id.withKeyBytes { key in
            try checkKeySize(key.count)
            // Generated code cannot fail (it declines instead), so its payload goes straight to
            // LMDB, without the layers that name the key in an encoding error.
            guard let payload = session.emit({ emit(model, into: &$0) }) else {
                return try withPayload(of: model, key: key, ordinarily: true) {
                    try store($0, batch, key: key, order, in: txn)
                }
            }
            try store(payload, batch, key: key, order, in: txn)
        }
    }

    /// Stores one model of a batch through its `encode(to:)`.
    private func putOrdinarily(
        _ model: Model, _ batch: PutBatch, _ order: AppendOrder?, in txn: borrowing LMDB.WriteTransaction
    ) throws {
        try model.id.withKeyBytes { key in
            try checkKeySize(key.count)
            try withPayload(of: model, key: key, ordinarily: true) { try store($0, batch, key: key, order, in: txn) }
        }
    }

    /// Writes a record of `payload` under `key`, by the append path when `order` allows it.
    @inline(__always)
    private func store(
        _ payload: UnsafeRawBufferPointer, _ batch: PutBatch, key: UnsafeRawBufferPointer, _ order: AppendOrder?,
        in txn: borrowing LMDB.WriteTransaction
    ) throws {
        let options = order?.options(for: key, batch.options) ?? batch.options
        do {
            try batch.storing.store(
                payload: payload, header: batch.header, forKey: key, options: options, in: database, txn)
        } catch let error as LMDBError where error.kind == .keyExists {
            throw HoardError.alreadyStored(collection: name, key: storedKey(key))
        }
    }
}
