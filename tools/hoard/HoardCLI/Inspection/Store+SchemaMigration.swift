import CBOR
@_spi(LMDB) package import Hoard
import LMDB

/// What a migration by key names did to one collection (or, in a dry run, would do).
package struct SchemaMigrationResult: Sendable {
    /// A record the migration left as it is, and why: its change needs the app's code (or it is damaged).
    package struct LeftRecord: Sendable {
        /// The record's key.
        package var key: StoredKey
        /// Why it was left: the change it needs, or the damage found.
        package var reason: String
    }

    /// The collection's name.
    package var collection: String
    /// Records rewritten in the current version.
    package var migrated = 0
    /// Records in the current version (or a newer one) already.
    package var upToDate = 0
    /// Records left as they are.
    package var left: [LeftRecord] = []
}

extension Store {
    /// Rewrites `collection`'s records of older key-set versions in the current version, where
    /// the registry's key names suffice: without the app's code only spelling can change.
    ///
    /// A key renamed between the versions is renamed, a property the current version dropped is
    /// dropped; write and expiry times are kept. A record is left as it is, and listed with the
    /// reason, when the current version has a property the record's version lacks (its value must
    /// come from the app), when a value's CBOR type is one no current-version record holds for that
    /// property (a type change: the app's `init(from:)` converts it), or when a nested model's key
    /// names or an enum's aliased raw values differ between the two versions. Damaged records are
    /// skipped (`hoard verify` reports them).
    ///
    /// Each batch of `batchSize` records is read in a snapshot and then written in a short
    /// transaction that replaces a record only if it still holds the bytes read, so a live
    /// writer's newer record wins and is never blocked for longer than one batch.
    ///
    /// - Parameters:
    ///   - collection: the collection's name in the store.
    ///   - batchSize: how many records one snapshot reads and one write transaction replaces.
    ///   - dryRun: count what would change; write nothing.
    ///   - beforeBatch: called before each batch; throw from it to stop (what earlier batches
    ///     wrote stays written).
    /// - Throws: ``HoardError/corruptRegistry(collection:reason:)``, ``HoardError/storage(_:)``, or what `beforeBatch` throws.
    package func migrateByKeyNames(
        _ collection: String, dryRun: Bool = false, batchSize: Int = 10_000, beforeBatch: () throws -> Void = {}
    ) throws -> SchemaMigrationResult {
        precondition(batchSize > 0, "migrateByKeyNames: batchSize must be positive")
        var outcome = SchemaMigrationResult(collection: collection)
        guard let schema = try schema(of: collection), let database = try recordDatabase(of: collection),
            let current = schema.versions[schema.currentVersion]
        else { return outcome }
        let keyKind = try self.keyKind(of: schema)
        let keys = PayloadKeys(schema)
        let types = try currentTypes(schema, keys, database)
        var resume: [UInt8]? = nil
        repeat {
            try beforeBatch()
            var pending: [(key: [UInt8], old: [UInt8], new: [UInt8])] = []
            var next: [UInt8]? = nil
            try readLMDB { txn in
                var seen = 0
                let range = resume.map { LMDB.KeyRange(from: .exclusive($0), to: nil) } ?? .all
                try txn.forEach(in: database, range: range) { key, record in
                    seen += 1
                    if seen > batchSize { next = Array(key); return .stop }
                    guard let (header, payload) = try? RecordHeader.parse(record) else { return .next }
                    // Older versions, and the current one in an older record format (keys as text).
                    guard header.version < schema.currentVersion || !header.isCurrentFormat else {
                        outcome.upToDate += 1
                        return .next
                    }
                    let left = { reason in
                        outcome.left.append(.init(key: StoredKey(key, kind: keyKind), reason: reason))
                    }
                    guard let old = schema.versions[header.version],
                        let value = try? CBORValue(decoding: keys.textKeyed(payload, header: header))
                    else {
                        left("version \(header.version) is unknown to the registry or its payload is damaged")
                        return .next
                    }
                    if let reason = blocker(value, old: old, current: current, version: header.version, types: types)
                        ?? nestedOrEnumBlocker(schema, version: header.version)
                    {
                        left(reason)
                        return .next
                    }
                    let renamed = schema.renaming(value, from: header.version).value
                    let rewritten = RecordHeader(
                        version: schema.currentVersion, writtenAt: header.writtenAt, expiresAt: header.expiresAt)
                    guard
                        let numbered = try? renamed.encoded().withUnsafeBytes({ bytes throws(RecordDamage) in
                            try keys.numbered(bytes, version: schema.currentVersion)
                        })
                    else {
                        left("its renamed payload has keys the current version does not name")
                        return .next
                    }
                    pending.append((Array(key), Array(record), rewritten.record(with: numbered)))
                    return .next
                }
            }
            if dryRun {
                outcome.migrated += pending.count
            } else if !pending.isEmpty {
                outcome.migrated += try writeLMDB { txn in
                    var written = 0
                    // A migration changes the spelling, not the content: observers are not told.
                    var writer = try writer(of: collection, database: database, keyKind: keyKind, in: txn)
                    for entry in pending where try txn.value(forKey: entry.key, in: database) == entry.old {
                        try writer.store(record: entry.new, forKey: entry.key, told: false, in: txn)
                        written += 1
                    }
                    try writer.finish(in: txn)
                    return written
                }
            }
            resume = next
        } while resume != nil
        if outcome.migrated > 0 && !dryRun {
            logger.info(
                "migrated records by key names",
                metadata: [
                    "collection": "\(collection)", "migrated": "\(outcome.migrated)", "left": "\(outcome.left.count)",
                ])
        }
        return outcome
    }

