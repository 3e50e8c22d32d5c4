/// The coding key of a variably coded model: one component of a key name from a key set.
public struct VariableKey: CodingKey, Hashable, Sendable {
    /// The key name.
    public let stringValue: String
    /// Always `nil`: key names are strings.
    public var intValue: Int? { nil }

    /// The key `name`.
    public init(_ name: String) { stringValue = name }
    /// The key `stringValue`; never fails.
    public init?(stringValue: String) { self.stringValue = stringValue }
    /// The key named by the digits of `intValue`; never fails.
    public init?(intValue: Int) { stringValue = String(intValue) }
}

/// Every key set of a model type: the local storage versions (one of them current) and the
/// remote API versions, each mapping the type's properties (by key path) to key names.
///
/// Declare it once per type, as a `static let`, with key names written out as literals: a key set
/// that has shipped is data, never derived from today's `CodingKeys`.
///
/// ```swift
/// struct User: VariablyCodable {
///     var name: String
///     var email: String
///
///     static let keySets = KeySets<User>(
///         local: [1: [\.name: "USER_NAME", \.email: "EMAIL"]],
///         remote: ["v1": [\.name: "user_name", \.email: "email_address"]]
///     )
/// }
/// ```
///
/// A key name with dots (`"meta.width"`) lives in a nested object. The current local version is
/// the highest one unless `current` says otherwise. Mistakes in the declaration (two properties
/// with one key name, a property the current local key set lacks, an unknown current version)
/// are reported as ``VariableCodingError/invalidKeySets(type:keySet:problem:)`` at the type's
/// first use.
///
/// ## Topics
/// - ``KeySetID``
/// - ``DecodingContainer``
/// - ``EncodingContainer``
public final class KeySets<Model>: @unchecked Sendable {
    // @unchecked: immutable after init; key paths are immutable objects.

    /// Key names by property key path.
    public typealias Keys = [PartialKeyPath<Model>: String]

    /// The local version that storage writes.
    public let currentVersion: Int
    /// Every declared local version, ascending.
    public let localVersions: [Int]
    /// Every declared remote version name, sorted.
    public let remoteVersions: [String]
    let tables: [KeySetID: KeyTable<Model>]
    /// The current local table and the remote ones, for lookups without hashing.
    @usableFromInline let currentTable: KeyTable<Model>?
    @usableFromInline let remoteTables: [(name: String, table: KeyTable<Model>)]
    @usableFromInline let problem: VariableCodingError?

    /// Declares the key sets of `Model`.
    ///
    /// - Parameters:
    ///   - current: the local version storage writes; the highest one when `nil`.
    ///   - local: key names per local storage version (1, 2, 3 …).
    ///   - remote: key names per remote API version ("v1", "v2" …).
    ///   - wrappers: per remote version, the key path (dots for depth) of the object that holds
    ///     the model, for APIs that wrap it (`{"content": {…}}` is `"content"`).
    ///   - transforms: per remote version, conversions of arriving values (see ``KeyTransform``).
    public init(
        current: Int? = nil,
        local: [Int: Keys],
        remote: [String: Keys] = [:],
        wrappers: [String: String] = [:],
        transforms: [String: [PartialKeyPath<Model>: KeyTransform]] = [:]
    ) {
        let type = typeName(Model.self)
        localVersions = local.keys.sorted()
        remoteVersions = remote.keys.sorted()
        let current = current ?? localVersions.last ?? 0
        currentVersion = current
        var tables: [KeySetID: KeyTable<Model>] = [:]
        var problem: VariableCodingError?
        func report(_ keySet: KeySetID, _ text: String) {
            if problem == nil { problem = .invalidKeySets(type: type, keySet: "\(keySet)", problem: text) }
        }
        if local.isEmpty { report(.currentLocal, "no local key set is declared") }
        if let bad = localVersions.first(where: { $0 < 1 }) { report(.local(bad), "local versions start at 1") }
        if !local.isEmpty && local[current] == nil {
            report(
                .local(current),
                "the current local version \(current) is not declared (declared: \(localVersions.map(String.init).joined(separator: ", ")))"
            )
        }
        for (version, keys) in local {
            let table = KeyTable(id: .local(version), keys: keys, isCurrentLocal: version == current)
            if let text = table.problem { report(.local(version), text) }
            tables[.local(version)] = table
        }
        for name in Set(wrappers.keys).union(transforms.keys).subtracting(remote.keys).sorted() {
            report(.remote(name), "a wrapper or transform is declared for a remote version that has no key set")
        }
        for (name, keys) in remote {
            let table = KeyTable(
                id: .remote(name), keys: keys, isCurrentLocal: false,
                wrapper: wrappers[name], transforms: transforms[name] ?? [:]
            )
            if let text = table.problem { report(.remote(name), text) }
            tables[.remote(name)] = table
        }
        // Whatever any key set can bring in, storage must be able to keep.
        if let currentKeys = local[current] {
            for (id, table) in tables.sorted(by: { "\($0.key)" < "\($1.key)" }) where id != .local(current) {
                if let missing = table.properties.first(where: { currentKeys[$0.keyPath] == nil }) {
                    report(.local(current), "it has no key for property '\(missing.name)', which key set \(id) names")
                }
            }
        }
        self.tables = tables
        self.currentTable = tables[.local(current)]
        self.remoteTables = tables.compactMap { id, table in
            if case .remote(let name) = id { return (name, table) }
            return nil
        }
        self.problem = problem
    }

