// Nested models and enums: what else a stored version's meaning depends on.
//
// A stored record stamps one version, the outer model's; a nested model inside it is coded with
// its own type's highest local version not above that number (``KeySets/table(for:)``), and a
// ``VariableEnum`` anywhere inside it with its aliases of exactly that version. So what a stored
// version means includes the nested types' key sets and the enums' aliases, and a registry that
// keeps shipped key sets frozen must know them. They are found from the key paths of the outer
// local key sets: each key path knows the type of its value.

/// A `VariablyCodable` type inside a model's properties — directly, or as the value of an
/// `Optional`, `Array`, `ContiguousArray`, `Set` or `Dictionary` (at any depth of these) — and the
/// key sets storage codes it with.
public struct NestedKeySets: Sendable, Hashable {
    /// The properties leading to it from the outer model: `"frame"`, or `"box.corner"` for a
    /// model nested in a nested model.
    public var path: String
    /// The nested type's name.
    public var type: String
    /// For each local version of the outer model that has the path, the nested type's local
    /// version coded with it (the highest not above it). An outer version without the path, or
    /// below all of the nested type's versions, is absent.
    public var versionUsed: [Int: Int]
    /// The key names of every nested version in ``versionUsed``, by property name.
    public var keyNames: [Int: [String: String]]

    /// A description with these fields.
    public init(path: String, type: String, versionUsed: [Int: Int], keyNames: [Int: [String: String]]) {
        self.path = path
        self.type = type
        self.versionUsed = versionUsed
        self.keyNames = keyNames
    }
}

/// A ``VariableEnum`` in a model's properties — directly, in optionals and collections, or inside
/// a nested model — and the raw values storage writes for it: the aliases of each local version
/// (an enum's aliases of a local version apply to exactly that version).
public struct StoredEnumAliases: Sendable, Hashable {
    /// The properties leading to it from the outer model: `"status"`, `"frame.kind"`.
    public var path: String
    /// The enum's type name.
    public var type: String
    /// For each local version of the outer model that has the path: the raw value by case, for
    /// the cases that version aliases (empty when it writes the canonical raw values only).
    public var aliases: [Int: [String: String]]

    /// A description with these fields.
    public init(path: String, type: String, aliases: [Int: [String: String]]) {
        self.path = path
        self.type = type
        self.aliases = aliases
    }
}

/// What a walk through a model's properties finds.
struct NestedFindings {
    var models: [NestedKeySets] = []
    var enums: [StoredEnumAliases] = []
}

extension KeySets {
    /// Every ``VariableEnum`` in the properties of the local key sets and of the models nested
    /// in them, with the aliases each outer version writes; sorted by path.
    ///
    /// - Throws: an invalid declaration of a nested type (``VariableCodingError/invalidKeySets(type:keySet:problem:)``).
    public func enumAliases() throws -> [StoredEnumAliases] {
        try findings().enums.sorted { $0.path < $1.path }
    }

    func findings() throws -> NestedFindings {
        var found = NestedFindings()
        try collectNested(
            prefix: "", outerVersions: localVersions, enclosing: [ObjectIdentifier(Model.self)], into: &found)
        return found
    }

    /// Every `VariablyCodable` type nested in the properties of the local key sets, at any depth,
    /// with the key sets storage codes each with; sorted by path. A type inside itself (a tree)
    /// is not listed again below its first place; the outermost model is not listed at all.
    ///
    /// - Throws: an invalid declaration of a nested type (``VariableCodingError/invalidKeySets(type:keySet:problem:)``).
    public func nestedKeySets() throws -> [NestedKeySets] {
        try findings().models.sorted { $0.path < $1.path }
    }

