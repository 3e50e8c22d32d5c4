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

// MARK: - Maps

/// One entry of a map: where its key's text (or integer) and its value are.
struct MapEntry {
    /// Offset and length of the key's UTF-8 content; `keyLength == -1` for an integer key,
    /// `keyOffset == -1` for a chunked text key (kept in `DecoderState.chunkedKeys`).
    var keyOffset: Int
    var keyLength: Int
    var intKey: Int64
    var valueOffset: Int
}

/// A map indexed by the decoder: its entries are `entries[base..<base + count]` of the state that
/// made it, during the decode call numbered `generation`.
struct MapReference {
    let base: Int
    let count: Int
    /// Where this map's next-lookup guess is kept in `DecoderState.guesses`.
    let number: Int
    let generation: Int
}

extension DecoderState {
    /// Finds the entries of the map at `offset` once, when its container is made. They go into the
    /// state's shared entry list (no allocation per map once the list has grown).
    func indexMap(_ head: Head, at offset: Int) throws -> MapReference {
        // Keys and values sit one level below the map, whose depth is the length of the coding path.
        let depth = path.count + 1
        var position = head.contentOffset
        var count: Int
        if head.isIndefinite {
            count = 0
            var scan = position
            while try !reader.isBreak(at: scan) {
                scan = try reader.skip(at: try reader.skip(at: scan, depth: depth), depth: depth)
                count += 1
            }
        } else {
            count = try reader.checkLength(head.argument, units: 2, from: position)
        }
        let base = entries.count
        // Bit L is set once a text key of L bytes (L < 64) is seen: only keys of equal length can
        // be equal, so most keys of a model are checked for duplicates with one bit test.
        var lengthsSeen: UInt64 = 0
        // One-byte keys (short local key sets use them) are all one length: they get a bit per
        // byte value instead, so that they too are checked with one bit test.
        var oneByteKeysSeen: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        // The per-key checks below scan earlier keys of the same length: fine for a model's map,
        // quadratic for a large one (an untrusted payload of 100,000 distinct three-byte keys would
        // take billions of comparisons). Larger maps get the general check, which hashes.
        var needsFullCheck = count > Self.mapsCheckedPairwise
        for _ in 0..<count {
            let initial = try reader.byte(at: position)
            let keyOffset: Int, keyLength: Int
            if initial >= 0x60 && initial <= 0x77 {
                // The common key: a text string shorter than 24 bytes, its length in the head.
                keyOffset = position + 1
                keyLength = try reader.checkLength(UInt64(initial & 0x1F), from: keyOffset)
                entries.append(
                    MapEntry(keyOffset: keyOffset, keyLength: keyLength, intKey: 0, valueOffset: keyOffset + keyLength))
            } else {
                let keyHead = try reader.head(at: position)
                switch keyHead.major {
                case 3 where !keyHead.isIndefinite:
                    keyOffset = keyHead.contentOffset
                    keyLength = try reader.checkLength(keyHead.argument, from: keyOffset)
                    entries.append(
                        MapEntry(
                            keyOffset: keyOffset, keyLength: keyLength, intKey: 0, valueOffset: keyOffset + keyLength))
                case 3:
                    // A chunked key (rare): joined once and compared as text.
                    chunkedKeys[entries.count] = try reader.string(keyHead, at: position)
                    entries.append(
                        MapEntry(
                            keyOffset: -1, keyLength: 0, intKey: 0,
                            valueOffset: try reader.skip(at: position, depth: depth)))
                    (keyOffset, keyLength) = (-1, 0)
                    needsFullCheck = true
                case 0, 1:
                    let value = try decodeInteger(Int64.self, at: position)
                    entries.append(
                        MapEntry(keyOffset: 0, keyLength: -1, intKey: value, valueOffset: keyHead.contentOffset))
                    (keyOffset, keyLength) = (-1, -1)
                    needsFullCheck = true
                default:
                    throw withPath(CBORDecodingError(.unsupportedKey, at: position))
                }
            }
            if keyOffset >= 0 && !needsFullCheck {
                if keyLength == 1 {
                    let byte = try reader.byte(at: keyOffset)
                    let bit: UInt64 = 1 << (byte & 63)
                    let seen: Bool
                    switch byte >> 6 {
                    case 0: seen = oneByteKeysSeen.0 & bit != 0; oneByteKeysSeen.0 |= bit
                    case 1: seen = oneByteKeysSeen.1 & bit != 0; oneByteKeysSeen.1 |= bit
                    case 2: seen = oneByteKeysSeen.2 & bit != 0; oneByteKeysSeen.2 |= bit
                    default: seen = oneByteKeysSeen.3 & bit != 0; oneByteKeysSeen.3 |= bit
                    }
                    if seen, let earlier = sameTextKey(keyOffset, keyLength, in: base..<entries.count - 1) {
                        throw withPath(CBORDecodingError(.duplicateKey(keyText(earlier)), at: offset))
                    }
                } else if keyLength >= 64 {
                    needsFullCheck = true
                } else if lengthsSeen & (1 << keyLength) == 0 {
                    lengthsSeen |= 1 << keyLength
                } else if let earlier = sameTextKey(keyOffset, keyLength, in: base..<entries.count - 1) {
                    throw withPath(CBORDecodingError(.duplicateKey(keyText(earlier)), at: offset))
                }
            }
            let valueOffset = entries.base[entries.count - 1].valueOffset
            position = try reader.endOfFlatItem(at: valueOffset) ?? reader.skipQuickly(at: valueOffset, depth: depth)
        }
        if head.isIndefinite { position += 1 }  // the break
        if offset == 0 { topLevelEnd = position }
        guesses.append(base)
        let map = MapReference(base: base, count: count, number: guesses.count - 1, generation: generation)
        if needsFullCheck { try checkDuplicates(map, mapOffset: offset) }
        return map
    }

