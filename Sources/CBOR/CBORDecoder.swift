#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif
internal import Synchronization

/// Decodes `Decodable` values from RFC 8949 CBOR, hardened for untrusted bytes.
///
/// ```swift
/// let user = try CBORDecoder().decode(User.self, from: bytes)
/// // Straight from an LMDB value, without copying it first:
/// try txn.withValue(forKey: key, in: db) { raw in try CBORDecoder().decode(User.self, from: raw) }
/// ```
///
/// The whole input is checked before any value is built: every length against the remaining
/// bytes (so no allocation is larger than the input), nesting against ``maxDepth``, trailing bytes,
/// reserved and misplaced bytes. Text is checked for valid UTF-8 as it is decoded; a keyed
/// container refuses a map with a duplicate key. Such problems throw ``CBORDecodingError`` with
/// the byte offset and coding path. Well-formed input of the wrong shape throws Swift's
/// `DecodingError` (`typeMismatch`, `keyNotFound`, `valueNotFound`) with the offset in its description.
///
/// Integers decode into any integer type that holds them exactly; `Double` and `Float` accept
/// floats of every width and integers they hold exactly. Indefinite-length items are accepted.
public struct CBORDecoder: Sendable {
    /// The default nesting limit.
    public static let defaultMaxDepth = 128

    /// The deepest nesting accepted; deeper input is refused before decoding starts.
    public var maxDepth: Int
    /// Passed to the values' `init(from:)` as `decoder.userInfo` (for example, a key-set choice).
    public var userInfo: [CodingUserInfoKey: any Sendable] {
        didSet { userInfoBox = UserInfoBox(userInfo) }
    }
    private(set) var userInfoBox: UserInfoBox

    public init(maxDepth: Int = CBORDecoder.defaultMaxDepth, userInfo: [CodingUserInfoKey: any Sendable] = [:]) {
        self.maxDepth = maxDepth
        self.userInfo = userInfo
        self.userInfoBox = userInfo.isEmpty ? .empty : UserInfoBox(userInfo)
    }

    /// Decodes a `T` from bytes that must hold exactly one data item.
    ///
    /// The bytes are read in place; they must stay valid during the call (inside an LMDB read
    /// transaction, for example).
    public func decode<T: Decodable>(_ type: T.Type, from buffer: UnsafeRawBufferPointer) throws -> T {
        let reader = Reader(buffer, maxDepth: maxDepth)
        let state = DecoderState.take(reader: reader, userInfo: userInfoBox)
        defer { DecoderState.recycle(state) }
        let value = try state.decodeValue(type, at: 0)
        // Every read above was bounds-checked, and every item a container reached was checked
        // whole (depth, lengths, structure) before use. A top-level map is checked whole when its
        // container indexes it; anything else is checked here, before the value is returned.
        let end = try state.topLevelEnd ?? reader.skip(at: 0)
        guard end == buffer.count else {
            throw CBORDecodingError(.trailingBytes(count: buffer.count - end), at: end)
        }
        return value
    }

    /// Decodes a `T` from an array of bytes.
    public func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        try bytes.withUnsafeBytes { try decode(type, from: $0) }
    }

    /// Decodes a `T` from `Data` or any other contiguous bytes.
    public func decode<T: Decodable>(_ type: T.Type, from bytes: some ContiguousBytes) throws -> T {
        try bytes.withUnsafeBytes { try decode(type, from: $0) }
    }
}

// MARK: - The decoder

