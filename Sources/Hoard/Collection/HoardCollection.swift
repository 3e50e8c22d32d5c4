public import LMDB
public import VariableCoding
internal import CBOR
internal import Synchronization

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
    /// How long records live when a put does not say, in milliseconds; `nil` for forever.
    public let timeToLive: Int64?
    /// What happens to records read in an older version.
    public let migration: MigrationPolicy
    /// Keys of records read in an older version, to rewrite (with ``MigrationPolicy/lazy``).
    let pendingMigrations = Mutex<Set<[UInt8]>>([])
    let store: Store
    let database: Database
    /// Deterministic CBOR: equal models give equal bytes, so changes can be found by comparing bytes.
    let encoder = CBOREncoder(deterministic: true)
    let decoder = CBORDecoder()
    /// The model's declared local versions: the only ones a record may be decoded with.
    let localVersions: Set<Int>
    /// Field-by-field coding of the current version's payloads, and of older versions' (`nil`
    /// for a key set with dotted key names, which goes through Codable's containers).
    let currentFields: PayloadFields<Model>?
    let olderFields: [Int: PayloadFields<Model>]
    /// The tables of the model's generated code (``PayloadFields/scanned``, ``PayloadFields/emitted``),
    /// made once here and kept apart so that the common path copies one reference, not a whole
    /// `PayloadFields`.
    let currentScanned: CBORPropertyTable?
    let olderScanned: [Int: CBORPropertyTable]
    let currentEmitted: CBORPropertyTable?

    init(store: Store, name: String, timeToLive: Int64?, migration: MigrationPolicy) throws {
        self.store = store
        self.name = name
        self.timeToLive = timeToLive
        self.migration = migration
        let keySets = Model.keySets
        localVersions = Set(keySets.localVersions)
        let databaseName = Store.collectionPrefix + name
        var fields: [Int: PayloadFields<Model>] = [:]
        for version in keySets.localVersions {
            if let layout = try keySets.fieldLayout(for: .local(version)) { fields[version] = PayloadFields(layout: layout) }
        }
        currentVersion = keySets.currentVersion
        currentFields = fields.removeValue(forKey: keySets.currentVersion)
        olderFields = fields
        currentScanned = currentFields?.scanned
        olderScanned = fields.compactMapValues(\.scanned)
        currentEmitted = currentFields?.emitted
        try Registry.check(Model.self, collection: name, keyKind: Model.ID.keyKind, in: store)
        if store.options.readOnly {
            database = try store.environment.openDatabase(databaseName)
        } else {
            database = try store.environment.openDatabase(databaseName, create: true)
        }
    }

    /// The model's current local version (kept: reading `Model.keySets` is a call per record).
    let currentVersion: Int

    // MARK: Reading

    /// The model stored under `id`, or `nil`.
    public func get(_ id: Model.ID) throws -> Model? {
        try store.environment.read { txn in try get(id, in: txn) }
    }

    /// The model stored under `id` as `txn` sees it, or `nil` (also when it has expired).
    public func get<Access>(_ id: Model.ID, in txn: borrowing Transaction<Access>) throws -> Model? {
        // The key is lent from the stack, and the record's bytes are taken out of the closure:
        // they stay valid while `txn` is open and unchanged, which it is for the rest of this
        // call. (A closure returning `Model?` would make this unspecialized generic code look up
        // the metadata of `Model?` at run time on every call, which costs more than LMDB's own
        // lookup.)
        let found = try id.withKeyBytes { key in
            try checkKeySize(key.count)
            return try txn.withValue(forKey: key, in: database, { $0 })
        }
        guard let record = found else { return nil }
        return try decode(record, key: { id.keyBytes }, now: store.options.clock())
    }

    /// Whether a live (unexpired) record is stored under `id`; reads its header only.
    public func contains(_ id: Model.ID) throws -> Bool {
        guard let header = try header(of: id) else { return false }
        return !header.isExpired(at: store.options.clock())
    }

    /// The number of records, expired ones not yet purged included (read from the B-tree, no scan).
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
    /// Expired records are left out; the first damaged record throws.
    public func scan(keys: KeyRange, reverse: Bool = false, limit: Int = .max) throws -> [Model] {
        let result = try scan(keys: keys, reverse: reverse, limit: limit, skippingDamaged: false)
        return result.models
    }

    /// Visits the models whose key bytes lie in `keys` one at a time, inside one read snapshot,
    /// without building an array: for large collections. Expired records are skipped; the first
    /// damaged record throws. Return ``IterationStep/stop`` from `body` to end early.
    public func forEach(keys: KeyRange = .all, reverse: Bool = false, _ body: (Model) throws -> IterationStep) throws {
        let now = store.options.clock()
        try store.environment.read { txn in
            try txn.forEach(in: database, range: keys, reverse: reverse) { key, record in
                guard let model = try decode(record, key: { Array(key) }, now: now) else { return .next }
                return try body(model)
            }
        }
    }

    /// Like ``scan(keys:reverse:limit:)``, but a damaged or undecodable record does not stop the
    /// scan: it is left out and reported in ``ScanResult/damaged``. Nothing is deleted.
    public func scanSkippingDamaged(keys: KeyRange = .all, reverse: Bool = false, limit: Int = .max) throws -> ScanResult<Model> {
        try scan(keys: keys, reverse: reverse, limit: limit, skippingDamaged: true)
    }

    func scan(keys: KeyRange, reverse: Bool, limit: Int, skippingDamaged: Bool) throws -> ScanResult<Model> {
        let now = store.options.clock()
        return try store.environment.read { txn in
            var result = ScanResult<Model>(models: [], damaged: [])
            guard limit > 0 else { return result }
            try txn.forEach(in: database, range: keys, reverse: reverse) { key, record in
                do {
                    if let model = try decode(record, key: { Array(key) }, now: now) { result.models.append(model) }
                } catch let error as HoardError where skippingDamaged {
                    store.logger.warning("skipped a damaged record", metadata: ["collection": "\(name)", "error": "\(error)"])
                    result.damaged.append(error)
                }
                return result.models.count < limit ? .next : .stop
            }
            return result
        }
    }

    /// Deletes every expired record, in one transaction; returns how many.
    @discardableResult
    public func purgeExpired() throws -> Int {
        let now = store.options.clock()
        let purged = try store.environment.write { txn in
            var purged = 0
            try txn.withCursor(in: database) { cursor in
                var entry = try cursor.first()
                while let current = entry {
                    // A record whose header cannot be read is damaged, not expired: it stays.
                    if let header = try? RecordHeader.parse(current.value).0, header.isExpired(at: now) {
                        try cursor.deleteCurrent()
                        purged += 1
                    }
                    entry = try cursor.next()
                }
            }
            return purged
        }
        if purged > 0 { store.logger.info("purged expired records", metadata: ["collection": "\(name)", "count": "\(purged)"]) }
        return purged
    }

    /// The header of the record under `id`, or `nil`: version, write time and expiry, unchecked
    /// against the payload's decoding.
    public func header(of id: Model.ID) throws -> RecordHeader? {
        let key = try keyBytes(id)
        return try store.environment.read { txn in
            try txn.withValue(forKey: key, in: database) { record in
                do throws(RecordDamage) {
                    return try RecordHeader.parse(record).0
                } catch {
                    throw HoardError.corruptRecord(collection: name, key: describeKey(key), reason: error.reason)
                }
            }
        } ?? nil
    }

    /// Decodes one record: header, checksum, version, payload; `nil` when it has expired at `now`.
    /// `key` gives the record's key, for errors and lazy migrations only.
    /// `now` is read only for a record with an expiry (a clock read costs some 25 ns).
    func decode(_ record: UnsafeRawBufferPointer, key: () -> [UInt8], now: @autoclosure () -> Int64) throws -> Model? {
        let header: RecordHeader
        let payload: UnsafeRawBufferPointer
        do throws(RecordDamage) {
            (header, payload) = try RecordHeader.parse(record)
        } catch {
            throw HoardError.corruptRecord(collection: name, key: describeKey(key()), reason: error.reason)
        }
        if header.expiresAt != nil && header.isExpired(at: now()) { return nil }
        guard header.version <= currentVersion else {
            throw HoardError.newerRecord(collection: name, key: describeKey(key()), version: header.version, current: currentVersion)
        }
        guard header.version == currentVersion || localVersions.contains(header.version) else {
            throw HoardError.corruptRecord(collection: name, key: describeKey(key()), reason: "key-set version \(header.version) is not one of \(Model.self)'s local versions")
        }
        do {
            let model = try decodePayload(payload, version: header.version)
            if header.version < currentVersion && migration == .lazy {
                let key = key()
                pendingMigrations.withLock { pending in
                    if pending.count < Self.pendingLimit { pending.insert(key) }
                }
            }
            return model
        } catch let error as CBORDecodingError {
            throw HoardError.corruptRecord(collection: name, key: describeKey(key()), reason: "\(error)")
        } catch {
            throw HoardError.decoding(collection: name, key: describeKey(key()), version: header.version, underlying: error)
        }
    }

    // MARK: Writing

    /// Stores `model` under its ID, replacing what was there, in a transaction of its own
    /// (which also rewrites records waiting for a lazy migration).
    public func put(_ model: Model, expiry: Expiry = .collectionDefault) throws {
        try store.environment.write { txn in
            try migratePending(in: txn)
            try put(model, expiry: expiry, in: txn)
        }
    }

    /// Stores `models`, all in one transaction, as a batch (see the `put(_:expiry:insertOnly:in:)` of many).
    public func put(_ models: some Sequence<Model>, expiry: Expiry = .collectionDefault) throws {
        try store.environment.write { txn in
            try migratePending(in: txn)
            try put(models, expiry: expiry, in: txn)
        }
    }

    /// Stores `model` in `txn`. With `insertOnly`, an existing record is an error (`LMDBError` keyExists).
    public func put(_ model: Model, expiry: Expiry = .collectionDefault, insertOnly: Bool = false, in txn: borrowing WriteTransaction) throws {
        let batch = PutBatch(header: header(for: expiry), options: insertOnly ? .noOverwrite : [])
        guard let table = currentEmitted else { return try putOrdinarily(model, batch, in: txn) }
        try encoder.withFieldEmitting(table: table) { session in try put(model, batch, &session, in: txn) }
    }

    /// Stores `models` in `txn`, as one put each would, with the work that is the same for every
    /// record done once: the clock is read once (the records of one call share their write time,
    /// and an expiry `after` a duration counts from it), and generated code writes every payload
    /// into one buffer. With `insertOnly`, an existing record is an error (`LMDBError` keyExists),
    /// and what the call stored before it stays in `txn`.
    public func put(_ models: some Sequence<Model>, expiry: Expiry = .collectionDefault, insertOnly: Bool = false, in txn: borrowing WriteTransaction) throws {
        let batch = PutBatch(header: header(for: expiry), options: insertOnly ? .noOverwrite : [])
        guard let table = currentEmitted else {
            for model in models { try putOrdinarily(model, batch, in: txn) }
            return
        }
        try encoder.withFieldEmitting(table: table) { session in
            // Models in contiguous memory (an array) are visited by index, without the generic
            // iterator (about a hundred instructions a record).
            let done: Void? = try models.withContiguousStorageIfAvailable { models in
                for index in models.indices { try put(models[index], batch, &session, in: txn) }
            }
            if done == nil {
                for model in models { try put(model, batch, &session, in: txn) }
            }
        }
    }

    /// What the records of one put call share.
    private struct PutBatch {
        let header: RecordHeader
        let options: PutOptions
    }

    /// The header of a record written now with `expiry`.
    @inline(__always)
    private func header(for expiry: Expiry) -> RecordHeader {
        let now = store.options.clock()
        let expiresAt: Int64? = switch expiry {
        case .collectionDefault: timeToLive.map { now + $0 }
        case .never: nil
        case .at(let time): time
        case .after(let duration): now + duration
        }
        return RecordHeader(version: currentVersion, writtenAt: now, expiresAt: expiresAt)
    }

    /// Stores one model of a batch through its generated code, or the ordinary way when that declines.
    private func put(_ model: Model, _ batch: PutBatch, _ session: inout CBOREmitSession, in txn: borrowing WriteTransaction) throws {
        try model.id.withKeyBytes { key in
            try checkKeySize(key.count)
            // Generated code cannot fail (it declines instead), so its payload goes straight to
            // LMDB, without the layers that name the key in an encoding error.
            guard let payload = session.emit({ model.emit(into: &$0) }) else {
                return try withPayload(of: model, key: key, ordinarily: true) { try store($0, batch, key: key, in: txn) }
            }
            try store(payload, batch, key: key, in: txn)
        }
    }

    /// Stores one model of a batch through its `encode(to:)`.
    private func putOrdinarily(_ model: Model, _ batch: PutBatch, in txn: borrowing WriteTransaction) throws {
        try model.id.withKeyBytes { key in
            try checkKeySize(key.count)
            try withPayload(of: model, key: key, ordinarily: true) { try store($0, batch, key: key, in: txn) }
        }
    }

    /// Writes a record of `payload` under `key`, in the space LMDB reserves for it.
    private func store(_ payload: UnsafeRawBufferPointer, _ batch: PutBatch, key: UnsafeRawBufferPointer, in txn: borrowing WriteTransaction) throws {
        try txn.reserve(RecordHeader.size + payload.count, forKey: key, in: database, options: batch.options) { record in
            batch.header.write(payload: payload, into: record)
        }
    }

    /// Removes the record under `id`; returns whether there was one.
    @discardableResult
    public func delete(_ id: Model.ID) throws -> Bool {
        let key = try keyBytes(id)
        return try store.environment.write { txn in
            try migratePending(in: txn)
            return try txn.delete(key, in: database)
        }
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

    /// Encodes `model`'s payload and hands its bytes to `body` (valid only inside it) without
    /// making an array of them. An encoding error is thrown as ``HoardError/encoding(collection:key:underlying:)``
    /// naming `key`; what `body` throws comes out unchanged. With `ordinarily`, generated code is
    /// not tried (the caller's has declined already).
    func withPayload<R>(of model: Model, key: UnsafeRawBufferPointer, ordinarily: Bool = false, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        do {
            func forwarding(_ raw: UnsafeRawBufferPointer) throws -> R {
                do { return try body(raw) } catch { throw Forwarded(error: error) }
            }
            return try ordinarily ? encodeOrdinarily(model, forwarding) : encode(model, forwarding)
        } catch let forwarded as Forwarded {
            throw forwarded.error
        } catch {
            throw HoardError.encoding(collection: name, key: describeKey(key), underlying: error)
        }
    }

    /// Encodes a payload: deterministic CBOR with the current local key set. (`put` also tries
    /// the model's generated code itself, before this, to hand its bytes straight to LMDB.)
    ///
    /// The key set is chosen for the call (`withStorageKeySet`, a thread-local slot) rather than
    /// through the coder's `userInfo`: looking `userInfo` up and casting its `Any` cost about 600
    /// instructions per model, and a caller's own `withKeySet` around a store call would take
    /// precedence over `userInfo` (the innermost choice wins this way). It is `.local(current)`,
    /// not `.currentLocal`: a nested VariablyCodable value is then written with the key set
    /// reading will use (the record stamps only the outer version), even when the nested type
    /// has a newer version of its own.
    ///
    /// A model's generated code (`emit`, from `@VariablyCoded`) goes first; otherwise a flat key
    /// set is encoded field by field (``PayloadFields``). The bytes are the same as through
    /// `Encodable` either way, which the tests check.
    func encode<R>(_ model: Model, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        // Generated code writes plain values only: no nested model needs the key set chosen.
        guard let table = currentEmitted else { return try encodeOrdinarily(model, body) }
        return try encoder.emitFields(table: table, { model.emit(into: &$0) }, reading: body, otherwise: { try encodeOrdinarily(model, body) })
    }

    /// Encodes through the model's `encode(to:)`.
    private func encodeOrdinarily<R>(_ model: Model, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try withStorageKeySet(version: currentVersion) {
            guard let fields = currentFields else { return try encoder.encode(model).withUnsafeBytes(body) }
            return try encoder.encodeFields(keys: fields.keys, { try model.encode(fields: $0, layout: fields.layout) }, reading: body)
        }
    }

    /// Decodes a payload written with local key set `version` (one of `localVersions`): by the
    /// model's generated code (`scan`, from `@VariablyCoded`) when it has some and does not
    /// decline, else through its `init(from:)`.
    ///
    /// The key set stays chosen (`withKeySet`) for nested `VariablyCodable` values, which are
    /// decoded through Codable.
    func decodePayload(_ payload: UnsafeRawBufferPointer, version: Int) throws -> Model {
        // Generated code reads plain values only: no nested model needs the key set chosen. (The
        // scanner holds the table unowned; the collection holds it for as long as it lives.)
        if let table = version == currentVersion ? currentScanned : olderScanned[version], var scanner = CBORFieldScanner(payload, table: table) {
            do throws(FieldScanDeclined) {
                let model = try Model.scan(&scanner)
                if scanner.isComplete { return model }
            } catch {
                // Declined: read the ordinary way, which also gives any error.
            }
        }
        return try withKeySet(.local(version)) {
            guard let fields = version == currentVersion ? currentFields : olderFields[version] else { return try decoder.decode(Model.self, from: payload) }
            return try decoder.decodeFields(from: payload, keys: fields.keys) { try Model(fields: $0, layout: fields.layout) }
        }
    }

    func keyBytes(_ id: Model.ID) throws -> [UInt8] {
        let key = id.keyBytes
        try checkKeySize(key.count)
        return key
    }

    func checkKeySize(_ count: Int) throws {
        guard count <= store.environment.maxKeySize else {
            throw HoardError.invalidID(collection: name, reason: "its key has \(count) bytes, more than the \(store.environment.maxKeySize) LMDB allows")
        }
    }
}