    /// The entry in `range` whose definite text key has the bytes at `keyOffset`, if any.
    private func sameTextKey(_ keyOffset: Int, _ keyLength: Int, in range: Range<Int>) -> Int? {
        guard let base = reader.base else { return nil }
        for i in range where entries[i].keyLength == keyLength && entries[i].keyOffset >= 0 {
            // The first byte inline: keys of one length (often one byte) mostly differ there.
            if keyLength == 0 { return i }
            let other = entries[i].keyOffset
            if base.load(fromByteOffset: other, as: UInt8.self) == base.load(fromByteOffset: keyOffset, as: UInt8.self)
                && (keyLength == 1 || memcmp(base + other + 1, base + keyOffset + 1, keyLength - 1) == 0)
            {
                return i
            }
        }
        return nil
    }

    func keyText(_ i: Int) -> String {
        let entry = entries[i]
        if entry.keyLength == -1 { return String(entry.intKey) }
        if entry.keyOffset == -1 { return chunkedKeys[i] ?? "" }
        return String(decoding: reader.bytes(from: entry.keyOffset, count: entry.keyLength), as: UTF8.self)
    }

    /// The largest map whose duplicate keys are checked pairwise (while it is indexed, or here);
    /// larger ones go through a hash set, so that the check stays linear in the map's size.
    static let mapsCheckedPairwise = 24

    /// The general duplicate check, for maps with integer, chunked or long keys, and large maps.
    private func checkDuplicates(_ map: MapReference, mapOffset: Int) throws {
        guard map.count > 1 else { return }
        let range = map.base..<map.base + map.count
        var duplicate: Int?
        if map.count <= Self.mapsCheckedPairwise {
            do {
                let entries = self.entries.base  // indices below are within `range`
                outer: for i in range.dropFirst() {
                    let x = entries[i]
                    for j in map.base..<i {
                        let y = entries[j]
                        let same: Bool
                        if x.keyLength == -1 || y.keyLength == -1 {
                            same = x.keyLength == y.keyLength && x.intKey == y.intKey
                        } else if x.keyOffset == -1 || y.keyOffset == -1 {
                            same = keyText(i) == keyText(j)  // a chunked key equals its plain form
                        } else {
                            same =
                                x.keyLength == y.keyLength
                                && (x.keyLength == 0
                                    || memcmp(reader.base! + x.keyOffset, reader.base! + y.keyOffset, x.keyLength) == 0)
                        }
                        if same {
                            duplicate = i
                            break outer
                        }
                    }
                }
            }
        } else {
            var seen = Set<String>()
            for i in range where !seen.insert((entries[i].keyLength == -1 ? "#" : "$") + keyText(i)).inserted {
                duplicate = i
                break
            }
        }
        if let duplicate {
            throw withPath(CBORDecodingError(.duplicateKey(keyText(duplicate)), at: mapOffset))
        }
    }

