/// Where a model writes its properties, by key path, with the key names of the key set being
/// encoded.
///
/// ```swift
/// func encode(to container: inout EncodingContainer<User>) throws {
///     try container.encodeValue(name, for: \.name)
///     try container.encodeValueIfPresent(nickname, for: \.nickname)   // nil: no key at all
/// }
/// ```
///
/// A property the key set has no key for is left out (a remote API that does not know a local
/// field, an old local version), except in the current local key set and in any local key set
/// while a store encodes a record: storage must not lose data, so there it is
/// ``VariableCodingError/propertyWithoutKey(type:keySet:property:)``.
/// Key names with dots are written as nested objects.
public struct EncodingContainer<Model> {
    /// Where the values go: the model's object through Codable, or (exclusively) a coder's
    /// direct field access, for flat key sets only (see ``KeySets/fieldLayout(for:)``), with
    /// ``detachedKeyedEncoding`` in `keyed`. Neither an enum nor an optional container: both are
    /// inspected and copied through runtime calls on every value.
    @usableFromInline var keyed: KeyedEncodingContainer<VariableKey>
    @usableFromInline let fields: (any FieldEncoding)?
    /// Or (exclusively) a table of the values by field number, to be written by the coder (see
    /// FieldRecording.swift), and whether a value did not fit in it.
    @usableFromInline let recorded: UnsafeMutablePointer<RecordedField>?
    @usableFromInline var declinedRecording = false
    @usableFromInline let table: KeyTable<Model>
    /// Values for dotted key names, written as nested objects when the model is done.
    @usableFromInline var nestedValues: [(slot: Slot, value: any Encodable)] = []

    @inlinable
    init(keyed: KeyedEncodingContainer<VariableKey>, table: KeyTable<Model>) {
        self.keyed = keyed
        self.fields = nil
        self.recorded = nil
        self.table = table
    }

    @inlinable
    init(fields: any FieldEncoding, table: KeyTable<Model>) {
        self.keyed = detachedKeyedEncoding
        self.fields = fields
        self.recorded = nil
        self.table = table
    }

    @inlinable
    init(recording recorded: UnsafeMutablePointer<RecordedField>, table: KeyTable<Model>) {
        self.keyed = detachedKeyedEncoding
        self.fields = nil
        self.recorded = recorded
        self.table = table
    }

    /// The key set being encoded (never `.currentLocal`: the version it stands for).
    @inlinable
    public var keySet: KeySetID { table.id }
    /// The local version being encoded, or `nil` for a remote key set.
    @inlinable
    public var localVersion: Int? { table.localVersion }
    /// The coding path of the model.
    @inlinable
    public var codingPath: [any CodingKey] { fields == nil && recorded == nil ? keyed.codingPath : [] }

    /// Writes the property's value (`nil` as `null`).
    ///
    /// - Throws: ``VariableCodingError/propertyWithoutKey(type:keySet:property:)`` when storage encodes a property its
    ///   key set has no key for, or what the coder throws for the value.
    @inlinable
    public mutating func encodeValue<Value: Encodable>(_ value: Value, for keyPath: KeyPath<Model, Value>) throws {
        try encodeValue(value, forProperty: keyPath)
    }

    /// Writes a value of your choice for the property: for a property whose type differs in the
    /// key set being encoded.
    ///
    /// - Throws: ``VariableCodingError/propertyWithoutKey(type:keySet:property:)`` when storage encodes a property its
    ///   key set has no key for, or what the coder throws for the value.
    @inlinable
    public mutating func encodeValue<Value: Encodable>(
        _ value: Value, forProperty keyPath: PartialKeyPath<Model>
    ) throws {
        if let recorded {
            guard let field = table.field(for: keyPath) else {
                _ = try slot(for: keyPath)  // the error for the current local key set
                return
            }
            return record(value, at: recorded + field)
        }
        if let fields {
            guard let field = table.field(for: keyPath) else {
                _ = try slot(for: keyPath)  // the error for the current local key set
                return
            }
            return try encodePrimitiveOrValue(value, into: fields, field: field)
        }
        guard let slot = try slot(for: keyPath) else { return }
        if slot.prefix.isEmpty {
            try encodePrimitiveOrValue(value, into: &keyed, forKey: slot.key)
        } else {
            nestedValues.append((slot, value))
        }
    }

