#if canImport(FoundationEssentials)
internal import FoundationEssentials
#else
internal import Foundation
#endif
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif
internal import Synchronization

/// Encodes `Encodable` values as RFC 8949 CBOR.
///
/// ```swift
/// let bytes = try CBOREncoder().encode(user)
/// let same = try CBOREncoder(deterministic: true).encode(user) == CBOREncoder(deterministic: true).encode(user)  // always
/// ```
///
/// - Items are definite-length, with the shortest heads, and floats in the shortest of half,
///   single or double precision that holds the value exactly (`1.5` takes three bytes). Every NaN
///   is written as the canonical half-precision NaN `0xf97e00`; NaN payloads are not kept.
/// - Keyed containers become maps keyed by the `CodingKey`'s `stringValue`; unkeyed containers
///   become arrays. A value that encodes nothing becomes an empty map.
/// - `Date` is tag 1 (seconds since 1970, an integer when whole), `URL` tag 32, `UUID` tag 37 over
///   16 bytes, `Data` a byte string.
/// - With `deterministic`, map entries are sorted by the bytes of their encoded keys
///   (RFC 8949 §4.2.1), so equal values always give equal bytes even for `Dictionary`, whose order
///   is random. Either way, a map that would hold the same key twice is refused.
///
/// The encoder streams into one buffer. Containers must be used in the nested order Codable code
/// normally has: once a container's parent receives another value, that container is closed and
/// a later write into it throws `EncodingError.invalidValue`.
public struct CBOREncoder: Sendable {
    /// Sort map keys so that equal values give equal bytes.
    public var deterministic: Bool
    /// Passed to the values' `encode(to:)` as `encoder.userInfo` (for example, a key-set choice).
    public var userInfo: [CodingUserInfoKey: any Sendable] {
        didSet { userInfoBox = UserInfoBox(userInfo) }
    }
    private var userInfoBox: UserInfoBox

    public init(deterministic: Bool = false, userInfo: [CodingUserInfoKey: any Sendable] = [:]) {
        self.deterministic = deterministic
        self.userInfo = userInfo
        self.userInfoBox = userInfo.isEmpty ? .empty : UserInfoBox(userInfo)
    }

    /// Encodes `value` as one CBOR data item.
    ///
    /// - Throws: `EncodingError.invalidValue` for a map with a duplicate key or a misused container,
    ///   or what the value's own `encode(to:)` throws.
    public func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        try withState(prefix: nil) { state in
            try state.encodeValue(value)
            if state.failed, let failure = state.failure { throw failure }
            return state.finish()
        }
    }

    /// Encodes `value` after the bytes already in `buffer` (for example, after a record header).
    ///
    /// The bytes already in `buffer` are copied into the encoder and back: use it for a short
    /// prefix, not to collect many values in one growing buffer (that would be quadratic).
    public func encode<T: Encodable>(_ value: T, appendingTo buffer: inout [UInt8]) throws {
        buffer = try withState(prefix: buffer) { state in
            try state.encodeValue(value)
            if state.failed, let failure = state.failure { throw failure }
            return state.finish()
        }
    }

    func withState<R>(prefix: [UInt8]?, _ body: (EncoderState) throws -> R) throws -> R {
        let state = EncoderState.take()
        defer { EncoderState.recycle(state) }
        state.begin(deterministic: deterministic, userInfo: userInfoBox, prefix: prefix)
        return try body(state)
    }
}

// MARK: - The encoder

/// One open container in the buffer.
struct Frame {
    let id: Int
    let isMap: Bool
    /// Where the one-byte placeholder of the header is.
    let headerOffset: Int
    /// Entries (map pairs or array items) written so far.
    var count = 0
    /// For maps: where this frame's keys start in `EncoderState.keys`.
    let keysBase: Int
}

/// Where one encoded map key lies in the writer's bytes (head included).
struct KeySpan {
    var start: Int
    var length: Int
    /// Where the key's entry (key and value) ends; set only while a map is being sorted.
    var entryEnd = 0
}

