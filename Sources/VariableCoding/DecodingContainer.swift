/// Whether a key was there, and what it held.
public enum Presence<Value> {
    /// The key set has no key for the property, or the data has no such key.
    case missing
    /// The key is there with `null`.
    case null
    /// The key is there with a value.
    case value(Value)
}

/// The properties of one encoded model, looked up by key path in the key set being decoded.
///
/// ```swift
/// init(from container: DecodingContainer<User>) throws {
///     name = try container.decodeValue(for: \.name)                  // missing or null: error
///     nickname = try container.decodeValueIfPresent(for: \.nickname)  // missing or null: nil
///     age = try container.decodeValue(for: \.age, default: 0)        // missing: 0, null: error
///     if container.localVersion == 1 {                               // the type changed in version 2
///         score = Int(try container.decodeValue(String.self, forProperty: \.score)) ?? 0
///     } else {
///         score = try container.decodeValue(for: \.score)
///     }
/// }
/// ```
///
/// What happens when a value is not there:
///
/// | method | key missing | `null` | wrong type |
/// | --- | --- | --- | --- |
/// | ``decodeValue(for:)`` | error | error | error (after lossless widening) |
/// | ``decodeValue(for:default:)`` | the default | error | error |
/// | ``decodeValueIfPresent(for:)-(KeyPath<Model,Value?>)`` | `nil` | `nil` | error |
/// | ``presence(of:forProperty:)`` | `.missing` | `.null` | error |
///
/// A property that the key set has no key for counts as missing (an older local version that
/// predates the property). Lossless widening: an integer into `Double` or `Float` when it fits
/// exactly, a `Float` into a `Double`, a 32-bit integer into a wider one. Errors are
/// ``VariableCodingError/decoding(type:keySet:property:key:codingPath:reason:underlying:)``.
public struct DecodingContainer<Model> {
    /// The model's object when it is decoded through Codable; ``detachedKeyedDecoding`` when
    /// `fields` is set. (Not an optional: copying an optional of the standard library's container
    /// goes through runtime calls, which the Codable path would pay on every model.)
    @usableFromInline let keyed: KeyedDecodingContainer<VariableKey>
    /// The coder's direct field access, when it has one (see ``FieldDecoding``); exclusive with `keyed`.
    @usableFromInline let fields: (any FieldDecoding)?
    @usableFromInline let table: KeyTable<Model>
    /// Nested objects entered so far, for key names with dots (made only for such key sets).
    @usableFromInline let nestedObjects: NestedObjects?
    /// The coding path of the model (computed when asked: some coders build it on every call).
    @inlinable
    public var codingPath: [any CodingKey] { fields == nil ? keyed.codingPath : [] }

    @inlinable
    init(keyed: KeyedDecodingContainer<VariableKey>, table: KeyTable<Model>) {
        self.keyed = keyed
        self.fields = nil
        self.table = table
        self.nestedObjects = table.hasNestedKeys ? NestedObjects() : nil
    }

    /// Over direct field access; `table` is flat (see ``KeySets/fieldLayout(for:)``).
    @inlinable
    init(fields: any FieldDecoding, table: KeyTable<Model>) {
        self.keyed = detachedKeyedDecoding
        self.fields = fields
        self.table = table
        self.nestedObjects = nil
    }

    /// The key set being decoded (never `.currentLocal`: the version it stands for).
    @inlinable
    public var keySet: KeySetID { table.id }
    /// The local version being decoded, or `nil` for a remote key set.
    @inlinable
    public var localVersion: Int? { table.localVersion }

    /// Whether the data holds a key (with any value, `null` included) for the property.
    @inlinable
    public func contains(_ keyPath: PartialKeyPath<Model>) -> Bool {
        guard let slot = table.slot(for: keyPath) else { return false }
        if let fields { return fields.contains(field: slot.field) }
        guard let container = try? object(for: slot) else { return false }
        return container.contains(slot.key)
    }

    /// The property's value; an error when it is missing, `null` or of the wrong type.
    ///
    /// - Throws: ``VariableCodingError/decoding(type:keySet:property:key:codingPath:reason:underlying:)``, naming the
    ///   property, its key and why.
    @inlinable
    public func decodeValue<Value: Decodable>(for keyPath: KeyPath<Model, Value>) throws -> Value {
        if let value = try? decodeFlat(Value.self, keyPath) { return value }
        return try decodeValue(Value.self, forProperty: keyPath)  // the full path, which says why
    }