    /// The table for a requested key set: exact for remote versions; for local versions the exact
    /// one, or else the highest below it (a nested type whose own versions lag the outer type's).
    @inlinable
    func table(for requested: KeySetID) throws -> KeyTable<Model> {
        if problem == nil {
            // The two common requests, without hashing.
            switch requested {
            case .currentLocal:
                if let currentTable { return currentTable }
            case .remote(let name):
                for entry in remoteTables where entry.name == name { return entry.table }
            case .local(let version) where version == currentVersion:
                if let currentTable { return currentTable }
            default:
                break
            }
        }
        return try resolveTable(for: requested)
    }

    @usableFromInline
    func resolveTable(for requested: KeySetID) throws -> KeyTable<Model> {
        if let problem { throw problem }
        let id: KeySetID
        switch requested {
        case .currentLocal:
            id = .local(currentVersion)
        case .local(let version):
            id = localVersions.last(where: { $0 <= version }).map(KeySetID.local) ?? requested
        case .remote:
            id = requested
        }
        guard let table = tables[id] else {
            throw VariableCodingError.unknownKeySet(
                type: typeName(Model.self), keySet: "\(requested)",
                known: localVersions.map { "local(\($0))" } + remoteVersions.map { "remote(\($0))" }
            )
        }
        return table
    }

    /// The key names of one key set by property name (`"name"`, `"meta.width"`), for registries
    /// and tools that work without the Swift type.
    ///
    /// - Throws: ``VariableCodingError/unknownKeySet(type:keySet:known:)`` when the type does not declare `keySet`.
    public func keyNames(for keySet: KeySetID) throws -> [String: String] {
        let table = try table(for: keySet)
        return Dictionary(uniqueKeysWithValues: table.properties.map { ($0.name, $0.keyName) })
    }
}

/// One property's place in one key set. A class, so that handing one out costs one retain.
@usableFromInline
final class Slot: @unchecked Sendable {
    // @unchecked: immutable.
    /// The property's stable name ("name", "meta.width").
    @usableFromInline let property: String
    /// The full key name as declared ("user_name", "meta.width").
    @usableFromInline let keyName: String
    /// The nested objects to enter first (empty for a flat key).
    @usableFromInline let prefix: [VariableKey]
    /// The key within the innermost object.
    @usableFromInline let key: VariableKey
    /// A conversion of the arriving value (remote key sets only).
    @usableFromInline let transform: KeyTransform?
    /// The property's number in its key set's ``FieldLayout``.
    @usableFromInline let field: Int

    init(
        property: String, keyName: String, prefix: [VariableKey], key: VariableKey, transform: KeyTransform?, field: Int
    ) {
        self.field = field
        self.property = property
        self.keyName = keyName
        self.prefix = prefix
        self.key = key
        self.transform = transform
    }
}

