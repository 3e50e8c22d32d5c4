// Generated coding: code written for one model type (by the `@VariablyCoded` macro) that reads
// and writes the model's properties by number, in the order the data holds them, with no key
// paths and no per-property lookups.
//
// It is an optimization and nothing else. The model's ordinary `init(from:)` and `encode(to:)`
// stay the definition of what a payload means: generated code either produces exactly what they
// would, or declines (throws ``FieldScanDeclined`` / returns `false`), and the coder then runs
// the ordinary path, which also gives the errors. So a scanner or emitter may decline anything it
// finds unusual (an unknown key, a tagged value, a chunked string); it must never accept a value
// the ordinary path would read differently or refuse.
//
// Properties are numbered by their place in the model's `scannedProperties` (the macro lists
// the stored properties in declaration order). The coder matches those key paths against a key
// set once, and from then on speaks property numbers.

/// Thrown by generated code that declines to read a payload (see ``FieldScanning``). Thrown as a
/// typed error: declining allocates nothing.
@_documentation(visibility: internal)
public struct FieldScanDeclined: Error {
    public init() {}
}

/// A coder's sequential read access to one encoded model, for generated code.
///
/// Generated code calls ``nextProperty()`` until it returns `nil`, reads each property's value
/// with the method of its type, and at the end asks ``isComplete``. Every method returns `nil`
/// (or `false`) to decline; once it has declined, the scanner stays declined.
@_documentation(visibility: internal)
public protocol FieldScanning {
    /// The number of the next entry's property; `nil` after the last entry, or when the entry is
    /// not one generated code can read (then ``isComplete`` is `false`).
    mutating func nextProperty() -> Int?
    /// Whether every entry was read, each property at most once, and the data ends there.
    var isComplete: Bool { get }
    /// Consumes a `null` and returns `true`, or returns `false` and consumes nothing.
    mutating func skipNull() -> Bool
    mutating func bool() -> Bool?
    mutating func string() -> String?
    mutating func double() -> Double?
    mutating func float() -> Float?
    mutating func int() -> Int?
    mutating func int32() -> Int32?
    mutating func int64() -> Int64?
    mutating func uint64() -> UInt64?
}

/// A coder's write access to one model's entries, for generated code.
///
/// Generated code tells the emitter how many entries the map has (the count of ``propertyOrder``
/// less the optional properties that are `nil`), then goes through ``propertyOrder`` and writes
/// each property's value with its number: the emitter writes the key. It returns `false` to
/// decline (a property it cannot write), and the coder then runs the ordinary path.
@_documentation(visibility: internal)
public protocol FieldEmitting: ~Copyable {
    /// The numbers of the properties the key set has keys for, in the order the coder writes
    /// them. Valid while the emitter is. (A buffer rather than an array, so that generated code
    /// reads it without retaining it or calling the emitter per property.)
    var propertyOrder: UnsafeBufferPointer<Int> { get }
    /// Whether the key set has a key for the property.
    func hasKey(_ property: Int) -> Bool
    mutating func beginMap(count: Int)
    mutating func emit(_ value: Bool, property: Int)
    mutating func emit(_ value: String, property: Int)
    mutating func emit(_ value: Double, property: Int)
    mutating func emit(_ value: Float, property: Int)
    mutating func emit(_ value: Int, property: Int)
    mutating func emit(_ value: Int32, property: Int)
    mutating func emit(_ value: Int64, property: Int)
    mutating func emit(_ value: UInt64, property: Int)
}

extension VariablyDecodable {
    /// No generated code: every payload takes the ordinary path.
    @_documentation(visibility: internal)
    public static var scannedProperties: [PartialKeyPath<Self>] { [] }
    /// No generated code: declines.
    @_documentation(visibility: internal)
    public static func scan<S: FieldScanning>(_ scanner: inout S) throws(FieldScanDeclined) -> Self {
        throw FieldScanDeclined()
    }
}

extension VariablyEncodable {
    /// No generated code: every payload takes the ordinary path.
    @_documentation(visibility: internal)
    public static var emittedProperties: [PartialKeyPath<Self>] { [] }
    /// No generated code: declines.
    @_documentation(visibility: internal)
    public func emit<E: FieldEmitting & ~Copyable>(into emitter: inout E) -> Bool { false }
}

extension FieldLayout {
    /// For each of `properties`, the field number of its key in this layout, or `nil` when the
    /// key set has no key for it.
    @_documentation(visibility: internal)
    public func fields(of properties: [PartialKeyPath<Model>]) -> [Int?] {
        properties.map { table.field(for: $0) }
    }
}