    /// Writes the property's value, or no key at all when it is `nil`.
    ///
    /// - Throws: ``VariableCodingError/propertyWithoutKey(type:keySet:property:)`` when storage encodes a property its
    ///   key set has no key for, or what the coder throws for the value.
    @inlinable
    public mutating func encodeValueIfPresent<Value: Encodable>(
        _ value: Value?, for keyPath: KeyPath<Model, Value?>
    ) throws {
        guard let value else {
            _ = try slot(for: keyPath)  // still checks that the key set knows the property
            return
        }
        try encodeValue(value, forProperty: keyPath)
    }

    /// Encodes through the container's typed entry points for the standard primitive types, as
    /// synthesized Codable code does (see `KeyedPlace.decode`).
    @inlinable
    func encodePrimitiveOrValue<Value: Encodable>(
        _ value: Value, into keyed: inout KeyedEncodingContainer<VariableKey>, forKey key: VariableKey
    ) throws {
        if Value.self == String.self { return try keyed.encode(unsafeBitCast(value, to: String.self), forKey: key) }
        if Value.self == Int.self { return try keyed.encode(unsafeBitCast(value, to: Int.self), forKey: key) }
        if Value.self == Bool.self { return try keyed.encode(unsafeBitCast(value, to: Bool.self), forKey: key) }
        if Value.self == Double.self { return try keyed.encode(unsafeBitCast(value, to: Double.self), forKey: key) }
        if Value.self == Int64.self { return try keyed.encode(unsafeBitCast(value, to: Int64.self), forKey: key) }
        if Value.self == Float.self { return try keyed.encode(unsafeBitCast(value, to: Float.self), forKey: key) }
        if Value.self == Int32.self { return try keyed.encode(unsafeBitCast(value, to: Int32.self), forKey: key) }
        if Value.self == UInt64.self { return try keyed.encode(unsafeBitCast(value, to: UInt64.self), forKey: key) }
        try keyed.encode(value, forKey: key)
    }

    /// The same for a coder's direct field access.
    @inlinable
    func encodePrimitiveOrValue<Value: Encodable>(_ value: Value, into fields: any FieldEncoding, field: Int) throws {
        if Value.self == String.self { return try fields.encode(unsafeBitCast(value, to: String.self), field: field) }
        if Value.self == Int.self { return try fields.encode(unsafeBitCast(value, to: Int.self), field: field) }
        if Value.self == Bool.self { return try fields.encode(unsafeBitCast(value, to: Bool.self), field: field) }
        if Value.self == Double.self { return try fields.encode(unsafeBitCast(value, to: Double.self), field: field) }
        if Value.self == Int64.self { return try fields.encode(unsafeBitCast(value, to: Int64.self), field: field) }
        if Value.self == Float.self { return try fields.encode(unsafeBitCast(value, to: Float.self), field: field) }
        if Value.self == Int32.self { return try fields.encode(unsafeBitCast(value, to: Int32.self), field: field) }
        if Value.self == UInt64.self { return try fields.encode(unsafeBitCast(value, to: UInt64.self), field: field) }
        try fields.encode(value, field: field)
    }

    @inlinable
    func slot(for keyPath: PartialKeyPath<Model>) throws -> Slot? {
        if let slot = table.slot(for: keyPath) { return slot }
        if table.isCurrentLocal || (table.localVersion != nil && KeySetContext.isStorage) {
            throw VariableCodingError.propertyWithoutKey(
                type: typeName(Model.self), keySet: "\(table.id)", property: propertyName(keyPath))
        }
        return nil
    }

    /// Writes the values of dotted key names, one nested object per prefix.
    @inlinable
    mutating func finish() throws {
        guard !nestedValues.isEmpty else { return }
        try writeNested()
    }

    @usableFromInline
    mutating func writeNested() throws {
        guard fields == nil && recorded == nil else { return }  // direct field access has no dotted keys
        try Self.write(nestedValues.map { ($0.slot.prefix[...], $0.slot.key, $0.value) }, into: &keyed)
    }

    private static func write(
        _ items: [(prefix: ArraySlice<VariableKey>, key: VariableKey, value: any Encodable)],
        into container: inout KeyedEncodingContainer<VariableKey>
    ) throws {
        var groups:
            [(name: VariableKey, items: [(prefix: ArraySlice<VariableKey>, key: VariableKey, value: any Encodable)])] =
                []
        for item in items {
            guard let first = item.prefix.first else {
                try container.encode(item.value, forKey: item.key)
                continue
            }
            let rest = (item.prefix.dropFirst(), item.key, item.value)
            if let index = groups.firstIndex(where: { $0.name == first }) {
                groups[index].items.append(rest)
            } else {
                groups.append((first, [rest]))
            }
        }
        for group in groups {
            var nested = container.nestedContainer(keyedBy: VariableKey.self, forKey: group.name)
            try write(group.items, into: &nested)
        }
    }
}