/// The mutable state of one `encode` call; it is also the `Encoder` handed to values.
///
/// One encode call runs on one thread and never holds two accesses to a property at once, so the
/// hot properties opt out of dynamic exclusivity checks, which otherwise cost more than the
/// encoding itself.
final class EncoderState: Encoder, @unchecked Sendable {
    // @unchecked: a state serves one encode call at a time; the pool hands each out exclusively.
    let writer = Writer()
    @exclusivity(unchecked) var stack = RawStack<Frame>()
    /// For every open map, where each of its encoded keys starts and ends (an entry runs from its
    /// key's start to the next entry's).
    @exclusivity(unchecked) var keys = RawStack<KeySpan>(capacity: 32)
    /// Where a deterministic map's entries are put in order before they are copied back.
    let scratch = Writer()
    @exclusivity(unchecked) var nextID = 0
    /// For `encodeFields`: each field's value in `writer`, the fields in the order written, and
    /// the call they belong to (0 outside one).
    @exclusivity(unchecked) var fieldRanges = RawStack<FieldRange>()
    @exclusivity(unchecked) var fieldOrder = RawStack<Int>()
    @exclusivity(unchecked) var fieldsToken = 0
    @exclusivity(unchecked) var path: [any CodingKey] = []
    /// The container made by the value now being encoded, so that asking twice gives the same one.
    @exclusivity(unchecked) var valueContainer: Int?
    /// An error found where Codable gives no way to throw (nestedContainer, superEncoder).
    var failure: EncodingError? {
        didSet { failed = failure != nil }
    }
    /// Whether `failure` is set, readable without copying the error.
    @exclusivity(unchecked) private(set) var failed = false
    @exclusivity(unchecked) var deterministic = false
    @exclusivity(unchecked) var userInfoStorage = UserInfoBox.empty

    // MARK: Reuse

    /// States kept for reuse: steady-state encoding then allocates only its output and Codable's
    /// container boxes. A container ids keep counting up across uses (`nextID` is never reset),
    /// so a container kept past its encode call can never write into a later one.
    /// (One slot: a second thread encoding at the same time simply makes its own state.)
    private static let spare = Mutex<EncoderState?>(nil)

    static func take() -> EncoderState {
        spare.withLock { $0.take() } ?? EncoderState()
    }

    static func recycle(_ state: EncoderState) {
        // A state that grew for a large value is not kept: its buffer would stay allocated.
        guard state.writer.capacity <= 1 << 16, state.scratch.capacity <= 1 << 16 else { return }
        // After a successful encode these are empty already; after a failure they may not be.
        state.stack.removeAll(keepingUpTo: 64)
        state.keys.removeAll(keepingUpTo: 1024)
        if !state.path.isEmpty { state.path.removeAll(keepingCapacity: true) }
        state.valueContainer = nil
        if state.failed { state.failure = nil }
        state.userInfoStorage = .empty
        spare.withLock { if $0 == nil { $0 = state } }
    }

    func begin(deterministic: Bool, userInfo: UserInfoBox, prefix: [UInt8]?) {
        self.deterministic = deterministic
        self.userInfoStorage = userInfo
        writer.reset()
        if let prefix { prefix.withUnsafeBytes { writer.append($0) } }
    }

    func finish() -> [UInt8] {
        writer.toArray()
    }

    var codingPath: [any CodingKey] { path }
    var userInfo: [CodingUserInfoKey: Any] { userInfoStorage.values }

    // MARK: Containers

    /// Opens a container at the current position. The value's own container (`reuse`) is opened
    /// once: asking the encoder again, as class hierarchies do, returns the same one.
    func openContainer(isMap: Bool, reuse: Bool) -> Int {
        if reuse, let existing = valueContainer, let open = frame(existing), open.isMap == isMap {
            return existing
        }
        nextID += 1
        stack.append(Frame(id: nextID, isMap: isMap, headerOffset: writer.count, keysBase: keys.count))
        writer.append(isMap ? 0xA0 : 0x80)  // placeholder: the count is patched when the container closes
        if reuse { valueContainer = nextID }
        return nextID
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(
            KeyedEncoding<Key>(state: self, id: openContainer(isMap: true, reuse: true), codingPath: path))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        UnkeyedEncoding(state: self, id: openContainer(isMap: false, reuse: true), codingPath: path)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleValueEncoding(state: self, codingPath: path)
    }

