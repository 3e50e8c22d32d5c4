public import LMDB
public import VariableCoding
internal import CBOR

/// A collection as the store's registry describes it: enough for a tool without the app's Swift
/// types to name fields, map keys across versions and tell which records are behind.
public struct CollectionSchema: Sendable, Hashable {
    /// The collection's name.
    public var name: String
    /// The model's Swift type name.
    public var type: String
    /// The highest current local key-set version any code opened the collection with.
    public var currentVersion: Int
    /// How IDs are encoded; `nil` when the entry was written before Hoard recorded it.
    public var keyKind: KeyKind?
    /// Per local version: key name by property.
    public var versions: [Int: [String: String]]
    /// The `VariablyCodable` models nested in the model's properties and the key sets their
    /// maps are written with, sorted by path; empty when there are none or the entry was written
    /// before Hoard recorded them.
    public var nested: [NestedKeySets]
    /// The `VariableEnum`s in the model and its nested models and the raw values each version
    /// writes for aliased cases, sorted by path; empty when there are none or the entry predates them.
    public var enums: [StoredEnumAliases]

    /// Every property of any version, sorted.
    public var properties: [String] { Set(versions.values.flatMap(\.keys)).sorted() }

    /// The key name `property` has in `version`, or `nil` when that version does not have it.
    public func keyName(of property: String, in version: Int) -> String? { versions[version]?[property] }

    public init(
        name: String, type: String, currentVersion: Int, keyKind: KeyKind?, versions: [Int: [String: String]],
        nested: [NestedKeySets] = [], enums: [StoredEnumAliases] = []
    ) {
        self.name = name
        self.type = type
        self.currentVersion = currentVersion
        self.keyKind = keyKind
        self.versions = versions
        self.nested = nested.sorted { $0.path < $1.path }
        self.enums = enums.sorted { $0.path < $1.path }
    }

    init(name: String, entry: RegistryEntry) {
        self.name = name
        type = entry.type
        currentVersion = entry.current
        keyKind = entry.key.flatMap(KeyKind.init(rawValue:))
        versions = versionKeyed(entry.versions)
        nested = (entry.nested ?? [:]).map { path, nested in
            NestedKeySets(path: path, type: nested.type, versionUsed: versionKeyed(nested.used), keyNames: versionKeyed(nested.versions))
        }.sorted { $0.path < $1.path }
        enums = (entry.enums ?? [:]).map { path, enumeration in
            StoredEnumAliases(path: path, type: enumeration.type, aliases: versionKeyed(enumeration.aliases))
        }.sorted { $0.path < $1.path }
    }
}

/// A registry map keyed by version numbers as text, keyed by the numbers (text that is not one is skipped).
private func versionKeyed<Value>(_ map: [String: Value]) -> [Int: Value] {
    Dictionary(map.compactMap { version, value in Int(version).map { ($0, value) } }, uniquingKeysWith: { first, _ in first })
}

/// The other way: version numbers as text, as the registry keeps them.
private func textKeyed<Value>(_ map: [Int: Value]) -> [String: Value] {
    Dictionary(uniqueKeysWithValues: map.map { (String($0.key), $0.value) })
}

extension CollectionSchema {
    var entry: RegistryEntry {
        RegistryEntry(
            type: type, current: currentVersion,
            versions: textKeyed(versions), key: keyKind?.rawValue,
            nested: nested.isEmpty ? nil : Dictionary(nested.map { nested in
                (nested.path, RegistryEntry.NestedEntry(type: nested.type, versions: textKeyed(nested.keyNames), used: textKeyed(nested.versionUsed)))
            }, uniquingKeysWith: { first, _ in first }),
            enums: enums.isEmpty ? nil : Dictionary(enums.map { enumeration in
                (enumeration.path, RegistryEntry.EnumEntry(type: enumeration.type, aliases: textKeyed(enumeration.aliases)))
            }, uniquingKeysWith: { first, _ in first })
        )
    }
}

// MARK: - Untyped access, for tools

extension Store {
    /// The names of the store's collections, sorted.
    public func collectionNames() throws -> [String] {
        let main = try environment.openDatabase(nil)
        let prefix = Array(Self.collectionPrefix.utf8)
        return try environment.read { txn in
            var names: [String] = []
            try txn.forEach(in: main, range: .prefix(prefix)) { key, _ in
                names.append(String(decoding: key.dropFirst(prefix.count), as: UTF8.self))
                return .next
            }
            return names
        }
    }

    /// The registry's description of `collection`, or `nil` when it has none.
    ///
    /// - Throws: ``HoardError/corruptRegistry(collection:reason:)`` when the entry is damaged.
    public func schema(of collection: String) throws -> CollectionSchema? {
        try Registry.read(collection, in: self).map { CollectionSchema(name: collection, entry: $0) }
    }

    /// The LMDB database holding `collection`'s records, or `nil` when there is none (and
    /// `create` is false). Its values are records as docs/FORMAT.md describes them.
    public func recordDatabase(of collection: String, create: Bool = false) throws -> Database? {
        do {
            return try environment.openDatabase(Self.collectionPrefix + collection, create: create && !options.readOnly)
        } catch let error as LMDBError where error.kind == .notFound {
            return nil
        }
    }

    /// Records `schema` in the registry (for restoring a dump), in `txn`.
    ///
    /// - Throws: ``HoardError/keySetChanged(type:collection:version:differences:)`` when a version
    ///   the store already records (of the model or of a nested one) has other key names, ``HoardError/keyKindChanged(type:collection:recorded:now:)``
    ///   when the ID kinds differ.
    public func record(_ schema: CollectionSchema, in txn: borrowing WriteTransaction) throws {
        guard let meta else { return }
        let key = Registry.key(schema.name)
        let recorded = try txn.withValue(forKey: key, in: meta) { try Registry.decode($0, collection: schema.name) }
        var entry = schema.entry
        if let recorded {
            if let old = recorded.key, let new = entry.key, old != new {
                throw HoardError.keyKindChanged(type: schema.type, collection: schema.name, recorded: old, now: new)
            }
            for (version, names) in recorded.versions {
                guard let incoming = entry.versions[version] else { entry.versions[version] = names; continue }
                let differences = Registry.describeDifferences(recorded: names, now: incoming)
                if !differences.isEmpty {
                    throw HoardError.keySetChanged(type: schema.type, collection: schema.name, version: Int(version) ?? 0, differences: differences)
                }
            }
            entry.current = max(entry.current, recorded.current)
            entry.key = entry.key ?? recorded.key
            entry.nested = try Registry.merge(nested: schema.nested, recorded: recorded.nested ?? [:], type: schema.type, collection: schema.name)
            entry.enums = try Registry.merge(enums: schema.enums, recorded: recorded.enums ?? [:], type: schema.type, collection: schema.name)
        }
        try txn.put(try CBOREncoder(deterministic: true).encode(entry), forKey: key, in: meta)
    }
}
