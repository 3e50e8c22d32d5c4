// Direct field access: a coder that knows a key set's key names ahead of time reads and writes a
// model's fields by number, without Codable's keyed containers.
//
// Codable looks every property up by its key's string, through a type-erased container box
// and generic metadata on each call. A storage engine reads millions of records of one type,
// all written with a handful of key sets: it can match the key names once per key set (a
// ``FieldLayout``), find each record's fields once, and hand the model a ``FieldDecoding``
// that serves each property by its field number. The model's own code does not change: its
// ``DecodingContainer`` and ``EncodingContainer`` work the same over either kind of access,
// with the same errors, defaults and lossless widening.
//
// ```swift
// guard let layout = try Note.keySets.fieldLayout(for: .local(2)) else { /* use Codable */ }
// // The coder matches layout.keyNames to its own keys once, then per record:
// let note = try Note(fields: reader, layout: layout)   // reader: some FieldDecoding
// ```
//
// Only flat key sets have a layout: a key set with dotted key names, a wrapper or transforms
// goes through Codable, which has the nested containers those need.

/// One key set's key names by field number (`keyNames[n]` is field `n`), for coders with direct
/// field access. Field numbers mean something only together with the layout that gave them.
@_documentation(visibility: internal)
public struct FieldLayout<Model>: Sendable {
    @usableFromInline let table: KeyTable<Model>

    /// The key set the layout stands for (never `.currentLocal`: the version it resolved to).
    public var keySet: KeySetID { table.id }
    /// The key name of every field, by field number.
    public var keyNames: [String] { table.slots.map(\.keyName) }
}

extension KeySets {
    /// The field layout of `keySet`, or `nil` when the key set is not flat (a dotted key name, a
    /// wrapper or a transform): such key sets are coded through Codable.
    ///
    /// - Throws: what coding with `keySet` would throw (an invalid declaration, an unknown key set).
    @_documentation(visibility: internal)
    public func fieldLayout(for keySet: KeySetID) throws -> FieldLayout<Model>? {
        let table = try table(for: keySet)
        guard !table.hasNestedKeys, table.wrapper.isEmpty, !table.slots.contains(where: { $0.transform != nil }) else {
            return nil
        }
        return FieldLayout(table: table)
    }
}

/// A coder's read access to the fields of one encoded model, numbered by a ``FieldLayout``.
///
/// The methods mirror `KeyedDecodingContainer`'s, with a field number for the key, and must
/// behave like them: a field the data does not hold throws `DecodingError.keyNotFound`; `null`
/// where a value is wanted throws `valueNotFound`; a value of another type throws
/// `typeMismatch`. Nested values (`decode<T: Decodable>`) go through the coder's own `Decoder`.
///
/// A class, so that the decoding container holds and passes it as one reference: copying a
/// value of unknown type in an existential costs a call through its value witnesses each time.
@_documentation(visibility: internal)
public protocol FieldDecoding: AnyObject {
    /// Whether the data holds the field, with any value (`null` included).
    func contains(field: Int) -> Bool
    /// Whether the field holds `null`.
    func decodeNil(field: Int) throws -> Bool
    func decode(_ type: Bool.Type, field: Int) throws -> Bool
    func decode(_ type: String.Type, field: Int) throws -> String
    func decode(_ type: Double.Type, field: Int) throws -> Double
    func decode(_ type: Float.Type, field: Int) throws -> Float
    func decode(_ type: Int.Type, field: Int) throws -> Int
    func decode(_ type: Int32.Type, field: Int) throws -> Int32
    func decode(_ type: Int64.Type, field: Int) throws -> Int64
    func decode(_ type: UInt64.Type, field: Int) throws -> UInt64
    /// Any other value, through the coder's `Decoder`.
    func decode<T: Decodable>(_ type: T.Type, field: Int) throws -> T
}

/// A coder's write access to one model's fields, numbered by a ``FieldLayout``: each call writes
/// the field's key and the value (the coder orders and checks the keys as its format requires).
/// A class, as ``FieldDecoding`` is.
@_documentation(visibility: internal)
public protocol FieldEncoding: AnyObject {
    func encodeNil(field: Int) throws
    func encode(_ value: Bool, field: Int) throws
    func encode(_ value: String, field: Int) throws
    func encode(_ value: Double, field: Int) throws
    func encode(_ value: Float, field: Int) throws
    func encode(_ value: Int, field: Int) throws
    func encode(_ value: Int32, field: Int) throws
    func encode(_ value: Int64, field: Int) throws
    func encode(_ value: UInt64, field: Int) throws
    /// Any other value, through the coder's `Encoder`.
    func encode<T: Encodable>(_ value: T, field: Int) throws
}