/// When a stored record stops being visible.
public enum Expiry: Sendable, Hashable {
    /// The collection's time to live, if it has one, else never.
    case collectionDefault
    /// Never.
    case never
    /// At a time, in milliseconds since 1970.
    case at(milliseconds: Int64)
    /// After a duration from now, in milliseconds.
    case after(milliseconds: Int64)
}

/// The models a scan could read, and the records it could not.
public struct ScanResult<Model> {
    /// The models, in scan order.
    public var models: [Model]
    /// The damaged or undecodable records met on the way, each naming collection, key and cause.
    public var damaged: [HoardError]
}

/// What a collection does with a record it reads in an older key-set version.
public enum MigrationPolicy: Sendable, Hashable {
    /// Leave it as it is; it is migrated on every read.
    case never
    /// Remember it and rewrite it in the current version in the collection's next write
    /// transaction, or at ``HoardCollection/flushMigrations()``.
    case lazy
}

/// How far an eager ``HoardCollection/migrate(batchSize:progress:)`` has come.
public struct MigrationProgress: Sendable, Hashable {
    /// Records looked at in this call.
    public var scanned = 0
    /// Records rewritten in the current version in this call.
    public var migrated = 0
    /// Records left as they are because they cannot be migrated here (damaged, or from a newer version).
    public var failed = 0
    /// Whether the whole collection has been gone through.
    public var finished = false
}