    /// The open container `id`, if it is open.
    func frame(_ id: Int) -> Frame? {
        var i = stack.count - 1
        while i >= 0 {
            if stack[i].id == id { return stack[i] }
            i -= 1
        }
        return nil
    }

    /// Makes container `id` the innermost open one, closing the containers opened inside it.
    @inline(__always)
    func enter(_ id: Int) throws {
        if stack.count > 0 && stack[stack.count - 1].id == id { return }
        guard frame(id) != nil else {
            throw EncodingError.invalidValue(
                id,
                .init(
                    codingPath: path,
                    debugDescription:
                        "CBOR: a container was written to after its parent had moved on; use containers in nested order"
                )
            )
        }
        while let last = stack.last, last.id != id { try close() }
    }

    /// Closes the innermost container: sorts (deterministic) and checks its keys, writes its count.
    func close() throws {
        let frame = stack.removeLast()
        defer { keys.truncate(to: frame.keysBase) }
        if frame.isMap && frame.count > 1 {
            try finishMap(frame)
        }
        let major: UInt8 = frame.isMap ? 5 : 4
        let length = Writer.headLength(UInt64(frame.count))
        if length > 1 {
            writer.insertGap(length - 1, at: frame.headerOffset + 1)
        }
        writer.writeHead(major, UInt64(frame.count), at: frame.headerOffset)
    }

    /// Refuses duplicate keys and, in deterministic mode, orders the entries by key bytes.
    ///
    /// Maps of models are small, so small maps get an insertion sort over their key spans (no
    /// allocation; it finds duplicates as equal neighbours) and, only when the keys were not in
    /// order already, one copy of the entries through `scratch`.
    private func finishMap(_ frame: Frame) throws {
        let n = frame.count
        let end = writer.count
        let duplicate: KeySpan? = {
            var spans = keys.buffer(frame.keysBase..<frame.keysBase + n)
            let bytes = UnsafeRawPointer(writer.base)
            /// Key order: bytewise over the encoded keys, a shorter key before its extensions.
            @inline(__always)
            func order(_ x: KeySpan, _ y: KeySpan) -> Int32 {
                // Keys of 1–23 bytes differ in their first byte (the head) unless equally long; then
                // short keys mostly differ in the next one. Both inline, before any memcmp call.
                let a = bytes.load(fromByteOffset: x.start, as: UInt8.self),
                    b = bytes.load(fromByteOffset: y.start, as: UInt8.self)
                if a != b { return a < b ? -1 : 1 }
                let common = min(x.length, y.length)
                if common > 1 {
                    let a = bytes.load(fromByteOffset: x.start + 1, as: UInt8.self),
                        b = bytes.load(fromByteOffset: y.start + 1, as: UInt8.self)
                    if a != b { return a < b ? -1 : 1 }
                    if common > 2 {
                        let c = memcmp(bytes + x.start + 2, bytes + y.start + 2, common - 2)
                        if c != 0 { return c }
                    }
                }
                return Int32(x.length - y.length).signum()
            }
            if !deterministic {
                // Only keys of equal length can be equal: a key whose length is new (bit L of
                // `lengths`) needs no comparison at all.
                if n <= 16 {
                    var lengths: UInt64 = 0
                    for i in 0..<n {
                        let length = spans[i].length
                        if length < 64 {
                            guard lengths & (1 << length) != 0 else {
                                lengths |= 1 << length
                                continue
                            }
                        }
                        for j in 0..<i where spans[j].length == length && order(spans[i], spans[j]) == 0 {
                            return spans[i]
                        }
                    }
                    return nil
                }
                var seen = Set<[UInt8]>()
                for span in spans
                where !seen.insert(Array(UnsafeRawBufferPointer(start: bytes + span.start, count: span.length)))
                    .inserted
                {
                    return span
                }
                return nil
            }
            // Each span remembers where its entry ends before the spans are reordered.
            for i in 0..<n {
                spans[i].entryEnd = i + 1 < n ? spans[i + 1].start : end
            }
            let first = spans[0].start
            var moved = false
            if n <= 32 {
                for i in 1..<n {
                    let span = spans[i]
                    var j = i
                    while j > 0 {
                        let c = order(spans[j - 1], span)
                        if c == 0 { return span }
                        if c < 0 { break }
                        spans[j] = spans[j - 1]
                        j -= 1
                    }
                    if j != i {
                        spans[j] = span
                        moved = true
                    }
                }
            } else {
                spans.sort { order($0, $1) < 0 }
                for i in 1..<n where order(spans[i - 1], spans[i]) == 0 { return spans[i] }
                moved = true
            }
            guard moved else { return nil }
            scratch.reset()
            for span in spans {
                scratch.append(UnsafeRawBufferPointer(start: bytes + span.start, count: span.entryEnd - span.start))
            }
            (writer.base + first).update(from: scratch.base, count: scratch.count)
            return nil
        }()
        if let duplicate {
            let name = writer.withBytes { raw in
                describeKey(Array(raw[duplicate.start..<duplicate.start + duplicate.length]))
            }
            throw EncodingError.invalidValue(
                name, .init(codingPath: path, debugDescription: "CBOR: the map would hold the key \(name) twice"))
        }
    }

