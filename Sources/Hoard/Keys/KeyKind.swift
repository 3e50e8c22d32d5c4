#if canImport(FoundationEssentials)
internal import FoundationEssentials
#else
internal import Foundation
#endif

/// The encodings of IDs docs/FORMAT.md specifies; the registry records which one a collection uses.
///
/// A key kind is the one owner of what key bytes mean: parsing an ID typed by a person,
/// checking that stored bytes are a key of the kind, and describing them. The store's errors, the
/// LMDB layer's error context and the `hoard` CLI all go through it, so a key reads the same
/// everywhere and is never described by guessing from its length or first byte.
public enum KeyKind: String, Sendable, Hashable, CaseIterable {
    /// `Int`/`Int64`: 8 bytes big-endian, sign bit flipped.
    case int
    /// `UInt64`: 8 bytes big-endian.
    case uint
    /// `String`: 0x01, then UTF-8.
    case string
    /// `UUID`: its 16 bytes.
    case uuid
    /// Another `HoardKey` type: bytes only its code understands.
    case custom

    /// The key bytes of `text` read as an ID of this kind, or `nil` when it is not one.
    ///
    /// For every kind but ``string``, `0x` followed by hex digits gives raw key bytes (for
    /// reaching a damaged key); a string ID is always the text itself, `"0x10"` included.
    public func keyBytes(parsing text: String) -> [UInt8]? {
        let typed: [UInt8]? =
            switch self {
            case .int: Int64(text).map(\.keyBytes)
            case .uint: UInt64(text).map(\.keyBytes)
            case .string: text.keyBytes
            case .uuid: UUID(uuidString: text).map(\.keyBytes)
            case .custom: nil
            }
        if let typed { return typed }
        return self == .string ? nil : bytes(hex: text)
    }

    /// Whether `bytes` are a well-formed key of this kind (any bytes are a ``custom`` key).
    public func accepts(_ bytes: some Swift.Collection<UInt8>) -> Bool {
        switch self {
        case .int, .uint: bytes.count == 8
        case .uuid: bytes.count == 16
        case .string: String(keyBytes: bytes) != nil
        case .custom: true
        }
    }

    /// The ID in `bytes` as text: the number, the string, the UUID; `0x` and hex for a
    /// ``custom`` key and for bytes that are not a key of this kind.
    public func describe(_ bytes: some Swift.Collection<UInt8>) -> String {
        switch self {
        case .int: if let value = Int64(keyBytes: bytes) { return String(value) }
        case .uint: if let value = UInt64(keyBytes: bytes) { return String(value) }
        case .string: if let value = String(keyBytes: bytes) { return value }
        case .uuid: if let value = UUID(keyBytes: bytes) { return value.uuidString }
        case .custom: break
        }
        return "0x" + hexString(bytes)
    }
}

/// The bytes of a stored record's key with the kind of ID they encode: what the store's errors
/// and reports carry, so that a caller can act on the key (read it back as an ID, delete the
/// record) and a person can read it.
public struct StoredKey: Sendable, Hashable, CustomStringConvertible {
    /// The key bytes as stored.
    public let bytes: [UInt8]
    /// How the collection encodes its IDs.
    public let kind: KeyKind

    /// A key of `bytes`, as a collection whose IDs are of `kind` stores them.
    public init(_ bytes: some Swift.Collection<UInt8>, kind: KeyKind) {
        self.bytes = Array(bytes)
        self.kind = kind
    }

    /// The key as an ID of type `ID`, or `nil` when its bytes are not one.
    public func id<ID: HoardKey>(as type: ID.Type = ID.self) -> ID? { ID(keyBytes: bytes) }

    /// The ID as text (``KeyKind/describe(_:)``).
    public var text: String { kind.describe(bytes) }

    /// The ID as messages show it: ``text``, with string IDs quoted so that `"5"` and `5` differ.
    public var description: String {
        kind == .string && kind.accepts(bytes) ? "\"\(text)\"" : text
    }
}

/// Bytes from hex text (with or without a leading `0x`), or `nil`.
func bytes(hex text: String) -> [UInt8]? {
    var digits = Substring(text)
    if digits.hasPrefix("0x") { digits = digits.dropFirst(2) }
    guard digits.count % 2 == 0, !digits.isEmpty else { return nil }
    var result: [UInt8] = []
    var index = digits.startIndex
    while index < digits.endIndex {
        let next = digits.index(index, offsetBy: 2)
        guard let byte = UInt8(digits[index..<next], radix: 16) else { return nil }
        result.append(byte)
        index = next
    }
    return result
}

/// Two lowercase hex digits per byte.
func hexString(_ bytes: some Sequence<UInt8>) -> String {
    bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
}