    /// Why a record cannot be migrated from names alone, or `nil`.
    private func blocker(
        _ value: CBORValue, old: [String: String], current: [String: String], version: Int, types: [String: Set<UInt8>]
    ) -> String? {
        for property in current.keys.sorted() where old[property] == nil {
            return "property '\(property)' is new since version \(version): its value must come from the app"
        }
        for (property, oldName) in old.sorted(by: { $0.key < $1.key }) where current[property] != nil {
            guard let found = lookup(value, keyPath(oldName)) else { continue }
            guard let seen = types[property] else {
                return "no current-version record holds property '\(property)' to compare its type with"
            }
            if !seen.contains(majorType(found)) {
                return
                    "property '\(property)' holds \(typeName(majorType(found))) here but \(seen.sorted().map(typeName).joined(separator: "/")) in current records: a type change for the app's code"
            }
        }
        return nil
    }

    /// Why nested models or enums stop a record from being migrated, or `nil`: their maps are
    /// written in another version of the nested type than current records' (the record's header
    /// stamps only the outer version) and the key names differ, or an enum's aliases differ
    /// between the two versions. Only the app's code converts those values.
    private func nestedOrEnumBlocker(_ schema: CollectionSchema, version: Int) -> String? {
        for nested in schema.nested {
            let from = nested.versionUsed[version], to = nested.versionUsed[schema.currentVersion]
            guard from != to, from.flatMap({ nested.keyNames[$0] }) != to.flatMap({ nested.keyNames[$0] }) else {
                continue
            }
            let name: (Int?) -> String = { $0.map { "version \($0)" } ?? "no version" }
            return
                "nested \(nested.type) at '\(nested.path)' has \(name(from)) of its keys here and \(name(to)) in current records: its maps need the app's code"
        }
        // An enum's aliases apply to exactly one version: other aliases mean other raw values.
        for enumeration in schema.enums
        where (enumeration.aliases[version] ?? [:]) != (enumeration.aliases[schema.currentVersion] ?? [:]) {
            return
                "enum \(enumeration.type) at '\(enumeration.path)' writes other raw values in version \(version) than in the current one: its values need the app's code"
        }
        return nil
    }

    /// The CBOR types current-version records hold, per property: the yardstick for type changes.
    private func currentTypes(
        _ schema: CollectionSchema, _ keys: PayloadKeys, _ database: Database
    ) throws -> [String: Set<UInt8>] {
        guard let current = schema.versions[schema.currentVersion] else { return [:] }
        return try readLMDB { txn in
            var types: [String: Set<UInt8>] = [:]
            try txn.forEach(in: database) { _, record in
                guard RecordHeader.peekVersion(record) == schema.currentVersion,
                    let (header, payload) = try? RecordHeader.parse(record),
                    let value = try? CBORValue(decoding: keys.textKeyed(payload, header: header))
                else { return .next }
                for (property, name) in current {
                    if let found = lookup(value, keyPath(name)) {
                        types[property, default: []].insert(majorType(found))
                    }
                }
                return .next
            }
            return types
        }
    }
}

/// The CBOR major type of a value (7 for simple values and floats), the unit of "same type".
private func majorType(_ value: CBORValue) -> UInt8 {
    switch value {
    case .unsigned, .negative: 0  // one integer type: the sign is not a type change
    case .bytes: 2
    case .text: 3
    case .array: 4
    case .map: 5
    case .tagged: 6
    case .bool: 20
    case .null, .undefined: 22
    case .simple: 7
    case .float: 25
    }
}

private func typeName(_ type: UInt8) -> String {
    switch type {
    case 0: "an integer"
    case 2: "a byte string"
    case 3: "text"
    case 4: "an array"
    case 5: "a map"
    case 6: "a tagged value"
    case 20: "a boolean"
    case 22: "null"
    case 25: "a float"
    default: "a simple value"
    }
}
