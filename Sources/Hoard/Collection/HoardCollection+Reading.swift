internal import LMDB
internal import CBOR

// Reading: by ID, scans and visits, headers, and decoding one record.

extension HoardCollection {
    /// The model stored under `id`, or `nil` (also when it has expired, or when the store follows
    /// a bus and holds no lease: ``Replication/requireLease()``).
    ///
    /// - Throws: ``HoardError`` when the record is damaged, was written by a newer version or cannot
    ///   be decoded (``HoardError/corruptRecord(collection:key:reason:)``, ``HoardError/newerRecord(collection:key:version:current:)``,
    ///   ``HoardError/decoding(collection:key:version:underlying:)``), or the ID is too long for a key; ``HoardError/storage(_:)`` when the storage fails.
    public func get(_ id: Model.ID) throws -> Model? {
        // Timed here, not in `get(_:in:)` (a caller's transaction reads many records at once), in
        // a `defer`: a `Model?` local in unspecialized code costs a metadata lookup.
        let start = monotonicNanoseconds()
        defer { state.metrics.getDuration.recordSince(start) }
        var unused = false
        return try store.readLMDB { txn in
            try get(id, in: txn, refreshDue: &unused, checkingRefresh: false, startedAt: start)
        }
    }

    /// The model stored under `id` as `txn` sees it, or `nil` (also when it has expired).
    ///
    /// - Throws: as ``get(_:)`` does.
    public func get<Access>(_ id: Model.ID, in txn: borrowing Transaction<Access>) throws -> Model? {
        var unused = false
        return try storageErrors {
            try get(id, in: txn.reading, refreshDue: &unused, checkingRefresh: false, startedAt: nil)
        }
    }

    /// ``get(_:in:)``, and for a hit when `checkingRefresh`, whether the record is past the
    /// collection's refresh point (``Freshness/refreshAhead``), from the header it reads anyway.
    /// `startedAt` is the clock reading the get began with, if it took one: the lease is judged
    /// at that instant (``Store/vouches(for:startedAt:)``).
    @inline(__always)
    func get<Access>(
        _ id: Model.ID, in txn: borrowing LMDB.Transaction<Access>, refreshDue: inout Bool, checkingRefresh: Bool,
        startedAt: UInt64?
    ) throws -> Model? {
        // The key is lent from the stack, and the record's bytes are taken out of the closure
        // (valid while `txn` is unchanged): a closure returning `Model?` would make this
        // unspecialized code look up `Model?`'s metadata on every call. A bounded collection's
        // policy learns of the access here.
        let found = try id.withKeyBytes { key in
            try checkKeySize(key.count)
            let record = try txn.withValue(forKey: key, in: database, { $0 })
            noteAccess(key, hit: record != nil)
            return record
        }
        let counters = state.counters
        guard let record = found else {
            counters.add(.misses)
            return nil
        }
        // Hit or miss by the read rule, from the header, before the decode (unwrapping a decoded
        // `Model?` here would look up its metadata). The clock is read only for a record with an expiry.
        let expiry = readRule(in: txn, startedAt: startedAt).expiry(of: record)
        let now = expiry == nil ? 0 : store.options.now()
        let expired = expiry.map { $0 <= now } ?? false
        if expired {
            counters.add(.misses)
        } else {
            counters.add(.hits)
            if checkingRefresh, let writtenAt = RecordHeader.peekWrittenAt(record),
                let point = freshness.refreshPoint(writtenAt: writtenAt, expiresAt: expiry)
            {
                refreshDue = now >= point
            }
        }
        return try decode(record, key: { id.keyBytes }, expired: expired)
    }

    /// Whether a live (unexpired) record is stored under `id`; reads its header only.
    ///
    /// - Throws: ``HoardError`` when the record's header is damaged; ``HoardError/storage(_:)`` when the storage fails.
    public func contains(_ id: Model.ID) throws -> Bool {
        let expiry = try store.readLMDB { txn -> Int64?? in
            try header(of: id, in: txn).map { readRule(in: txn).expiry(of: $0) }
        }
        guard let expiry else { return false }
        guard let expiry else { return true }
        return expiry > store.options.now()
    }