    /// The property's value as a type of your choice: for a property whose type changed between versions.
    ///
    /// - Throws: ``VariableCodingError/decoding(type:keySet:property:key:codingPath:reason:underlying:)``, naming the
    ///   property, its key and why.
    @inlinable
    public func decodeValue<Value: Decodable>(
        _ type: Value.Type, forProperty keyPath: PartialKeyPath<Model>
    ) throws -> Value {
        switch try presence(of: type, forProperty: keyPath) {
        case .value(let value): return value
        case .missing: throw failure(keyPath, reason: missingReason(keyPath))
        case .null: throw failure(keyPath, reason: "the value is null")
        }
    }

    /// The property's value, or `defaultValue` when the key is missing (`null` is an error).
    ///
    /// - Throws: ``VariableCodingError/decoding(type:keySet:property:key:codingPath:reason:underlying:)``, naming the
    ///   property, its key and why.
    @inlinable
    public func decodeValue<Value: Decodable>(
        for keyPath: KeyPath<Model, Value>, default defaultValue: @autoclosure () -> Value
    ) throws -> Value {
        if let value = try? decodeFlat(Value.self, keyPath) { return value }
        switch try presence(of: Value.self, forProperty: keyPath) {
        case .value(let value): return value
        case .missing: return defaultValue()
        case .null: throw failure(keyPath, reason: "the value is null")
        }
    }

    /// The optional property's value, or `nil` when the key is missing or `null`.
    ///
    /// - Throws: ``VariableCodingError/decoding(type:keySet:property:key:codingPath:reason:underlying:)``, naming the
    ///   property, its key and why (a value of the wrong type).
    @inlinable
    public func decodeValueIfPresent<Value: Decodable>(for keyPath: KeyPath<Model, Value?>) throws -> Value? {
        try decodeValueIfPresent(Value.self, forProperty: keyPath)
    }

    /// The property's value, or `nil` when the key is missing or `null`.
    ///
    /// - Throws: ``VariableCodingError/decoding(type:keySet:property:key:codingPath:reason:underlying:)``, naming the
    ///   property, its key and why (a value of the wrong type).
    @inlinable
    public func decodeValueIfPresent<Value: Decodable>(
        _ type: Value.Type, forProperty keyPath: PartialKeyPath<Model>
    ) throws -> Value? {
        if case .value(let value) = try presence(of: type, forProperty: keyPath) { return value }
        return nil
    }

    /// Whether the property is missing, `null` or has a value; errors only for a value of the wrong type.
    ///
    /// - Throws: ``VariableCodingError/decoding(type:keySet:property:key:codingPath:reason:underlying:)``, naming the
    ///   property, its key and why (a value of the wrong type).
    @inlinable
    public func presence<Value: Decodable>(
        of type: Value.Type, forProperty keyPath: PartialKeyPath<Model>
    ) throws -> Presence<Value> {
        guard let slot = table.slot(for: keyPath) else { return .missing }
        if let fields { return try presence(of: type, at: FieldPlace(fields: fields, field: slot.field), keyPath) }
        guard let container = try object(for: slot) else { return .missing }
        if let transform = slot.transform {
            do {
                let converted = try transform.decode(container, slot.key)
                guard let value = converted as? Value else {
                    throw failure(
                        keyPath, reason: "the transform produced \(Swift.type(of: converted)), not \(Value.self)")
                }
                return .value(value)
            } catch let error as VariableCodingError {
                throw error
            } catch {
                if !container.contains(slot.key) { return .missing }
                if (try? container.decodeNil(forKey: slot.key)) == true { return .null }
                if let widened = widened(Value.self, at: KeyedPlace(container: container, key: slot.key)) {
                    return .value(widened)
                }
                throw failure(keyPath, reason: reason(of: error), underlying: error)
            }
        }
        return try presence(of: type, at: KeyedPlace(container: container, key: slot.key), keyPath)
    }

    // MARK: Internals

    /// Decodes the value at `place`; only a failure looks again, to say why.
    @inlinable
    func presence<Value: Decodable>(
        of type: Value.Type, at place: some ValuePlace, _ keyPath: PartialKeyPath<Model>
    ) throws -> Presence<Value> {
        do {
            return .value(try place.decode(Value.self))
        } catch let error as VariableCodingError {
            throw error  // a nested model's own, already precise error
        } catch {
            if !place.contains() { return .missing }
            if (try? place.decodeNil()) == true { return .null }
            if let widened = widened(Value.self, at: place) { return .value(widened) }
            throw failure(keyPath, reason: reason(of: error), underlying: error)
        }
    }

