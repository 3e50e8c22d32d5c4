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
    /// Calls `body` with the key bytes (``keyBytes``); the fixed-size keys lend them from the
    /// stack, so that a get by ID allocates nothing. Implement it only to save that allocation.
    ///
    /// - Throws: only what `body` throws.
    func withKeyBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R
    /// The identity encoded by `keyBytes`, or `nil` when they are not one.
    init?(keyBytes: some Swift.Collection<UInt8>)
    /// How the keys are encoded, recorded in the registry so that tools can read and type IDs.
    static var keyKind: KeyKind { get }
}

extension HoardKey {
    public func withKeyBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try keyBytes.withUnsafeBytes(body)
    }

    /// A key type of your own: tools show its keys as hex.
    public static var keyKind: KeyKind { .custom }
}

extension Int64: HoardKey {
    public static var keyKind: KeyKind { .int }

    /// 8 bytes big-endian with the sign bit flipped, so that negative numbers sort first.
    public var keyBytes: [UInt8] { withKeyBytes { Array($0) } }

    public func withKeyBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withUnsafeBytes(of: (UInt64(bitPattern: self) ^ (1 << 63)).bigEndian, body)
    }

    public init?(keyBytes: some Swift.Collection<UInt8>) {
        guard keyBytes.count == 8 else { return nil }
        // Contiguous bytes (an array, an LMDB value) are read as one word.
        let raw =
            keyBytes.withContiguousStorageIfAvailable {
                UInt64(bigEndian: UnsafeRawPointer($0.baseAddress!).loadUnaligned(as: UInt64.self))
            } ?? keyBytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        self = Int64(bitPattern: raw ^ (1 << 63))
    }
}

extension Int: HoardKey {
    public static var keyKind: KeyKind { .int }

    /// The key of the same value as `Int64`.
    public var keyBytes: [UInt8] { Int64(self).keyBytes }

    public func withKeyBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try Int64(self).withKeyBytes(body)
    }

    public init?(keyBytes: some Swift.Collection<UInt8>) {
        guard let value = Int64(keyBytes: keyBytes), let exact = Int(exactly: value) else { return nil }
        self = exact
    }
}

extension UInt64: HoardKey {
    public static var keyKind: KeyKind { .uint }

    /// 8 bytes big-endian.
    public var keyBytes: [UInt8] { withKeyBytes { Array($0) } }

    public func withKeyBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withUnsafeBytes(of: bigEndian, body)
    }

    public init?(keyBytes: some Swift.Collection<UInt8>) {
        guard keyBytes.count == 8 else { return nil }
        self = keyBytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    }
}

extension String: HoardKey {
    public static var keyKind: KeyKind { .string }

    /// The byte 0x01 followed by the UTF-8 bytes: LMDB refuses empty keys, and a fixed first byte
    /// keeps byte order equal to UTF-8 order (and prefixes prefixes).
    public var keyBytes: [UInt8] { [0x01] + Array(utf8) }

    public init?(keyBytes: some Swift.Collection<UInt8>) {
        guard keyBytes.first == 0x01, let text = String(validating: keyBytes.dropFirst(), as: UTF8.self) else {
            return nil
        }
        self = text
    }
}

extension UUID: HoardKey {
    public static var keyKind: KeyKind { .uuid }

    /// The 16 bytes of the UUID.
    public var keyBytes: [UInt8] { withKeyBytes { Array($0) } }

    public func withKeyBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withUnsafeBytes(of: uuid, body)
    }

    public init?(keyBytes: some Swift.Collection<UInt8>) {
        guard keyBytes.count == 16 else { return nil }
        let bytes = Array(keyBytes)
        self = bytes.withUnsafeBytes { UUID(uuid: $0.loadUnaligned(as: uuid_t.self)) }
    }
}
