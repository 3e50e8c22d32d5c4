internal import LMDB
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
    // What a collection does is split by concern: reading (HoardCollection+Reading.swift),
    // writing (+Writing), payload coding (+Coding), migrations (+Migration) and synchronize
    // (Synchronize/).
    /// The collection's name (its database is `c:NAME`).
    public let name: String
    /// How long records live when a put does not say; `nil` for forever.
    public let timeToLive: Duration?
    /// ``timeToLive`` in milliseconds, as records store it.
    let timeToLiveMilliseconds: Int64?
    /// What happens to records read in an older version.
    public let migration: MigrationPolicy
    /// How read-through serves records past their expiry (``get(_:timeouts:orFetch:)``).
    public let freshness: Freshness
    /// What this collection's handles share in the process.
    let state: CollectionState
    let store: Store
    let database: Database
    /// Deterministic CBOR: equal models give equal bytes, so changes can be found by comparing bytes.
    let encoder = CBOREncoder(deterministic: true)
    let decoder = CBORDecoder()
    /// The model's declared local versions: the only ones a record may be decoded with.
    let localVersions: Set<Int>
    /// How each local version's payloads number their keys (docs/FORMAT.md).
    let numberings: [Int: CBORKeyNumbering]
    /// Field-by-field coding of the current version's payloads, and of older versions' (`nil`
    /// for a key set with dotted key names, which goes through Codable's containers).
    let currentFields: PayloadFields<Model>?
    let olderFields: [Int: PayloadFields<Model>]
    /// The tables of the model's generated code (``PayloadFields/scanned``, ``PayloadFields/emitted``),
    /// made once here and kept apart so that the common path copies one reference, not a whole
    /// `PayloadFields`.
    let currentScanned: CBORPropertyTable?
    let olderScanned: [Int: CBORPropertyTable]
    /// The table payloads are emitted with: the generated code's, or else the one for recording
    /// `encode(to:)` by field (``emit(_:into:)``), for a flat current key set.
    let currentEmitted: CBORPropertyTable?
    /// Whether `currentEmitted` is the generated code's.
    let emitsGenerated: Bool
    /// Whether puts try recording the model's `encode(to:)` by field (``emit(_:into:)``): until
    /// it first declines. Kept here, not in the state shared by the collections of one name: it
    /// says something of this model type.
    let recordsFields = Atomic<Bool>(true)

    init(
        store: Store, name: String, state: CollectionState, timeToLive: Duration?, freshness: Freshness = Freshness(),
        migration: MigrationPolicy
    ) throws {
        self.store = store
        self.state = state
        self.name = name
        self.timeToLive = timeToLive
        self.freshness = freshness
        state.keepStale(for: freshness)
        timeToLiveMilliseconds = timeToLive?.storedMilliseconds
        self.migration = migration
        let keySets = Model.keySets
        localVersions = Set(keySets.localVersions)
        let databaseName = Store.collectionPrefix + name
        var fields: [Int: PayloadFields<Model>] = [:]
        var numberings: [Int: CBORKeyNumbering] = [:]
        for version in keySets.localVersions {
            let numbering = CBORKeyNumbering.payload(keyNames: try keySets.keyNames(for: .local(version)).values)
            numberings[version] = numbering
            if let layout = try keySets.fieldLayout(for: .local(version)) {
                fields[version] = PayloadFields(layout: layout, numbering: numbering)
            }
        }
        self.numberings = numberings
        currentVersion = keySets.currentVersion
        tagIndex = store.tags.map {
            TagIndex(database: $0, collection: name, maxKeySize: store.environment.maxKeySize)
        }
        currentFields = fields.removeValue(forKey: keySets.currentVersion)
        olderFields = fields
        currentScanned = currentFields?.scanned
        olderScanned = fields.compactMapValues(\.scanned)
        let generated = currentFields?.emitted
        emitsGenerated = generated != nil
        currentEmitted = generated ?? currentFields?.recorded
        try Registry.check(Model.self, collection: name, keyKind: Model.ID.keyKind, in: store)
        if store.options.readOnly {
            database = try store.environment.openDatabase(databaseName)
        } else {
            database = try store.environment.openDatabase(databaseName, create: true)
        }
        // LMDB's own errors about a key name it as the store's do.
        store.environment.describeKeys(of: database) { key in "\(StoredKey(key, kind: Model.ID.keyKind))" }
    }

    /// The model's current local version (kept: reading `Model.keySets` is a call per record).
    let currentVersion: Int
    /// The collection's part of the store's tag index, made once (its key prefixes are the
    /// collection's name); `nil` in a read-only store without the index.
    let tagIndex: TagIndex?

    func keyBytes(_ id: Model.ID) throws -> [UInt8] {
        let key = id.keyBytes
        try checkKeySize(key.count)
        return key
    }

    func checkKeySize(_ count: Int) throws {
        guard count <= store.environment.maxKeySize else {
            throw HoardError.invalidID(
                collection: name,
                reason: "its key has \(count) bytes, more than the \(store.environment.maxKeySize) LMDB allows")
        }
    }

    /// `bytes` as the key of one of this collection's records, for errors and reports.
    func storedKey(_ bytes: some Swift.Collection<UInt8>) -> StoredKey { StoredKey(bytes, kind: Model.ID.keyKind) }
}