    /// Finds the nested models in this type's properties, as coded under `outerVersions` (the
    /// outermost model's versions in which the path so far exists).
    func collectNested(
        prefix: String, outerVersions: [Int], enclosing: [ObjectIdentifier], into found: inout NestedFindings
    ) throws {
        if let problem { throw problem }
        // Per property: its key path and the outer versions whose key set of this type has it
        // (for the outermost model its own version; for a nested one the highest not above).
        var byProperty: [String: (keyPath: AnyKeyPath, outerVersions: [Int])] = [:]
        for outer in outerVersions {
            guard let version = localVersions.last(where: { $0 <= outer }), let table = tables[.local(version)] else {
                continue
            }
            for property in table.properties {
                byProperty[property.name, default: (property.keyPath, [])].outerVersions.append(outer)
            }
        }
        for (name, property) in byProperty.sorted(by: { $0.key < $1.key }) {
            let path = prefix.isEmpty ? name : prefix + "." + name
            switch heldType(in: type(of: property.keyPath).valueType) {
            case .model(let nested) where !enclosing.contains(ObjectIdentifier(nested)):
                try describeNested(
                    nested, path: path, outerVersions: property.outerVersions, enclosing: enclosing, into: &found)
            case .enumeration(let enumeration):
                found.enums.append(describeEnum(enumeration, path: path, outerVersions: property.outerVersions))
            default:
                break
            }
        }
    }
}

/// Opens the existential so that the nested type's own key sets can be read.
private func describeNested<Nested: VariablyDecodable & VariablyEncodable>(
    _ type: Nested.Type, path: String, outerVersions: [Int], enclosing: [ObjectIdentifier],
    into found: inout NestedFindings
) throws {
    let keySets = Nested.keySets
    if let problem = keySets.problem { throw problem }
    var versionUsed: [Int: Int] = [:]
    var keyNames: [Int: [String: String]] = [:]
    for outer in outerVersions {
        guard let used = keySets.localVersions.last(where: { $0 <= outer }) else { continue }
        versionUsed[outer] = used
        if keyNames[used] == nil { keyNames[used] = try keySets.keyNames(for: .local(used)) }
    }
    found.models.append(
        NestedKeySets(path: path, type: typeName(Nested.self), versionUsed: versionUsed, keyNames: keyNames))
    try keySets.collectNested(
        prefix: path, outerVersions: outerVersions, enclosing: enclosing + [ObjectIdentifier(Nested.self)], into: &found
    )
}

/// Opens the existential so that the enum's aliases can be read.
private func describeEnum<Enumeration: VariableEnum>(
    _ type: Enumeration.Type, path: String, outerVersions: [Int]
) -> StoredEnumAliases {
    var aliases: [Int: [String: String]] = [:]
    for outer in outerVersions {
        var named: [String: String] = [:]
        for (value, raw) in Enumeration.aliases[.local(outer)] ?? [:] {
            named[String(describing: value)] = String(describing: raw)
        }
        aliases[outer] = named
    }
    return StoredEnumAliases(path: path, type: typeName(Enumeration.self), aliases: aliases)
}

/// What values of a property's type are or hold (through optionals and collections) that
/// storage must keep track of.
enum HeldType {
    case model(any (VariablyDecodable & VariablyEncodable).Type)
    case enumeration(any VariableEnum.Type)
    case other
}

func heldType(in type: Any.Type) -> HeldType {
    var current = type
    while true {
        if let model = current as? any (VariablyDecodable & VariablyEncodable).Type { return .model(model) }
        if let enumeration = current as? any VariableEnum.Type { return .enumeration(enumeration) }
        guard let container = current as? any ValueHolding.Type else { return .other }
        current = container.heldType
    }
}

/// A type whose values hold values of another type: how nested models are found inside
/// optionals and collections.
protocol ValueHolding {
    static var heldType: Any.Type { get }
}

extension Optional: ValueHolding { static var heldType: Any.Type { Wrapped.self } }
extension Array: ValueHolding { static var heldType: Any.Type { Element.self } }
extension ContiguousArray: ValueHolding { static var heldType: Any.Type { Element.self } }
extension Set: ValueHolding { static var heldType: Any.Type { Element.self } }
extension Dictionary: ValueHolding { static var heldType: Any.Type { Value.self } }
