public import LMDB
public import VariableCoding
internal import CBOR

/// The stored models of one type: a named LMDB database of records keyed by the models' IDs.
///
/// Records are written with the model's current local key set and read with the key set of the
/// version stamped in their header, so a record written by an earlier version of the app
/// decodes under today's code (migration on read). A record stamped with a version newer than
/// today's current one is never misread: reading it throws ``HoardError/newerRecord(collection:key:version:current:)``.
public final class HoardCollection<Model: VariablyCodable & Identifiable>: Sendable where Model.ID: HoardKey {
    // Named HoardCollection, not Collection, so that it never shadows Swift.Collection.
    /// The collection's name (its database is `c:NAME`).
    public let name: String
    let store: Store
    let database: Database
    let encoder: CBOREncoder
    /// One decoder per declared local version.
    let decoders: [Int: CBORDecoder]

    init(store: Store, name: String) throws {
        self.store = store
        self.name = name
        let keySets = Model.keySets
        // Deterministic CBOR: equal models give equal bytes, so changes can be found by comparing bytes.
        encoder = CBOREncoder(deterministic: true, userInfo: [.keySet: KeySetID.currentLocal])
        decoders = Dictionary(uniqueKeysWithValues: keySets.localVersions.map { version in
            (version, CBORDecoder(userInfo: [.keySet: KeySetID.local(version)]))
        })
        let databaseName = Store.collectionPrefix + name
        do {
            try Registry.check(Model.self, collection: name, in: store)
            if store.options.readOnly {
                database = try store.environment.openDatabase(databaseName)
            } else {
                database = try store.environment.openDatabase(databaseName, create: true)
            }
        } catch let error as LMDBError {
            throw HoardError.storage(error)
        }
    }

    var currentVersion: Int { Model.keySets.currentVersion }

    // MARK: Reading

    /// The model stored under `id`, or `nil`.
    public func get(_ id: Model.ID) throws -> Model? {
        try store.environment.read { txn in try get(id, in: txn) }
    }

    /// The model stored under `id` as `txn` sees it, or `nil`.
    public func get<Access>(_ id: Model.ID, in txn: borrowing Transaction<Access>) throws -> Model? {
        let key = try keyBytes(id)
        return try txn.withValue(forKey: key, in: database) { record in try decode(record, key: key) }
    }

    /// Whether a record is stored under `id` (without decoding it).
    public func contains(_ id: Model.ID) throws -> Bool {
        let key = try keyBytes(id)
        return try store.environment.read { txn in try txn.contains(key, in: database) }
    }

    /// The number of records.
    public func count() throws -> Int {
        try store.environment.read { txn in try txn.count(in: database) }
    }

    /// The models whose IDs lie from `lower` to `upper` (both included; either may be open), in
    /// ID order or reversed, at most `limit`.
    public func scan(from lower: Model.ID? = nil, through upper: Model.ID? = nil, reverse: Bool = false, limit: Int = .max) throws -> [Model] {
        let keys = KeyRange(from: lower.map { .inclusive($0.keyBytes) }, to: upper.map { .inclusive($0.keyBytes) })
        return try scan(keys: keys, reverse: reverse, limit: limit)
    }

    /// The models whose key bytes lie in `keys`, for prefixes of string IDs and other byte ranges.
    public func scan(keys: KeyRange, reverse: Bool = false, limit: Int = .max) throws -> [Model] {
        try store.environment.read { txn in
            var models: [Model] = []
            guard limit > 0 else { return models }
            try txn.forEach(in: database, range: keys, reverse: reverse) { key, record in
                models.append(try decode(record, key: Array(key)))
                return models.count < limit ? .next : .stop
            }
            return models
        }
    }

    /// The header of the record under `id`, or `nil`: version, write time and expiry, unchecked
    /// against the payload's decoding.
    public func header(of id: Model.ID) throws -> RecordHeader? {
        let key = try keyBytes(id)
        return try store.environment.read { txn in
            try txn.withValue(forKey: key, in: database) { record in
                do throws(RecordProblem) {
                    return try RecordHeader.read(record).0
                } catch {
                    throw HoardError.corruptRecord(collection: name, key: describeKey(key), reason: error.reason)
                }
            }
        } ?? nil
    }

    /// Decodes one record: header, checksum, version, payload.
    func decode(_ record: UnsafeRawBufferPointer, key: [UInt8]) throws -> Model {
        let header: RecordHeader
        let payload: UnsafeRawBufferPointer
        do throws(RecordProblem) {
            (header, payload) = try RecordHeader.read(record)
        } catch {
            throw HoardError.corruptRecord(collection: name, key: describeKey(key), reason: error.reason)
        }
        guard header.version <= currentVersion else {
            throw HoardError.newerRecord(collection: name, key: describeKey(key), version: header.version, current: currentVersion)
        }
        guard let decoder = decoders[header.version] else {
            throw HoardError.corruptRecord(collection: name, key: describeKey(key), reason: "key-set version \(header.version) is not one of \(Model.self)'s local versions")
        }
        do {
            return try decoder.decode(Model.self, from: payload)
        } catch let error as CBORDecodingError {
            throw HoardError.corruptRecord(collection: name, key: describeKey(key), reason: "\(error)")
        } catch {
            throw HoardError.decoding(collection: name, key: describeKey(key), version: header.version, underlying: error)
        }
    }

    // MARK: Writing

    /// Stores `model` under its ID, replacing what was there, in a transaction of its own.
    public func put(_ model: Model, expiresAt: Int64? = nil) throws {
        try store.environment.write { txn in try put(model, expiresAt: expiresAt, in: txn) }
    }

    /// Stores `models`, all in one transaction.
    public func put(_ models: some Sequence<Model>, expiresAt: Int64? = nil) throws {
        try store.environment.write { txn in
            for model in models { try put(model, expiresAt: expiresAt, in: txn) }
        }
    }

    /// Stores `model` in `txn`. With `insertOnly`, an existing record is an error (`LMDBError` keyExists).
    public func put(_ model: Model, expiresAt: Int64? = nil, insertOnly: Bool = false, in txn: borrowing WriteTransaction) throws {
        let key = try keyBytes(model.id)
        let payload: [UInt8]
        do {
            payload = try encoder.encode(model)
        } catch {
            throw HoardError.encoding(collection: name, key: describeKey(key), underlying: error)
        }
        let header = RecordHeader(version: currentVersion, writtenAt: store.options.clock(), expiresAt: expiresAt)
        try txn.reserve(RecordHeader.size + payload.count, forKey: key, in: database, options: insertOnly ? .noOverwrite : []) { record in
            payload.withUnsafeBytes { header.write(payload: $0, into: record) }
        }
    }

    /// Removes the record under `id`; returns whether there was one.
    @discardableResult
    public func delete(_ id: Model.ID) throws -> Bool {
        let key = try keyBytes(id)
        return try store.environment.write { txn in try txn.delete(key, in: database) }
    }

    /// Removes the record under `id` in `txn`.
    @discardableResult
    public func delete(_ id: Model.ID, in txn: borrowing WriteTransaction) throws -> Bool {
        try txn.delete(try keyBytes(id), in: database)
    }

    /// Removes every record.
    public func deleteAll() throws {
        try store.environment.write { txn in try txn.clear(database) }
    }

    func keyBytes(_ id: Model.ID) throws -> [UInt8] {
        let key = id.keyBytes
        guard key.count <= store.environment.maxKeySize else {
            throw HoardError.invalidID(collection: name, reason: "its key has \(key.count) bytes, more than the \(store.environment.maxKeySize) LMDB allows")
        }
        return key
    }
}
