// The `@VariablyCoded` macro, in a module of its own: the VariableCoding library itself does not
// need swift-syntax, only code that uses the macro does.
import VariableCoding

/// Writes a struct's `init(from:)` and `encode(to:)` for its key sets, from its stored properties:
/// each property is read with `decodeValue(for:)` (with its initial value as the default when it
/// has one) or, when optional, `decodeValueIfPresent(for:)`, and written with `encodeValue` or
/// `encodeValueIfPresent`. A struct that writes one of the two itself keeps it.
///
/// When every stored property is a `String`, `Bool`, `Int`, `Int32`, `Int64`, `UInt64`,
/// `Double`, `Float` or an optional of one, the macro also writes ``VariablyDecodable/scan(_:)``
/// and ``VariablyEncodable/emit(into:)``: the same reading and writing by property number, which
/// a store uses instead of looking every property up by key path (see ``FieldScanning``).
///
/// ```swift
/// @VariablyCoded
/// struct User: Identifiable {
///     var id: Int64
///     var name: String
///     var nickname: String?
///     var age: Int = 0
///
///     static let keySets = KeySets<User>(local: [1: [\.id: "ID", \.name: "NAME", \.nickname: "NICK", \.age: "AGE"]])
/// }
/// ```
@attached(
    extension,
    conformances: VariablyDecodable, VariablyEncodable,
    names: named(init), named(encode), named(scannedProperties), named(scan), named(emittedProperties), named(emit)
)
public macro VariablyCoded() = #externalMacro(module: "VariableCodingMacrosPlugin", type: "VariablyCodedMacro")