    /// The number of records, expired ones not yet purged included (read from the B-tree, no scan).
    ///
    /// - Throws: ``HoardError/storage(_:)`` when the storage fails.
    public func count() throws -> Int {
        try store.readLMDB { txn in try txn.count(in: database) }
    }

    /// The models whose IDs lie from `lower` to `upper` (both included; either may be open), in
    /// ID order or reversed, at most `limit`.
    ///
    /// - Throws: ``HoardError`` for the first damaged, newer or undecodable record in the range;
    ///   ``HoardError/storage(_:)`` when the storage fails.
    public func scan(
        from lower: Model.ID? = nil, through upper: Model.ID? = nil, reverse: Bool = false, limit: Int = .max
    ) throws -> [Model] {
        try scan(keys: .from(lower?.keyBytes, through: upper?.keyBytes), reverse: reverse, limit: limit)
    }

    /// The models whose key bytes lie in `keys`, for prefixes of string IDs and other byte ranges.
    /// Expired records are left out; the first damaged record throws.
    ///
    /// - Throws: ``HoardError`` for the first damaged, newer or undecodable record in the range;
    ///   ``HoardError/storage(_:)`` when the storage fails.
    public func scan(keys: KeyRange, reverse: Bool = false, limit: Int = .max) throws -> [Model] {
        let result = try scan(keys: keys, reverse: reverse, limit: limit, skippingDamaged: false)
        return result.models
    }

    /// Visits the models whose key bytes lie in `keys` one at a time, inside one read snapshot,
    /// without building an array: for large collections. Expired records are skipped; the first
    /// damaged record throws. Return `.stop` from `body` to end early.
    ///
    /// - Throws: ``HoardError`` for the first damaged, newer or undecodable record, what `body`
    ///   throws, or ``HoardError/storage(_:)`` when the storage fails.
    public func forEach(keys: KeyRange = .all, reverse: Bool = false, _ body: (Model) throws -> IterationStep) throws {
        let now = store.options.now()
        try store.readLMDB { txn in
            let rule = readRule(in: txn)
            try txn.forEach(in: database, range: keys.bytes, reverse: reverse) { key, record in
                let expired = rule.expiry(of: record).map { $0 <= now } ?? false
                guard let model = try decode(record, key: { Array(key) }, expired: expired) else { return .next }
                return try body(model).lmdb
            }
        }
    }

    /// Like ``scan(keys:reverse:limit:)``, but a damaged or undecodable record does not stop the
    /// scan: it is left out and reported in ``ScanResult/damaged``. Nothing is deleted.
    ///
    /// - Throws: ``HoardError/storage(_:)`` when the storage fails.
    public func scanSkippingDamaged(
        keys: KeyRange = .all, reverse: Bool = false, limit: Int = .max
    ) throws -> ScanResult<Model> {
        try scan(keys: keys, reverse: reverse, limit: limit, skippingDamaged: true)
    }

    func scan(keys: KeyRange, reverse: Bool, limit: Int, skippingDamaged: Bool) throws -> ScanResult<Model> {
        let now = store.options.now()
        return try store.readLMDB { txn in
            var result = ScanResult<Model>(models: [], damaged: [])
            guard limit > 0 else { return result }
            let rule = readRule(in: txn)
            try txn.forEach(in: database, range: keys.bytes, reverse: reverse) { key, record in
                let expired = rule.expiry(of: record).map { $0 <= now } ?? false
                do {
                    if let model = try decode(record, key: { Array(key) }, expired: expired) {
                        result.models.append(model)
                    }
                } catch let error as HoardError where skippingDamaged {
                    store.logger.warning(
                        "skipped a damaged record", metadata: ["collection": "\(name)", "error": "\(error)"])
                    result.damaged.append(error)
                }
                return result.models.count < limit ? .next : .stop
            }
            return result
        }
    }