extension HoardCollection {
    /// How many keys a lazy migration remembers at most; more are migrated on a later read.
    static var pendingLimit: Int { 100_000 }

    /// Rewrites, in `txn`, the records remembered for a lazy migration; returns how many it rewrote.
    @discardableResult
    func migratePending(in txn: borrowing WriteTransaction) throws -> Int {
        guard migration == .lazy else { return 0 }
        let keys = pendingMigrations.withLock { pending -> Set<[UInt8]> in
            defer { pending.removeAll() }
            return pending
        }
        var migrated = 0
        for key in keys.sorted(by: keyPrecedes) where try rewriteIfOld(key, in: txn) == .migrated {
            migrated += 1
        }
        return migrated
    }

    /// Rewrites the records a lazy migration remembered, in a transaction of its own.
    @discardableResult
    public func flushMigrations() throws -> Int {
        try store.environment.write { txn in try migratePending(in: txn) }
    }

    enum RewriteOutcome { case current, migrated, failed }

    /// What a migration finds under a key.
    enum StoredRecord<Value> { case damaged, upToDate(newer: Bool), old(RecordHeader, Value) }

    /// Rewrites the record under `key` in the current version if it is older, keeping its
    /// write time and expiry (a migration changes the spelling, not the content).
    func rewriteIfOld(_ key: [UInt8], in txn: borrowing WriteTransaction) throws -> RewriteOutcome {
        let found: StoredRecord<Model>? = try txn.withValue(forKey: key, in: database) { record -> StoredRecord<Model> in
            guard let (header, payload) = try? RecordHeader.parse(record) else { return .damaged }
            if header.version >= currentVersion { return .upToDate(newer: header.version > currentVersion) }
            guard localVersions.contains(header.version), let model = try? decodePayload(payload, version: header.version) else { return .damaged }
            return .old(header, model)
        }
        let header: RecordHeader
        let model: Model
        switch found {
        case nil: return .current  // deleted meanwhile
        case .damaged: return .failed
        case .upToDate(let newer): return newer ? .failed : .current
        case .old(let h, let m): (header, model) = (h, m)
        }
        let rewritten = RecordHeader(version: currentVersion, writtenAt: header.writtenAt, expiresAt: header.expiresAt)
        try key.withUnsafeBytes { rawKey in
            try withPayload(of: model, key: rawKey) { payload in
                try txn.reserve(RecordHeader.size + payload.count, forKey: key, in: database) { record in
                    rewritten.write(payload: payload, into: record)
                }
            }
        }
        return .migrated
    }