    /// The fast path of the common case, a flat key holding a value of the right type: one
    /// lookup, no classification. `nil` (or an error) sends the caller down the full path.
    @inlinable
    func decodeFlat<Value: Decodable>(_ type: Value.Type, _ keyPath: PartialKeyPath<Model>) throws -> Value? {
        if let fields {
            guard let field = table.field(for: keyPath) else { return nil }
            return try FieldPlace.decode(Value.self, from: fields, field: field)
        }
        guard let slot = table.slot(for: keyPath), slot.prefix.isEmpty, slot.transform == nil else { return nil }
        return try KeyedPlace.decode(Value.self, from: keyed, key: slot.key)
    }

    /// The object that holds `slot`'s key: this model's, or a nested one for a dotted key name.
    @inlinable
    func object(for slot: Slot) throws -> KeyedDecodingContainer<VariableKey>? {
        guard fields == nil else { return nil }
        guard !slot.prefix.isEmpty, let nestedObjects else { return keyed }
        let path = slot.keyName
        if let known = nestedObjects.containers[path] { return known }
        var container = keyed
        for component in slot.prefix {
            guard container.contains(component), (try? container.decodeNil(forKey: component)) != true else {
                nestedObjects.containers[path] = .some(nil)
                return nil
            }
            container = try container.nestedContainer(keyedBy: VariableKey.self, forKey: component)
        }
        nestedObjects.containers[path] = container
        return container
    }

    /// The closed list of lossless conversions tried after a type mismatch.
    @usableFromInline
    func widened<Value>(_ type: Value.Type, at place: some ValuePlace) -> Value? {
        if Value.self == Double.self {
            if let integer = try? place.decode(Int64.self), let exact = Double(exactly: integer) {
                return exact as? Value
            }
            if let float = try? place.decode(Float.self) { return Double(float) as? Value }
        } else if Value.self == Float.self {
            if let integer = try? place.decode(Int32.self), let exact = Float(exactly: integer) {
                return exact as? Value
            }
        } else if Value.self == Int64.self || Value.self == Int.self {
            if let integer = try? place.decode(Int32.self) {
                return (Value.self == Int.self ? Int(integer) as Any : Int64(integer) as Any) as? Value
            }
        }
        return nil
    }

    @usableFromInline
    func missingReason(_ keyPath: PartialKeyPath<Model>) -> String {
        guard let slot = table.slot(for: keyPath) else {
            return "key set \(table.id) has no key for this property and no default was given"
        }
        return "the key '\(slot.keyName)' is missing and no default was given"
    }

    @usableFromInline
    func failure(
        _ keyPath: PartialKeyPath<Model>, reason: String, underlying: (any Error)? = nil
    ) -> VariableCodingError {
        let slot = table.slot(for: keyPath)
        let path =
            (codingPath.map(\.stringValue) + (slot.map { $0.prefix.map(\.stringValue) + [$0.key.stringValue] } ?? []))
            .joined(separator: ".")
        return .decoding(
            type: typeName(Model.self), keySet: "\(table.id)", property: slot?.property ?? propertyName(keyPath),
            key: slot?.keyName ?? "-", codingPath: path, reason: reason, underlying: underlying
        )
    }
}

/// Where one property's value is: under a key of a keyed container, or in a field of a coder's
/// direct access. The decoding container's rules (missing, `null`, widening) are written once,
/// over this.
@usableFromInline
protocol ValuePlace {
    func contains() -> Bool
    func decodeNil() throws -> Bool
    func decode<Value: Decodable>(_ type: Value.Type) throws -> Value
}

@usableFromInline
struct KeyedPlace: ValuePlace {
    @usableFromInline let container: KeyedDecodingContainer<VariableKey>
    @usableFromInline let key: VariableKey

    @inlinable
    init(container: KeyedDecodingContainer<VariableKey>, key: VariableKey) {
        self.container = container
        self.key = key
    }

    @inlinable func contains() -> Bool { container.contains(key) }
    @inlinable func decodeNil() throws -> Bool { try container.decodeNil(forKey: key) }

    @inlinable
    func decode<Value: Decodable>(_ type: Value.Type) throws -> Value {
        try Self.decode(type, from: container, key: key)
    }