    /// The index in `list` of the definite text key `utf8`, trying `start` first and going round:
    /// models read their properties in the order they wrote them, so the first try usually hits.
    @inline(__always)
    private static func search(
        _ list: UnsafeMutableBufferPointer<MapEntry>, from start: Int, for utf8: UnsafeBufferPointer<UInt8>,
        in reader: Reader
    ) -> Int? {
        var i = start
        for _ in 0..<list.count {
            let entry = list[i]
            if entry.keyLength == utf8.count && entry.keyOffset >= 0
                && (utf8.count == 0 || memcmp(reader.base! + entry.keyOffset, utf8.baseAddress!, utf8.count) == 0)
            {
                return i
            }
            i = i + 1 == list.count ? 0 : i + 1
        }
        return nil
    }

    /// The entry number of `key` in `map`, or `nil`; starts at the entry after the last one found.
    func find(_ key: some CodingKey, in map: MapReference) throws -> Int? {
        guard map.generation == generation else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: path, debugDescription: "a keyed container was used after its decode call had ended"))
        }
        guard map.count > 0 else { return nil }
        var name = key.stringValue
        let end = map.base + map.count
        let list = entries.buffer(map.base..<end)  // one bounds check for the whole search
        var start = guesses[map.number] - map.base
        if start >= map.count { start = 0 }  // the last lookup found the last entry
        let found = name.withUTF8 { Self.search(list, from: start, for: $0, in: reader) }
        if let found {
            guesses[map.number] = map.base + found + 1
            return map.base + found
        }
        // Integer and chunked keys.
        for i in map.base..<end {
            let entry = entries[i]
            if entry.keyLength == -1 {
                if let int = key.intValue, Int64(int) == entry.intKey { return i }
                if String(entry.intKey) == name { return i }
            } else if entry.keyOffset == -1, chunkedKeys[i] == name {
                return i
            }
        }
        return nil
    }
}

