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
        if let table = currentEmitted {
            try encoder.withFieldEmitting(table: table) { session in try put(model, batch, &session, in: txn) }
        } else {
            try putOrdinarily(model, batch, in: txn)
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
                        try put(models[index], batch, &session, in: txn)
                        try count(1)
                    }
                }
                if done == nil {
                    for model in models {
                        try put(model, batch, &session, in: txn)
                        try count(1)
                    }
                }
            }
        } else {
            for model in models {
                try putOrdinarily(model, batch, in: txn)
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
            guard let tagIndex else { throw HoardError.notAHoardStore(path: store.path, found: []) }
            try store.prepareTagging(in: txn)
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
        _ model: Model, _ batch: PutBatch, _ session: inout CBOREmitSession, in txn: borrowing LMDB.WriteTransaction
    ) throws {
        try model.id.withKeyBytes { key in
            try checkKeySize(key.count)
            // Generated code cannot fail (it declines instead), so its payload goes straight to
            // LMDB, without the layers that name the key in an encoding error.
            guard let payload = session.emit({ emit(model, into: &$0) }) else {
                return try withPayload(of: model, key: key, ordinarily: true) {
                    try store($0, batch, key: key, in: txn)
                }
            }
            try store(payload, batch, key: key, in: txn)
        }
    }

    /// Stores one model of a batch through its `encode(to:)`.
    private func putOrdinarily(_ model: Model, _ batch: PutBatch, in txn: borrowing LMDB.WriteTransaction) throws {
        try model.id.withKeyBytes { key in
            try checkKeySize(key.count)
            try withPayload(of: model, key: key, ordinarily: true) { try store($0, batch, key: key, in: txn) }
        }
    }

    /// Writes a record of `payload` under `key`.
    @inline(__always)
    private func store(
        _ payload: UnsafeRawBufferPointer, _ batch: PutBatch, key: UnsafeRawBufferPointer,
        in txn: borrowing LMDB.WriteTransaction
    ) throws {
        do {
            try batch.storing.store(
                payload: payload, header: batch.header, forKey: key, options: batch.options, in: database, txn)
        } catch let error as LMDBError where error.kind == .keyExists {
            throw HoardError.alreadyStored(collection: name, key: storedKey(key))
        }
    }
}
