// Recorded coding: a model's own `encode(to:)` run once per record into a table of plain values
// by field number, which the coder then writes as it writes what generated code emits (see
// FieldScanning.swift). The coding methods a person writes by key path then take the path the
// `@VariablyCoded` macro's code takes, with their lookups resolved by key-set field number.
//
// Like generated code, it is an optimization only: a value of any other type, or anything
// unusual, declines, and the coder runs the ordinary path, which also gives the errors.

/// One property's value as a model's `encode(to:)` hands it over, by the type it was given in.
@_documentation(visibility: internal)
public enum RecordedField {
    /// Not written (yet): a property left out, or `nil` through `encodeValueIfPresent`.
    case absent
    case bool(Bool)
    case string(String)
    case double(Double)
    case float(Float)
    case int(Int)
    case int32(Int32)
    case int64(Int64)
    case uint64(UInt64)
}

extension VariablyEncodable {
    /// Runs the model's `encode(to:)` into a table of its values by the field numbers of
    /// `layout`, and returns what `body` returns for the table; `false` without calling `body`
    /// when the model writes a value that is not of a plain type (String, Bool, Double, Float,
    /// Int, Int32, Int64, UInt64) or writes a field twice: the caller then encodes the ordinary way.
    /// `body` may move values out of the table, leaving ``RecordedField/absent`` in their place.
    ///
    /// - Throws: what `encode(to:)` throws (a property the key set has no key for).
    @inlinable
    @_documentation(visibility: internal)
    public func recordFields(
        layout: FieldLayout<Self>, _ body: (UnsafeMutableBufferPointer<RecordedField>) -> Bool
    ) throws -> Bool {
        let count = layout.table.slots.count
        return try withUnsafeTemporaryAllocation(of: RecordedField.self, capacity: count) { values in
            guard let base = values.baseAddress else { return false }
            base.initialize(repeating: .absent, count: count)
            // Only strings need deinitializing; a body that moved them out left none.
            defer {
                for index in 0..<count {
                    if case .string = base[index] { (base + index).deinitialize(count: 1) }
                }
            }
            var container = EncodingContainer(recording: base, table: layout.table)
            try encode(to: &container)
            return !container.declinedRecording && body(values)
        }
    }
}

extension EncodingContainer {
    /// Notes `value` in the recorded field's place; declines a value of another type, or a field
    /// written twice (the ordinary path refuses that).
    @inlinable
    mutating func record<Value>(_ value: Value, at place: UnsafeMutablePointer<RecordedField>) {
        guard case .absent = place.pointee else { return declinedRecording = true }
        if Value.self == String.self {
            place.pointee = .string(unsafeBitCast(value, to: String.self))
        } else if Value.self == Int.self {
            place.pointee = .int(unsafeBitCast(value, to: Int.self))
        } else if Value.self == Bool.self {
            place.pointee = .bool(unsafeBitCast(value, to: Bool.self))
        } else if Value.self == Double.self {
            place.pointee = .double(unsafeBitCast(value, to: Double.self))
        } else if Value.self == Int64.self {
            place.pointee = .int64(unsafeBitCast(value, to: Int64.self))
        } else if Value.self == Float.self {
            place.pointee = .float(unsafeBitCast(value, to: Float.self))
        } else if Value.self == Int32.self {
            place.pointee = .int32(unsafeBitCast(value, to: Int32.self))
        } else if Value.self == UInt64.self {
            place.pointee = .uint64(unsafeBitCast(value, to: UInt64.self))
        } else {
            declinedRecording = true
        }
    }
}