struct KeyedDecoding<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let state: DecoderState
    let map: MapReference
    let codingPath: [any CodingKey]

    var allKeys: [Key] {
        guard map.generation == state.generation else { return [] }
        return (map.base..<map.base + map.count).compactMap { i in
            let entry = state.entries[i]
            if entry.keyLength == -1, let key = Key(intValue: Int(truncatingIfNeeded: entry.intKey)) { return key }
            return Key(stringValue: state.keyText(i))
        }
    }

    func contains(_ key: Key) -> Bool { ((try? state.find(key, in: map)) ?? nil) != nil }

    @inline(__always)
    private func valueOffset(_ key: Key) throws -> Int {
        guard let i = try state.find(key, in: map) else {
            throw DecodingError.keyNotFound(
                key, .init(codingPath: codingPath, debugDescription: "no value for key '\(key.stringValue)' in the map")
            )
        }
        return state.entries[i].valueOffset
    }

    /// Runs a primitive decode; only when it fails is `key` added to the error's coding path.
    @inline(__always)
    private func primitive<T>(_ key: Key, _ body: (Int) throws -> T) throws -> T {
        let offset = try valueOffset(key)
        do {
            return try body(offset)
        } catch {
            throw state.adding(key, to: error)
        }
    }

    func decodeNil(forKey key: Key) throws -> Bool { try state.isNil(at: try valueOffset(key)) }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
        try primitive(key) { try state.decodeBool(at: $0) }
    }
    func decode(_ type: String.Type, forKey key: Key) throws -> String {
        try primitive(key) { try state.decodeString(at: $0) }
    }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
        try primitive(key) { try state.decodeDouble(at: $0) }
    }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float {
        try primitive(key) { try state.decodeFloat(at: $0) }
    }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int {
        try primitive(key) { try state.decodeInteger(type, at: $0) }
    }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 {
        try primitive(key) { try state.decodeInteger(type, at: $0) }
    }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 {
        try primitive(key) { try state.decodeInteger(type, at: $0) }
    }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 {
        try primitive(key) { try state.decodeInteger(type, at: $0) }
    }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 {
        try primitive(key) { try state.decodeInteger(type, at: $0) }
    }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt {
        try primitive(key) { try state.decodeInteger(type, at: $0) }
    }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 {
        try primitive(key) { try state.decodeInteger(type, at: $0) }
    }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 {
        try primitive(key) { try state.decodeInteger(type, at: $0) }
    }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 {
        try primitive(key) { try state.decodeInteger(type, at: $0) }
    }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 {
        try primitive(key) { try state.decodeInteger(type, at: $0) }
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try state.decodeNested(type, at: try valueOffset(key), key: key)
    }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard let i = try state.find(key, in: map) else { return nil }
        let offset = state.entries[i].valueOffset
        if try state.isNil(at: offset) { return nil }
        return try state.decodeNested(type, at: offset, key: key)
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        let offset = try valueOffset(key)
        state.path.append(key)
        defer { state.path.removeLast() }
        let head = try state.reader.head(at: offset)
        guard head.major == 5 else { throw state.mismatch([String: Int].self, at: offset, expected: "a map") }
        return KeyedDecodingContainer(
            KeyedDecoding<NestedKey>(
                state: state, map: try state.indexMap(head, at: offset), codingPath: codingPath + [key]))
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        let offset = try valueOffset(key)
        state.path.append(key)
        defer { state.path.removeLast() }
        let head = try state.reader.head(at: offset)
        guard head.major == 4 else { throw state.mismatch([Int].self, at: offset, expected: "an array") }
        return UnkeyedDecoding(state: state, head: head, codingPath: codingPath + [key])
    }

    func superDecoder() throws -> any Decoder { try superDecoder(forKey: Key(stringValue: "super")!) }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        let separate = DecoderState(reader: state.reader, userInfo: state.userInfoStorage)
        separate.offset = try valueOffset(key)
        separate.path = codingPath + [key]
        return separate
    }
}

// MARK: - Arrays

struct UnkeyedDecoding: UnkeyedDecodingContainer {
    let state: DecoderState
    let codingPath: [any CodingKey]
    let count: Int?
    private(set) var currentIndex = 0
    private var position: Int

    init(state: DecoderState, head: Head, codingPath: [any CodingKey]) {
        self.state = state
        self.codingPath = codingPath
        self.position = head.contentOffset
        // The whole input was checked before decoding began, so the count fits the input.
        self.count = head.isIndefinite ? nil : Int(head.argument)
    }

    var isAtEnd: Bool {
        if let count { return currentIndex >= count }
        return (try? state.reader.isBreak(at: position)) ?? true
    }