    /// Decodes through the container's typed entry points for the standard primitive types, as
    /// synthesized Codable code does: the generic entry point would go through `init(from:)` and a
    /// single-value container for each of them, several times slower. (Static, as
    /// ``FieldPlace/decode(_:from:field:)`` is.)
    @inlinable
    static func decode<Value: Decodable>(
        _ type: Value.Type, from container: KeyedDecodingContainer<VariableKey>, key: VariableKey
    ) throws -> Value {
        if Value.self == String.self {
            return unsafeBitCast(try container.decode(String.self, forKey: key), to: Value.self)
        }
        if Value.self == Int.self { return unsafeBitCast(try container.decode(Int.self, forKey: key), to: Value.self) }
        if Value.self == Bool.self {
            return unsafeBitCast(try container.decode(Bool.self, forKey: key), to: Value.self)
        }
        if Value.self == Double.self {
            return unsafeBitCast(try container.decode(Double.self, forKey: key), to: Value.self)
        }
        if Value.self == Int64.self {
            return unsafeBitCast(try container.decode(Int64.self, forKey: key), to: Value.self)
        }
        if Value.self == Float.self {
            return unsafeBitCast(try container.decode(Float.self, forKey: key), to: Value.self)
        }
        if Value.self == Int32.self {
            return unsafeBitCast(try container.decode(Int32.self, forKey: key), to: Value.self)
        }
        if Value.self == UInt64.self {
            return unsafeBitCast(try container.decode(UInt64.self, forKey: key), to: Value.self)
        }
        return try container.decode(Value.self, forKey: key)
    }
}

@usableFromInline
struct FieldPlace: ValuePlace {
    @usableFromInline let fields: any FieldDecoding
    @usableFromInline let field: Int

    @inlinable
    init(fields: any FieldDecoding, field: Int) {
        self.fields = fields
        self.field = field
    }

    @inlinable func contains() -> Bool { fields.contains(field: field) }
    @inlinable func decodeNil() throws -> Bool { try fields.decodeNil(field: field) }

    @inlinable
    func decode<Value: Decodable>(_ type: Value.Type) throws -> Value {
        try Self.decode(type, from: fields, field: field)
    }

    /// The typed entry points for the primitive types, as ``KeyedPlace`` does. (Static, so that
    /// the fast path calls it without copying `fields` into a place: a retain and a release.)
    @inlinable
    static func decode<Value: Decodable>(_ type: Value.Type, from fields: any FieldDecoding, field: Int) throws -> Value
    {
        if Value.self == String.self {
            return unsafeBitCast(try fields.decode(String.self, field: field), to: Value.self)
        }
        if Value.self == Int.self { return unsafeBitCast(try fields.decode(Int.self, field: field), to: Value.self) }
        if Value.self == Bool.self { return unsafeBitCast(try fields.decode(Bool.self, field: field), to: Value.self) }
        if Value.self == Double.self {
            return unsafeBitCast(try fields.decode(Double.self, field: field), to: Value.self)
        }
        if Value.self == Int64.self {
            return unsafeBitCast(try fields.decode(Int64.self, field: field), to: Value.self)
        }
        if Value.self == Float.self {
            return unsafeBitCast(try fields.decode(Float.self, field: field), to: Value.self)
        }
        if Value.self == Int32.self {
            return unsafeBitCast(try fields.decode(Int32.self, field: field), to: Value.self)
        }
        if Value.self == UInt64.self {
            return unsafeBitCast(try fields.decode(UInt64.self, field: field), to: Value.self)
        }
        return try fields.decode(Value.self, field: field)
    }
}

/// Why a coder's error happened, in one line.
@usableFromInline
func reason(of error: any Error) -> String {
    switch error {
    case DecodingError.typeMismatch(let type, let context): return "expected \(type): \(context.debugDescription)"
    case DecodingError.valueNotFound(let type, let context): return "no \(type) value: \(context.debugDescription)"
    case DecodingError.keyNotFound(let key, let context):
        return "missing key '\(key.stringValue)': \(context.debugDescription)"
    case DecodingError.dataCorrupted(let context): return "corrupted data: \(context.debugDescription)"
    default: return "\(error)"
    }
}

/// The nested objects a container has entered, shared by its copies.
@usableFromInline
final class NestedObjects {
    @usableFromInline var containers: [String: KeyedDecodingContainer<VariableKey>?] = [:]
    @usableFromInline init() {}
}
