#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

// Conveniences that name the key set in the call, without touching a coder's shared `userInfo`.

extension JSONDecoder {
    /// Decodes `type` from JSON with `keySet` (for example `.remote("v2")`).
    ///
    /// - Throws: ``VariableCodingError`` when the key set is not one the type declares, or what the coder throws
    ///   (a `DecodingError` for malformed input or a value of the wrong type).
    public func decode<T: Decodable>(_ type: T.Type, from data: Data, keySet: KeySetID) throws -> T {
        try withKeySet(keySet) { try decode(type, from: data) }
    }
}

extension JSONEncoder {
    /// Encodes `value` as JSON with `keySet`.
    ///
    /// - Throws: ``VariableCodingError`` when the key set is not one the type declares or has no key for a
    ///   property, or what the coder throws.
    public func encode<T: Encodable>(_ value: T, keySet: KeySetID) throws -> Data {
        try withKeySet(keySet) { try encode(value) }
    }
}

extension PropertyListDecoder {
    /// Decodes `type` from a property list with `keySet`.
    ///
    /// - Throws: ``VariableCodingError`` when the key set is not one the type declares, or what the coder throws
    ///   (a `DecodingError` for malformed input or a value of the wrong type).
    public func decode<T: Decodable>(_ type: T.Type, from data: Data, keySet: KeySetID) throws -> T {
        try withKeySet(keySet) { try decode(type, from: data) }
    }
}

extension PropertyListEncoder {
    /// Encodes `value` as a property list with `keySet`.
    ///
    /// - Throws: ``VariableCodingError`` when the key set is not one the type declares or has no key for a
    ///   property, or what the coder throws.
    public func encode<T: Encodable>(_ value: T, keySet: KeySetID) throws -> Data {
        try withKeySet(keySet) { try encode(value) }
    }
}