/// The state of one `decode` call; it is also the `Decoder` handed to values. One instance serves
/// every nested value (its offset and path are saved and restored around each), so decoding a
/// nested value allocates no decoder.
///
/// One decode call runs on one thread and never holds two accesses to a property at once, so the
/// mutable properties opt out of dynamic exclusivity checks.
final class DecoderState: Decoder, @unchecked Sendable {
    // @unchecked: a state serves one decode call at a time; the pool hands each out exclusively.
    @exclusivity(unchecked) var reader: Reader
    @exclusivity(unchecked) var offset = 0
    @exclusivity(unchecked) var path: [any CodingKey] = []
    /// The entries of every map indexed during this decode call (see `indexMap`).
    @exclusivity(unchecked) var entries = RawStack<MapEntry>(capacity: 64)
    /// Per indexed map, the entry to try first on the next lookup.
    @exclusivity(unchecked) var guesses = RawStack<Int>()
    /// For `decodeFields`: the value offset of each field of its key table (-1: not in the map).
    @exclusivity(unchecked) var fieldValues = RawStack<Int>()
    /// Text keys that arrived as indefinite-length strings, by entry number.
    @exclusivity(unchecked) var chunkedKeys: [Int: String] = [:]
    /// Counts decode calls, so that a container kept past its call is recognized.
    @exclusivity(unchecked) var generation = 0
    /// Where the top-level item ends, once a container has indexed it whole.
    @exclusivity(unchecked) var topLevelEnd: Int?
    @exclusivity(unchecked) var userInfoStorage: UserInfoBox

    init(reader: Reader, userInfo: UserInfoBox) {
        self.reader = reader
        self.userInfoStorage = userInfo
    }

    /// A state kept for reuse: steady-state decoding allocates no decoder and no map index.
    /// (One slot: a second thread decoding at the same time simply makes its own state.)
    private static let spare = Mutex<DecoderState?>(nil)

    static func take(reader: Reader, userInfo: UserInfoBox) -> DecoderState {
        guard let state = spare.withLock({ $0.take() }) else { return DecoderState(reader: reader, userInfo: userInfo) }
        state.reader = reader
        state.userInfoStorage = userInfo
        return state
    }

    static func recycle(_ state: DecoderState) {
        state.generation &+= 1
        state.offset = 0
        state.topLevelEnd = nil
        if !state.path.isEmpty { state.path.removeAll(keepingCapacity: true) }
        // Keep the entry lists for the next call unless one large value made them big.
        state.entries.removeAll(keepingUpTo: 4096)
        state.guesses.removeAll(keepingUpTo: 1024)
        state.fieldValues.removeAll(keepingUpTo: 1024)
        if !state.chunkedKeys.isEmpty { state.chunkedKeys = [:] }
        state.userInfoStorage = .empty
        state.reader = Reader(UnsafeRawBufferPointer(start: nil, count: 0), maxDepth: 0)
        spare.withLock { if $0 == nil { $0 = state } }
    }

    var codingPath: [any CodingKey] { path }
    var userInfo: [CodingUserInfoKey: Any] { userInfoStorage.values }

    var pathText: String {
        path.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
    }

