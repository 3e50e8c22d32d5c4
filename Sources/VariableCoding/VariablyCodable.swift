/// A model that decodes with any of its key sets.
///
/// Conforming types declare ``keySets`` and ``init(from:)-(DecodingContainer<Self>)``; the default
/// `init(from: Decoder)` picks the key set the coder asks for (`userInfo[.keySet]`, or the
/// convenience methods' choice, or the current local version) and hands over a container that
/// looks keys up by key path.
public protocol VariablyDecodable: Decodable {
    /// The key sets of this type.
    static var keySets: KeySets<Self> { get }
    /// Decodes the model from a container of its properties.
    init(from container: DecodingContainer<Self>) throws
}

/// A model that encodes with any of its key sets.
public protocol VariablyEncodable: Encodable {
    /// The key sets of this type.
    static var keySets: KeySets<Self> { get }
    /// Encodes the model's properties into a container.
    func encode(to container: inout EncodingContainer<Self>) throws
}

/// A model with several key sets, in both directions.
public typealias VariablyCodable = VariablyDecodable & VariablyEncodable

extension VariablyDecodable {
    @inlinable
    public init(from decoder: any Decoder) throws {
        let table = try Self.keySets.table(for: requestedKeySet(decoder.userInfo))
        let keyed = try decoder.container(keyedBy: VariableKey.self)
        try self.init(from: DecodingContainer(keyed: keyed, table: table, codingPath: decoder.codingPath))
    }
}

extension VariablyEncodable {
    @inlinable
    public func encode(to encoder: any Encoder) throws {
        let table = try Self.keySets.table(for: requestedKeySet(encoder.userInfo))
        var container = EncodingContainer(keyed: encoder.container(keyedBy: VariableKey.self), table: table)
        try encode(to: &container)
        try container.finish()
    }
}
