#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// A model identity usable as a store key: its bytes sort, byte-wise, in the natural order of
/// the identities, so range scans and merges by key are correct.
///
/// Conformances: `Int`, `Int64` (negative before positive), `UInt64`, `String` (UTF-8 order, the
/// empty string included), `UUID`. docs/FORMAT.md gives each encoding.
public protocol HoardKey: Hashable, Sendable {
    /// The key bytes (1 to 511 of them).
    var keyBytes: [UInt8] { get }
    /// The identity encoded by `keyBytes`, or `nil` when they are not one.
    init?(keyBytes: some Swift.Collection<UInt8>)
}

extension Int64: HoardKey {
    /// 8 bytes big-endian with the sign bit flipped, so that negative numbers sort first.
    public var keyBytes: [UInt8] {
        withUnsafeBytes(of: (UInt64(bitPattern: self) ^ (1 << 63)).bigEndian) { Array($0) }
    }

    public init?(keyBytes: some Swift.Collection<UInt8>) {
        guard keyBytes.count == 8 else { return nil }
        let raw = keyBytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        self = Int64(bitPattern: raw ^ (1 << 63))
    }
}

extension Int: HoardKey {
    /// The key of the same value as `Int64`.
    public var keyBytes: [UInt8] { Int64(self).keyBytes }

    public init?(keyBytes: some Swift.Collection<UInt8>) {
        guard let value = Int64(keyBytes: keyBytes), let exact = Int(exactly: value) else { return nil }
        self = exact
    }
}

extension UInt64: HoardKey {
    /// 8 bytes big-endian.
    public var keyBytes: [UInt8] { withUnsafeBytes(of: bigEndian) { Array($0) } }

    public init?(keyBytes: some Swift.Collection<UInt8>) {
        guard keyBytes.count == 8 else { return nil }
        self = keyBytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    }
}

extension String: HoardKey {
    /// The byte 0x01 followed by the UTF-8 bytes: LMDB refuses empty keys, and a fixed first byte
    /// keeps byte order equal to UTF-8 order (and prefixes prefixes).
    public var keyBytes: [UInt8] { [0x01] + Array(utf8) }

    public init?(keyBytes: some Swift.Collection<UInt8>) {
        guard keyBytes.first == 0x01, let text = String(validating: keyBytes.dropFirst(), as: UTF8.self) else { return nil }
        self = text
    }
}

extension UUID: HoardKey {
    /// The 16 bytes of the UUID.
    public var keyBytes: [UInt8] { withUnsafeBytes(of: uuid) { Array($0) } }

    public init?(keyBytes: some Swift.Collection<UInt8>) {
        guard keyBytes.count == 16 else { return nil }
        let bytes = Array(keyBytes)
        self = bytes.withUnsafeBytes { UUID(uuid: $0.loadUnaligned(as: uuid_t.self)) }
    }
}

/// A key for messages: printable text as it is, anything else as hex.
func describeKey(_ bytes: [UInt8]) -> String {
    if bytes.first == 0x01, let text = String(validating: bytes.dropFirst(), as: UTF8.self) { return "\"\(text)\"" }
    if bytes.count == 8 {
        let raw = bytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return String(Int64(bitPattern: raw ^ (1 << 63)))
    }
    return "0x" + bytes.map(hex).joined()
}