extension VariablyDecodable {
    /// Decodes the model from a coder's direct field access, numbered by `layout`.
    @inlinable
    @_documentation(visibility: internal)
    public init(fields: any FieldDecoding, layout: FieldLayout<Self>) throws {
        try self.init(from: DecodingContainer(fields: fields, table: layout.table))
    }
}

extension VariablyEncodable {
    /// Encodes the model through a coder's direct field access, numbered by `layout`.
    @inlinable
    @_documentation(visibility: internal)
    public func encode(fields: any FieldEncoding, layout: FieldLayout<Self>) throws {
        var container = EncodingContainer(fields: fields, table: layout.table)
        try encode(to: &container)
    }
}

// MARK: - Placeholders

/// What a container over direct field access holds where a Codable one holds the model's keyed
/// container: it is never used (every access checks `fields` first), and if it were, it would
/// hold nothing and refuse to write.
@usableFromInline
nonisolated(unsafe) let detachedKeyedDecoding = KeyedDecodingContainer(DetachedKeyedDecoding())
// nonisolated(unsafe): immutable, and the container it wraps has no state.

@usableFromInline
nonisolated(unsafe) let detachedKeyedEncoding = KeyedEncodingContainer(DetachedKeyedEncoding<VariableKey>())
// nonisolated(unsafe): the container it wraps has no state; every write throws.

struct DetachedKeyedDecoding: KeyedDecodingContainerProtocol {
    var codingPath: [any CodingKey] { [] }
    var allKeys: [VariableKey] { [] }
    func contains(_ key: VariableKey) -> Bool { false }
    func decodeNil(forKey key: VariableKey) throws -> Bool { throw missing(key) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: VariableKey) throws -> T { throw missing(key) }
    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: VariableKey
    ) throws -> KeyedDecodingContainer<NestedKey> {
        throw missing(key)
    }
    func nestedUnkeyedContainer(forKey key: VariableKey) throws -> any UnkeyedDecodingContainer { throw missing(key) }
    func superDecoder() throws -> any Decoder { throw missing(VariableKey("super")) }
    func superDecoder(forKey key: VariableKey) throws -> any Decoder { throw missing(key) }

    private func missing(_ key: VariableKey) -> DecodingError {
        .keyNotFound(
            key, .init(codingPath: [], debugDescription: "a container over direct field access has no keyed container"))
    }
}

/// The encoding side: every write throws, and what the protocol makes it hand out (nested
/// containers, encoders) is detached too.
struct DetachedKeyedEncoding<Key: CodingKey>: KeyedEncodingContainerProtocol {
    var codingPath: [any CodingKey] { [] }
    mutating func encodeNil(forKey key: Key) throws { throw detachedEncodingError }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { throw detachedEncodingError }
    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(DetachedKeyedEncoding<NestedKey>())
    }
    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer { DetachedUnkeyedEncoding() }
    mutating func superEncoder() -> any Encoder { DetachedEncoder() }
    mutating func superEncoder(forKey key: Key) -> any Encoder { DetachedEncoder() }
}

struct DetachedUnkeyedEncoding: UnkeyedEncodingContainer {
    var codingPath: [any CodingKey] { [] }
    var count: Int { 0 }
    mutating func encodeNil() throws { throw detachedEncodingError }
    mutating func encode<T: Encodable>(_ value: T) throws { throw detachedEncodingError }
    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type
    ) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(DetachedKeyedEncoding<NestedKey>())
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { self }
    mutating func superEncoder() -> any Encoder { DetachedEncoder() }
}

struct DetachedEncoder: Encoder {
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(DetachedKeyedEncoding<Key>())
    }
    func unkeyedContainer() -> any UnkeyedEncodingContainer { DetachedUnkeyedEncoding() }
    func singleValueContainer() -> any SingleValueEncodingContainer { DetachedSingleValueEncoding() }
}

struct DetachedSingleValueEncoding: SingleValueEncodingContainer {
    var codingPath: [any CodingKey] { [] }
    mutating func encodeNil() throws { throw detachedEncodingError }
    mutating func encode<T: Encodable>(_ value: T) throws { throw detachedEncodingError }
}

let detachedEncodingError = EncodingError.invalidValue(
    "(detached)", .init(codingPath: [], debugDescription: "a container over direct field access has no keyed container")
)
