// Nested models: a VariablyCodable value inside another model's properties.
//
// A stored record stamps one version, the outer model's; a nested model inside it is coded with
// its own type's highest local version not above that number (``KeySets/table(for:)``). So what
// a stored version means includes the nested types' key sets too, and a registry that keeps
// shipped key sets frozen must know them. They are found from the key paths of the outer local
// key sets: each key path knows the type of its value.

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

    public init(path: String, type: String, versionUsed: [Int: Int], keyNames: [Int: [String: String]]) {
        self.path = path
        self.type = type
        self.versionUsed = versionUsed
        self.keyNames = keyNames
    }
}

extension KeySets {
    /// Every `VariablyCodable` type nested in the properties of the local key sets, at any depth,
    /// with the key sets storage codes each with; sorted by path. A type inside itself (a tree)
    /// is not listed again below its first place; the outermost model is not listed at all.
    ///
    /// - Throws: an invalid declaration of a nested type (``VariableCodingError/invalidKeySets(type:keySet:problem:)``).
    public func nestedKeySets() throws -> [NestedKeySets] {
        var found: [NestedKeySets] = []
        try collectNested(prefix: "", outerVersions: localVersions, enclosing: [ObjectIdentifier(Model.self)], into: &found)
        return found.sorted { $0.path < $1.path }
    }

    /// Finds the nested models in this type's properties, as coded under `outerVersions` (the
    /// outermost model's versions in which the path so far exists).
    func collectNested(prefix: String, outerVersions: [Int], enclosing: [ObjectIdentifier], into found: inout [NestedKeySets]) throws {
        if let problem { throw problem }
        // Per property: its key path and the outer versions whose key set of this type has it
        // (for the outermost model its own version; for a nested one the highest not above).
        var byProperty: [String: (keyPath: AnyKeyPath, outerVersions: [Int])] = [:]
        for outer in outerVersions {
            guard let version = localVersions.last(where: { $0 <= outer }), let table = tables[.local(version)] else { continue }
            for property in table.properties {
                byProperty[property.name, default: (property.keyPath, [])].outerVersions.append(outer)
            }
        }
        for (name, property) in byProperty.sorted(by: { $0.key < $1.key }) {
            guard let nested = nestedModelType(in: type(of: property.keyPath).valueType),
                  !enclosing.contains(ObjectIdentifier(nested)) else { continue }
            let path = prefix.isEmpty ? name : prefix + "." + name
            try describeNested(nested, path: path, outerVersions: property.outerVersions, enclosing: enclosing, into: &found)
        }
    }
}

/// Opens the existential so that the nested type's own key sets can be read.
private func describeNested<Nested: VariablyDecodable & VariablyEncodable>(
    _ type: Nested.Type, path: String, outerVersions: [Int], enclosing: [ObjectIdentifier], into found: inout [NestedKeySets]
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
    found.append(NestedKeySets(path: path, type: typeName(Nested.self), versionUsed: versionUsed, keyNames: keyNames))
    try keySets.collectNested(prefix: path, outerVersions: outerVersions, enclosing: enclosing + [ObjectIdentifier(Nested.self)], into: &found)
}

/// The `VariablyCodable` type that values of `type` are or hold (through optionals and
/// collections), or `nil`.
func nestedModelType(in type: Any.Type) -> (any (VariablyDecodable & VariablyEncodable).Type)? {
    var current = type
    while true {
        if let model = current as? any (VariablyDecodable & VariablyEncodable).Type { return model }
        guard let container = current as? any ValueHolding.Type else { return nil }
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
