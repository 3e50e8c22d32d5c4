public import VariableCoding

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

    /// A description with these fields, e.g. to compare with what the store's registry records.
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

    /// What `Model`'s code declares: its local key sets, nested models and enums.
    init<Model: VariablyCodable>(declaring: Model.Type, name: String, keyKind: KeyKind) throws {
        let keySets = Model.keySets
        var versions: [Int: [String: String]] = [:]
        for version in keySets.localVersions {
            versions[version] = try keySets.keyNames(for: .local(version))
        }
        self.init(
            name: name, type: String(describing: Model.self), currentVersion: keySets.currentVersion, keyKind: keyKind,
            versions: versions, nested: try keySets.nestedKeySets(), enums: try keySets.enumAliases()
        )
    }

    init(name: String, entry: RegistryEntry) {
        self.name = name
        type = entry.type
        currentVersion = entry.current
        keyKind = entry.key.flatMap(KeyKind.init(rawValue:))
        versions = versionKeyed(entry.versions)
        nested = (entry.nested ?? [:]).map { path, nested in
            NestedKeySets(
                path: path, type: nested.type, versionUsed: versionKeyed(nested.used),
                keyNames: versionKeyed(nested.versions))
        }.sorted { $0.path < $1.path }
        enums = (entry.enums ?? [:]).map { path, enumeration in
            StoredEnumAliases(path: path, type: enumeration.type, aliases: versionKeyed(enumeration.aliases))
        }.sorted { $0.path < $1.path }
    }
}

/// A registry map keyed by version numbers as text, keyed by the numbers (text that is not one is skipped).
private func versionKeyed<Value>(_ map: [String: Value]) -> [Int: Value] {
    Dictionary(
        map.compactMap { version, value in Int(version).map { ($0, value) } }, uniquingKeysWith: { first, _ in first })
}