    // MARK: Containers

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        let head = try reader.head(at: offset)
        guard head.major == 5 else { throw mismatch([String: Int].self, at: offset, expected: "a map") }
        return KeyedDecodingContainer(
            KeyedDecoding<Key>(state: self, map: try indexMap(head, at: offset), codingPath: path))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let head = try reader.head(at: offset)
        guard head.major == 4 else { throw mismatch([Int].self, at: offset, expected: "an array") }
        return UnkeyedDecoding(state: self, head: head, codingPath: path)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        SingleValueDecoding(state: self, offset: offset, codingPath: path)
    }

    // MARK: Errors

    /// Describes the item at `offset` for error messages.
    func describe(at offset: Int) -> String {
        guard let head = try? reader.head(at: offset) else { return "nothing" }
        switch head.major {
        case 0, 1: return "an integer"
        case 2: return "a byte string"
        case 3: return "a text string"
        case 4: return "an array"
        case 5: return "a map"
        case 6: return "tag \(head.argument)"
        default:
            switch head.info {
            case 20, 21: return "a boolean"
            case 22: return "null"
            case 23: return "undefined"
            case 25, 26, 27: return "a float"
            default: return "simple value \(head.argument)"
            }
        }
    }

    func mismatch(_ type: Any.Type, at offset: Int, expected: String) -> DecodingError {
        let found = describe(at: offset)
        if found == "null" || found == "undefined" {
            return .valueNotFound(
                type,
                .init(
                    codingPath: path,
                    debugDescription: "expected \(expected) but found \(found) at byte offset \(offset)"))
        }
        return .typeMismatch(
            type,
            .init(
                codingPath: path, debugDescription: "expected \(expected) but found \(found) at byte offset \(offset)"))
    }

    func withPath(_ error: CBORDecodingError) -> CBORDecodingError {
        CBORDecodingError(error.reason, at: error.offset, codingPath: pathText)
    }

    /// The error of a primitive decode under `key`, with `key` appended to its coding path.
    func adding(_ key: any CodingKey, to error: any Error) -> any Error {
        path.append(key)
        defer { path.removeLast() }
        switch error {
        case let error as CBORDecodingError:
            return withPath(error)
        case DecodingError.typeMismatch(let type, let context):
            return DecodingError.typeMismatch(type, .init(codingPath: path, debugDescription: context.debugDescription))
        case DecodingError.valueNotFound(let type, let context):
            return DecodingError.valueNotFound(
                type, .init(codingPath: path, debugDescription: context.debugDescription))
        case DecodingError.dataCorrupted(let context):
            return DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: context.debugDescription))
        default:
            return error
        }
    }

    // MARK: Values

    @inline(__always)
    func isNil(at offset: Int) throws -> Bool {
        let byte = try reader.byte(at: offset)
        return byte == 0xF6 || byte == 0xF7
    }

    func decodeBool(at offset: Int) throws -> Bool {
        switch try reader.byte(at: offset) {
        case 0xF4: return false
        case 0xF5: return true
        default: throw mismatch(Bool.self, at: offset, expected: "a boolean")
        }
    }

    @inline(__always)
    func decodeInteger<T: FixedWidthInteger>(_ type: T.Type, at offset: Int) throws -> T {
        let head = try reader.head(at: offset)
        switch head.major {
        case 0:
            if let value = T(exactly: head.argument) { return value }
        case 1:
            // -1 - n, computed without overflow: only signed types hold negatives.
            if T.isSigned, head.argument < UInt64(T.max) {
                return -1 - T(head.argument)
            }
            if T.isSigned, head.argument == UInt64(T.max) { return T.min }
        default:
            throw mismatch(type, at: offset, expected: "an integer")
        }
        throw DecodingError.dataCorrupted(
            .init(
                codingPath: path,
                debugDescription:
                    "\(head.major == 0 ? "" : "-1 - ")\(head.argument) at byte offset \(offset) does not fit in \(T.self)"
            ))
    }

    func decodeDouble(at offset: Int) throws -> Double {
        let head = try reader.head(at: offset)
        if let value = exactDouble(major: head.major, info: head.info, argument: head.argument) { return value }
        guard head.major > 1 else {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: path,
                    debugDescription: "the integer at byte offset \(offset) does not fit in Double exactly"))
        }
        throw mismatch(Double.self, at: offset, expected: "a number")
    }

    func decodeFloat(at offset: Int) throws -> Float {
        let value = try decodeDouble(at: offset)
        guard let float = Float(exactly: value) ?? (value.isNaN ? .nan : nil) else {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: path,
                    debugDescription: "\(value) at byte offset \(offset) does not fit in Float exactly"))
        }
        return float
    }

    func decodeString(at offset: Int) throws -> String {
        let head = try reader.head(at: offset)
        guard head.major == 3 else { throw mismatch(String.self, at: offset, expected: "a text string") }
        if !head.isIndefinite {
            // The common case, without the closures of the general path.
            let length = try reader.checkLength(head.argument, from: head.contentOffset)
            let raw = reader.bytes(from: head.contentOffset, count: length)
            guard isValidUTF8(raw) else { throw withPath(CBORDecodingError(.invalidUTF8, at: offset)) }
            return String(decoding: raw.assumingMemoryBound(to: UInt8.self), as: UTF8.self)
        }
        do {
            return try reader.string(head, at: offset)
        } catch let error as CBORDecodingError {
            throw withPath(error)
        }
    }

    /// Decodes any value at `offset`: special types first, then the type's own `init(from:)`.
    func decodeValue<T: Decodable>(_ type: T.Type, at offset: Int) throws -> T {
        if T.self == Date.self { return unsafeBitCast(try decodeDate(at: offset), to: T.self) }
        if T.self == URL.self { return unsafeBitCast(try decodeURL(at: offset), to: T.self) }
        if T.self == UUID.self { return unsafeBitCast(try decodeUUID(at: offset), to: T.self) }
        if T.self == Data.self { return unsafeBitCast(try decodeData(at: offset), to: T.self) }
        let saved = self.offset
        self.offset = offset
        defer { self.offset = saved }
        return try T(from: self)
    }

    /// Decodes a nested value under `key` (an array index or a map key).
    @inline(__always)
    func decodeNested<T: Decodable>(_ type: T.Type, at offset: Int, key: any CodingKey) throws -> T {
        path.append(key)
        defer { path.removeLast() }
        return try decodeValue(type, at: offset)
    }

    func decodeDate(at offset: Int) throws -> Date {
        let head = try reader.head(at: offset)
        guard head.major == 6, head.argument == 1 || head.argument == 0 else {
            throw mismatch(Date.self, at: offset, expected: "a date (tag 1 or tag 0)")
        }
        if head.argument == 1 {
            return Date(timeIntervalSince1970: try decodeEpochSeconds(at: head.contentOffset))
        }
        let text = try decodeString(at: head.contentOffset)
        guard let date = try? Date(text, strategy: .iso8601) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: path, debugDescription: "'\(text)' at byte offset \(offset) is not an RFC 3339 date"))
        }
        return date
    }

    private func decodeEpochSeconds(at offset: Int) throws -> Double {
        let head = try reader.head(at: offset)
        if head.major == 0 || head.major == 1 {
            let value = try decodeInteger(Int64.self, at: offset)
            return Double(value)
        }
        return try decodeDouble(at: offset)
    }

    /// Where the content of an item that may carry `tag` starts: after the tag, or the item
    /// itself when it has none. Any other tag is a type mismatch.
    private func skippingOptionalTag(_ tag: UInt64, at offset: Int, for type: Any.Type, expected: String) throws -> Int
    {
        let head = try reader.head(at: offset)
        guard head.major == 6 else { return offset }
        guard head.argument == tag else { throw mismatch(type, at: offset, expected: expected) }
        return head.contentOffset
    }

    func decodeURL(at offset: Int) throws -> URL {
        let position = try skippingOptionalTag(32, at: offset, for: URL.self, expected: "a URL (tag 32)")
        let text = try decodeString(at: position)
        guard let url = URL(string: text) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: path, debugDescription: "'\(text)' at byte offset \(offset) is not a valid URL"))
        }
        return url
    }

    func decodeUUID(at offset: Int) throws -> UUID {
        let position = try skippingOptionalTag(37, at: offset, for: UUID.self, expected: "a UUID (tag 37)")
        let bytes = try decodeData(at: position)
        guard bytes.count == 16 else {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: path,
                    debugDescription: "a UUID needs 16 bytes, found \(bytes.count) at byte offset \(offset)"))
        }
        return bytes.withUnsafeBytes { raw in
            UUID(uuid: raw.loadUnaligned(as: uuid_t.self))
        }
    }

    func decodeData(at offset: Int) throws -> Data {
        let head = try reader.head(at: offset)
        guard head.major == 2 else { throw mismatch(Data.self, at: offset, expected: "a byte string") }
        return try reader.withStringContent(head) { Data($0) }
    }
}