    /// The text key at the start of an entry's bytes, for error messages.
    private func describeKey(_ entry: [UInt8]) -> String {
        entry.withUnsafeBytes { raw in
            let reader = Reader(raw, maxDepth: 1)
            guard let head = try? reader.head(at: 0), let text = try? reader.string(head, at: 0) else { return "?" }
            return "'\(text)'"
        }
    }

    /// Starts an entry of map `id`: counts it, records where its key starts and writes the key.
    /// Generic over the key type so that no existential is built per entry.
    @inline(__always)
    func beginEntry<K: CodingKey>(_ id: Int, key: K) throws {
        try enter(id)
        stack.base[stack.count - 1].count += 1  // enter made `id` the last frame
        let start = writer.count
        writer.text(key.stringValue)
        keys.append(KeySpan(start: start, length: writer.count - start))
    }

    /// Starts an item of array `id`.
    @inline(__always)
    func beginItem(_ id: Int) throws {
        try enter(id)
        stack.base[stack.count - 1].count += 1  // enter made `id` the last frame
    }

    // MARK: Values

    /// Encodes any value at the current position: special types, then the value's own code.
    func encodeValue<T: Encodable>(_ value: T) throws {
        if T.self == Date.self {
            writer.head(6, 1)
            let seconds = unsafeBitCast(value, to: Date.self).timeIntervalSince1970
            if seconds == seconds.rounded(), abs(seconds) < 0x1p63 {
                writer.int(Int64(seconds))
            } else {
                writer.double(seconds)
            }
            return
        }
        if T.self == URL.self {
            writer.head(6, 32)
            writer.text(unsafeBitCast(value, to: URL.self).absoluteString)
            return
        }
        if T.self == UUID.self {
            writer.head(6, 37)
            withUnsafeBytes(of: unsafeBitCast(value, to: UUID.self).uuid) { writer.byteString($0) }
            return
        }
        if T.self == Data.self {
            unsafeBitCast(value, to: Data.self).withUnsafeBytes { writer.byteString($0) }
            return
        }
        let depth = stack.count
        let start = writer.count
        let saved = valueContainer
        valueContainer = nil
        defer { valueContainer = saved }
        try value.encode(to: self)
        while stack.count > depth { try close() }
        if writer.count == start { writer.append(0xA0) }  // encoded nothing: {}
    }

    /// Encodes a nested value of a container under `key` (nil for array items).
    @inline(__always)
    func encodeNested<T: Encodable>(_ value: T, key: any CodingKey) throws {
        path.append(key)
        defer { path.removeLast() }
        try encodeValue(value)
    }
}