    /// The header of the record under `id`, or `nil`: version, write time and expiry, unchecked
    /// against the payload's decoding.
    ///
    /// - Throws: ``HoardError/corruptRecord(collection:key:reason:)`` when the header cannot be read;
    ///   ``HoardError/storage(_:)`` when the storage fails.
    public func header(of id: Model.ID) throws -> RecordHeader? {
        try store.readLMDB { txn in try header(of: id, in: txn) }
    }

    /// The header of the record under `id` as `txn` sees it, or `nil` (see ``header(of:)``); an
    /// expired record's header too.
    ///
    /// - Throws: ``HoardError/corruptRecord(collection:key:reason:)`` when the header cannot be read;
    ///   ``HoardError/storage(_:)`` when the storage fails.
    public func header<Access>(of id: Model.ID, in txn: borrowing Transaction<Access>) throws -> RecordHeader? {
        try storageErrors { try header(of: id, in: txn.reading) }
    }

    func header<Access>(of id: Model.ID, in txn: borrowing LMDB.Transaction<Access>) throws -> RecordHeader? {
        let key = try keyBytes(id)
        return try txn.withValue(forKey: key, in: database) { record in
            do throws(RecordDamage) {
                return try RecordHeader.parse(record).0
            } catch {
                throw HoardError.corruptRecord(collection: name, key: storedKey(key), reason: error.reason)
            }
        }
    }

    /// Decodes one record: header, checksum, version, payload; `nil` when the read rule found it
    /// `expired` (its header and checksum are checked all the same: a damaged record is an error,
    /// never a miss). `key` gives the record's key, for errors and lazy migrations only.
    func decode(_ record: UnsafeRawBufferPointer, key: () -> [UInt8], expired: Bool = false) throws -> Model? {
        let header: RecordHeader
        let payload: UnsafeRawBufferPointer
        do throws(RecordDamage) {
            (header, payload) = try RecordHeader.parse(record)
        } catch {
            throw HoardError.corruptRecord(collection: name, key: storedKey(key()), reason: error.reason)
        }
        if expired { return nil }
        guard header.version <= currentVersion else {
            throw HoardError.newerRecord(
                collection: name, key: storedKey(key()), version: header.version, current: currentVersion)
        }
        guard header.version == currentVersion || localVersions.contains(header.version) else {
            throw HoardError.corruptRecord(
                collection: name, key: storedKey(key()),
                reason: "key-set version \(header.version) is not one of \(Model.self)'s local versions")
        }
        do {
            let model = try decodePayload(payload, version: header.version, numbered: header.hasNumberedKeys)
            if (header.version < currentVersion || !header.isCurrentFormat) && migration == .lazy {
                let key = key()
                state.pendingMigrations.withLock { pending in
                    if pending.count < Self.pendingLimit { pending.insert(key) }
                }
            }
            return model
        } catch let error as CBORDecodingError {
            throw HoardError.corruptRecord(collection: name, key: storedKey(key()), reason: "\(error)")
        } catch let error as CBORKeyingError {
            throw HoardError.corruptRecord(
                collection: name, key: storedKey(key()), reason: "the payload's keys do not fit its version: \(error)")
        } catch let error as RecordDamage {
            throw HoardError.corruptRecord(collection: name, key: storedKey(key()), reason: error.reason)
        } catch {
            throw HoardError.decoding(
                collection: name, key: storedKey(key()), version: header.version, underlying: error)
        }
    }
}

/// The models a scan could read, and the records it could not.
public struct ScanResult<Model> {
    /// The models, in scan order.
    public var models: [Model]
    /// The damaged or undecodable records met on the way, each naming collection, key and cause.
    public var damaged: [HoardError]
}
