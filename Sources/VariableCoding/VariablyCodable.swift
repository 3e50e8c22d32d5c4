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
    ///
    /// - Throws: what the container's `decodeValue` calls throw (a missing or mistyped property).
    init(from container: DecodingContainer<Self>) throws
    /// Decodes the model from a coder's direct field access, numbered by `layout`. Do not
    /// implement it: the default (``init(fields:layout:)-(FieldDecoding,_)``) is declared as a
    /// requirement only so that each model gets a copy compiled for its own type, which spares
    /// generic callers (a storage engine) a runtime type-metadata lookup per model.
    @_documentation(visibility: internal)
    init(fields: any FieldDecoding, layout: FieldLayout<Self>) throws
    /// The stored properties that generated code (``scan(_:)``) reads, numbered by their place
    /// here. Empty unless the `@VariablyCoded` macro wrote it.
    @_documentation(visibility: internal)
    static var scannedProperties: [PartialKeyPath<Self>] { get }
    /// Generated code: the model read from `scanner`, exactly as ``init(from:)-(DecodingContainer<Self>)``
    /// would read it. It throws ``FieldScanDeclined`` to have the coder take that ordinary path
    /// (see ``FieldScanning``); the coder also takes it when the scanner is not complete afterwards.
    /// (Not an optional result: generic callers would look up the metadata of `Self?` on every call.)
    @_documentation(visibility: internal)
    static func scan<S: FieldScanning>(_ scanner: inout S) throws(FieldScanDeclined) -> Self
}

/// A model that encodes with any of its key sets.
public protocol VariablyEncodable: Encodable {
    /// The key sets of this type.
    static var keySets: KeySets<Self> { get }
    /// Encodes the model's properties into a container.
    ///
    /// - Throws: what the container's `encodeValue` calls throw.
    func encode(to container: inout EncodingContainer<Self>) throws
    /// Encodes the model through a coder's direct field access, numbered by `layout`. Do not
    /// implement it: like ``VariablyDecodable/init(fields:layout:)-(FieldDecoding,_)``, it is a
    /// requirement only so that each model gets a copy compiled for its own type.
    @_documentation(visibility: internal)
    func encode(fields: any FieldEncoding, layout: FieldLayout<Self>) throws
    /// Runs ``encode(to:)`` into a table of plain values by field number (FieldRecording.swift).
    /// A requirement, so that the coder's generic code calls a version made for the model.
    @_documentation(visibility: internal)
    func recordFields(
        layout: FieldLayout<Self>, _ body: (UnsafeMutableBufferPointer<RecordedField>) -> Bool
    ) throws
        -> Bool
    /// The stored properties that generated code (``emit(into:)``) writes, numbered by their
    /// place here. Empty unless the `@VariablyCoded` macro wrote it.
    @_documentation(visibility: internal)
    static var emittedProperties: [PartialKeyPath<Self>] { get }
    /// Generated code: writes the model into `emitter` exactly as ``encode(to:)-(EncodingContainer<Self>)``
    /// would, or returns `false` to have the coder take that ordinary path (see ``FieldEmitting``).
    @_documentation(visibility: internal)
    func emit<E: FieldEmitting & ~Copyable>(into emitter: inout E) -> Bool
}

/// A model with several key sets, in both directions.
public typealias VariablyCodable = VariablyDecodable & VariablyEncodable

extension VariablyDecodable {
    /// Decodes the model with the key set the coder asks for: `userInfo[.keySet]`, a convenience
    /// method's choice, or the current local version.
    ///
    /// - Throws: ``VariableCodingError`` naming the key set and property that failed.
    @inlinable
    public init(from decoder: any Decoder) throws {
        let table = try Self.keySets.table(for: requestedKeySet(decoder.userInfo))
        var keyed = try decoder.container(keyedBy: VariableKey.self)
        if !table.wrapper.isEmpty { keyed = try unwrap(keyed, table) }
        try self.init(from: DecodingContainer(keyed: keyed, table: table))
    }
}

extension VariablyEncodable {
    /// Encodes the model with the key set the coder asks for, as ``init(from:)-(Decoder)`` decodes.
    ///
    /// - Throws: ``VariableCodingError`` naming the key set and property that failed.
    @inlinable
    public func encode(to encoder: any Encoder) throws {
        let table = try Self.keySets.table(for: requestedKeySet(encoder.userInfo))
        var keyed = encoder.container(keyedBy: VariableKey.self)
        for key in table.wrapper {
            keyed = keyed.nestedContainer(keyedBy: VariableKey.self, forKey: key)
        }
        var container = EncodingContainer(keyed: keyed, table: table)
        try encode(to: &container)
        try container.finish()
    }
}

/// Enters the object(s) that wrap a model in a remote payload (`{"content": {…}}`).
@usableFromInline
func unwrap<Model>(
    _ outer: KeyedDecodingContainer<VariableKey>, _ table: KeyTable<Model>
) throws -> KeyedDecodingContainer<VariableKey> {
    var container = outer
    for key in table.wrapper {
        guard container.contains(key) else {
            throw VariableCodingError.decoding(
                type: typeName(Model.self), keySet: "\(table.id)", property: "(wrapper)",
                key: table.wrapper.map(\.stringValue).joined(separator: "."),
                codingPath: (container.codingPath.map(\.stringValue) + [key.stringValue]).joined(separator: "."),
                reason: "the payload has no '\(key.stringValue)' object around the model", underlying: nil
            )
        }
        container = try container.nestedContainer(keyedBy: VariableKey.self, forKey: key)
    }
    return container
}