/// One key set, prepared for coding: lookups by key-path identity (a scan comparing one word
/// per property: cheaper than hashing for the sizes models have), falling back to the key
/// path's own hashing for a key path object made elsewhere.
@usableFromInline
final class KeyTable<Model>: @unchecked Sendable {
    // @unchecked: immutable after init.
    @usableFromInline let id: KeySetID
    @usableFromInline let isCurrentLocal: Bool
    /// The slots by field number (sorted by key name), and their key paths' identities: a field
    /// is found by scanning words, and only then is its slot handed out.
    @usableFromInline let slots: ContiguousArray<Slot>
    /// Owned and never written after init: a buffer, not an array, so that a lookup neither
    /// retains storage nor checks bounds.
    @usableFromInline let identities: UnsafeMutableBufferPointer<ObjectIdentifier>
    /// Field numbers by key path, for an equal key path that is not the same object as the declared one.
    @usableFromInline let byKeyPath: [PartialKeyPath<Model>: Int]
    let properties: [(keyPath: PartialKeyPath<Model>, name: String, keyName: String)]
    @usableFromInline let hasNestedKeys: Bool
    /// The first thing wrong with the declaration, if anything.
    let problem: String?

    /// The keys of the object that holds the model (empty when the model is the payload itself).
    @usableFromInline let wrapper: [VariableKey]

    init(
        id: KeySetID, keys: [PartialKeyPath<Model>: String], isCurrentLocal: Bool,
        wrapper: String? = nil, transforms: [PartialKeyPath<Model>: KeyTransform] = [:]
    ) {
        self.id = id
        self.isCurrentLocal = isCurrentLocal
        var slots: ContiguousArray<Slot> = []
        var identities: ContiguousArray<ObjectIdentifier> = []
        var byKeyPath: [PartialKeyPath<Model>: Int] = [:]
        var properties: [(keyPath: PartialKeyPath<Model>, name: String, keyName: String)] = []
        var problem: String?
        var owners: [String: String] = [:]  // key name -> property
        for (keyPath, keyName) in keys.sorted(by: { $0.value < $1.value }) {
            let name = propertyName(keyPath)
            let components = keyName.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            if keyName.isEmpty || components.contains(where: \.isEmpty) {
                problem = problem ?? "property '\(name)' has the invalid key name '\(keyName)'"
            }
            if let other = owners[keyName] {
                problem = problem ?? "properties '\(other)' and '\(name)' both use the key name '\(keyName)'"
            }
            owners[keyName] = name
            let slot = Slot(
                property: name, keyName: keyName,
                prefix: components.dropLast().map(VariableKey.init), key: VariableKey(components.last ?? keyName),
                transform: transforms[keyPath], field: slots.count
            )
            slots.append(slot)
            identities.append(ObjectIdentifier(keyPath))
            byKeyPath[keyPath] = slot.field
            properties.append((keyPath, name, keyName))
        }
        // "meta" cannot be a value and an object at once.
        for keyName in owners.keys where keyName.contains(".") {
            var prefix = ""
            for component in keyName.split(separator: ".").dropLast() {
                prefix += prefix.isEmpty ? String(component) : "." + component
                if let owner = owners[prefix] {
                    problem =
                        problem
                        ?? "property '\(owner)' uses the key name '\(prefix)', which '\(owners[keyName] ?? "")' uses as an object ('\(keyName)')"
                }
            }
        }
        self.slots = slots
        self.identities = .allocate(capacity: identities.count)
        _ = self.identities.initialize(from: identities)
        self.byKeyPath = byKeyPath
        self.properties = properties.sorted { $0.name < $1.name }
        self.hasNestedKeys = owners.keys.contains { $0.contains(".") }
        self.wrapper = wrapper.map { $0.split(separator: ".").map { VariableKey(String($0)) } } ?? []
        if let wrapper,
            wrapper.isEmpty
                || wrapper.split(separator: ".", omittingEmptySubsequences: false).contains(where: \.isEmpty)
        {
            problem = problem ?? "the wrapper key path '\(wrapper)' is invalid"
        }
        for keyPath in transforms.keys where keys[keyPath] == nil {
            problem = problem ?? "a transform is declared for property '\(propertyName(keyPath))', which has no key"
        }
        self.problem = problem
    }

    deinit { identities.deallocate() }

    @inlinable
    func slot(for keyPath: PartialKeyPath<Model>) -> Slot? {
        field(for: keyPath).map { slots[$0] }
    }

    /// The field number of `keyPath` (see ``FieldLayout``), or `nil` when the key set has no key for it.
    @inlinable
    func field(for keyPath: PartialKeyPath<Model>) -> Int? {
        let id = ObjectIdentifier(keyPath)
        var field = 0
        while field < identities.count {
            if identities[field] == id { return field }
            field += 1
        }
        return byKeyPath[keyPath]
    }

    /// The local version of this key set, or `nil` for a remote one.
    @inlinable
    var localVersion: Int? {
        if case .local(let version) = id { return version }
        return nil
    }
}