    /// Rewrites every record of an older version in the current one, in batches of
    /// `batchSize` records per write transaction.
    ///
    /// Each batch commits together with a checkpoint in the meta database, so a migration that
    /// is stopped — `progress` returning `false`, an error, or the process being killed — goes
    /// on from the last committed batch when `migrate` is called again. Records that cannot be
    /// migrated here (damaged, or written by a newer version) are counted and left alone.
    ///
    /// - Parameter progress: called after each batch with the totals so far; return `false` to stop.
    @discardableResult
    public func migrate(batchSize: Int = 1_000, progress: (MigrationProgress) -> Bool = { _ in true }) throws -> MigrationProgress {
        precondition(batchSize > 0, "migrate: batchSize must be positive")
        guard let meta = store.meta else { return MigrationProgress(finished: true) }
        let checkpointKey = Array("migrate:\(name)".utf8)
        var totals = MigrationProgress()
        while true {
            let batch = try store.environment.write { txn -> (MigrationProgress, Bool) in
                var step = MigrationProgress()
                let start = try txn.value(forKey: checkpointKey, in: meta)
                let range = start.map { KeyRange(from: .exclusive($0)) } ?? .all
                let keys = try txn.entries(in: database, range: range, limit: batchSize).map(\.key)
                for key in keys {
                    step.scanned += 1
                    switch try rewriteIfOld(key, in: txn) {
                    case .current: break
                    case .migrated: step.migrated += 1
                    case .failed: step.failed += 1
                    }
                }
                let done = keys.count < batchSize
                if done {
                    try txn.delete(checkpointKey, in: meta)
                } else if let last = keys.last {
                    try txn.put(last, forKey: checkpointKey, in: meta)
                }
                return (step, done)
            }
            totals.scanned += batch.0.scanned
            totals.migrated += batch.0.migrated
            totals.failed += batch.0.failed
            totals.finished = batch.1
            store.logger.debug("migration batch", metadata: [
                "collection": "\(name)", "scanned": "\(totals.scanned)", "migrated": "\(totals.migrated)", "failed": "\(totals.failed)",
            ])
            if batch.1 {
                store.logger.info("migrated collection", metadata: [
                    "collection": "\(name)", "migrated": "\(totals.migrated)", "failed": "\(totals.failed)", "version": "\(currentVersion)",
                ])
            }
            if batch.1 || !progress(totals) { return totals }
        }
    }
}