    private mutating func next() throws -> Int {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                Any.self,
                .init(
                    codingPath: codingPath + [IndexKey(currentIndex)], debugDescription: "the array has no more items"))
        }
        let offset = position
        // Items sit one level below the array, whose depth is the length of its coding path.
        position = try state.reader.skip(at: position, depth: codingPath.count + 1)
        currentIndex += 1
        return offset
    }

    private mutating func primitive<T>(_ body: (DecoderState, Int) throws -> T) throws -> T {
        let index = currentIndex
        let offset = try next()
        do {
            return try body(state, offset)
        } catch {
            throw state.adding(IndexKey(index), to: error)
        }
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, try state.isNil(at: position) else { return false }
        _ = try next()
        return true
    }
    mutating func decode(_ type: Bool.Type) throws -> Bool { try primitive { try $0.decodeBool(at: $1) } }
    mutating func decode(_ type: String.Type) throws -> String { try primitive { try $0.decodeString(at: $1) } }
    mutating func decode(_ type: Double.Type) throws -> Double { try primitive { try $0.decodeDouble(at: $1) } }
    mutating func decode(_ type: Float.Type) throws -> Float { try primitive { try $0.decodeFloat(at: $1) } }
    mutating func decode(_ type: Int.Type) throws -> Int { try primitive { try $0.decodeInteger(type, at: $1) } }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try primitive { try $0.decodeInteger(type, at: $1) } }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try primitive { try $0.decodeInteger(type, at: $1) } }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try primitive { try $0.decodeInteger(type, at: $1) } }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try primitive { try $0.decodeInteger(type, at: $1) } }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try primitive { try $0.decodeInteger(type, at: $1) } }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try primitive { try $0.decodeInteger(type, at: $1) } }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try primitive { try $0.decodeInteger(type, at: $1) } }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try primitive { try $0.decodeInteger(type, at: $1) } }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try primitive { try $0.decodeInteger(type, at: $1) } }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let index = currentIndex
        let offset = try next()
        return try state.decodeNested(type, at: offset, key: IndexKey(index))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type
    ) throws -> KeyedDecodingContainer<NestedKey> {
        let index = currentIndex
        let offset = try next()
        state.path.append(IndexKey(index))
        defer { state.path.removeLast() }
        let head = try state.reader.head(at: offset)
        guard head.major == 5 else { throw state.mismatch([String: Int].self, at: offset, expected: "a map") }
        return KeyedDecodingContainer(
            KeyedDecoding<NestedKey>(
                state: state, map: try state.indexMap(head, at: offset), codingPath: codingPath + [IndexKey(index)]))
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let index = currentIndex
        let offset = try next()
        state.path.append(IndexKey(index))
        defer { state.path.removeLast() }
        let head = try state.reader.head(at: offset)
        guard head.major == 4 else { throw state.mismatch([Int].self, at: offset, expected: "an array") }
        return UnkeyedDecoding(state: state, head: head, codingPath: codingPath + [IndexKey(index)])
    }

    mutating func superDecoder() throws -> any Decoder {
        let index = currentIndex
        let separate = DecoderState(reader: state.reader, userInfo: state.userInfoStorage)
        separate.offset = try next()
        separate.path = codingPath + [IndexKey(index)]
        return separate
    }
}

// MARK: - Single values

struct SingleValueDecoding: SingleValueDecodingContainer {
    let state: DecoderState
    let offset: Int
    let codingPath: [any CodingKey]

    func decodeNil() -> Bool { (try? state.isNil(at: offset)) ?? false }
    func decode(_ type: Bool.Type) throws -> Bool { try state.decodeBool(at: offset) }
    func decode(_ type: String.Type) throws -> String { try state.decodeString(at: offset) }
    func decode(_ type: Double.Type) throws -> Double { try state.decodeDouble(at: offset) }
    func decode(_ type: Float.Type) throws -> Float { try state.decodeFloat(at: offset) }
    func decode(_ type: Int.Type) throws -> Int { try state.decodeInteger(type, at: offset) }
    func decode(_ type: Int8.Type) throws -> Int8 { try state.decodeInteger(type, at: offset) }
    func decode(_ type: Int16.Type) throws -> Int16 { try state.decodeInteger(type, at: offset) }
    func decode(_ type: Int32.Type) throws -> Int32 { try state.decodeInteger(type, at: offset) }
    func decode(_ type: Int64.Type) throws -> Int64 { try state.decodeInteger(type, at: offset) }
    func decode(_ type: UInt.Type) throws -> UInt { try state.decodeInteger(type, at: offset) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try state.decodeInteger(type, at: offset) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try state.decodeInteger(type, at: offset) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try state.decodeInteger(type, at: offset) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try state.decodeInteger(type, at: offset) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try state.decodeValue(type, at: offset) }
}
