/// Any CBOR data item, for tools that read CBOR without a Swift type (the `hoard` CLI prints
/// stored payloads through it).
///
/// ```swift
/// let value = try CBORValue(decoding: bytes)
/// if case .map(let entries) = value { … }
/// ```
public indirect enum CBORValue: Sendable, Hashable {
    /// Major type 0: an unsigned integer.
    case unsigned(UInt64)
    /// Major type 1: the integer `-1 - n`, stored as `n` so that the whole range fits.
    case negative(UInt64)
    /// Major type 2: a byte string.
    case bytes([UInt8])
    /// Major type 3: a text string.
    case text(String)
    /// Major type 4: an array.
    case array([CBORValue])
    /// Major type 5: a map, in the order the entries appear.
    case map([Entry])
    /// Major type 6: a tagged item.
    case tagged(UInt64, CBORValue)
    /// `false` / `true`.
    case bool(Bool)
    /// `null`.
    case null
    /// `undefined`.
    case undefined
    /// Another simple value (0–19, 32–255).
    case simple(UInt8)
    /// A half, single or double precision float, widened to `Double` (exact for all three).
    case float(Double)

    /// One key/value pair of a map.
    public struct Entry: Sendable, Hashable {
        public var key: CBORValue
        public var value: CBORValue
        public init(_ key: CBORValue, _ value: CBORValue) {
            self.key = key
            self.value = value
        }
    }

    /// Decodes one complete data item; trailing bytes are an error.
    ///
    /// Indefinite-length items are accepted and come back as definite ones. A map with two equal
    /// keys is refused.
    ///
    /// - Throws: ``CBORDecodingError`` with the offset of the first problem.
    public init(
        decoding buffer: UnsafeRawBufferPointer, maxDepth: Int = CBORDecoder.defaultMaxDepth
    ) throws(CBORDecodingError) {
        let reader = Reader(buffer, maxDepth: maxDepth)
        let end = try reader.skip(at: 0)
        guard end == buffer.count else { throw CBORDecodingError(.trailingBytes(count: buffer.count - end), at: end) }
        do {
            self = try CBORValue.parse(reader, at: 0).value
        } catch let error as CBORDecodingError {
            throw error
        } catch {
            throw CBORDecodingError(.truncated, at: 0)  // unreachable: parse throws CBORDecodingError only
        }
    }

    /// Decodes one complete data item from an array of bytes.
    public init(decoding bytes: [UInt8], maxDepth: Int = CBORDecoder.defaultMaxDepth) throws(CBORDecodingError) {
        var result: Result<CBORValue, CBORDecodingError> = .success(.null)
        bytes.withUnsafeBytes { raw in
            result = Result { () throws(CBORDecodingError) in try CBORValue(decoding: raw, maxDepth: maxDepth) }
        }
        self = try result.get()
    }

    /// The first key equal to an earlier one, compared as values: by canonical encoding, so
    /// that equal values however encoded are one key, while 0.0 and -0.0 (equal as Doubles) are
    /// two, and text by its UTF-8 bytes (Swift's `==` would equate canonically equivalent strings).
    /// (`Reader.checkDistinctKeys` compares small maps of text keys itself, without values.)
    static func firstRepeatedKey(_ keys: [CBORValue]) -> CBORValue? {
        var seen = Set<[UInt8]>(minimumCapacity: keys.count)
        for key in keys where !seen.insert(key.encoded()).inserted { return key }
        return nil
    }

    /// How an error names a map key: a text key as itself, any other as its description.
    static func keyName(_ key: CBORValue) -> String {
        if case .text(let text) = key { return text }
        return "\(key)"
    }

    /// Parses the item at `offset`; with `checkingKeys`, a map with two equal keys is an error.
    static func parse(
        _ reader: Reader, at offset: Int, checkingKeys: Bool = true
    ) throws -> (value: CBORValue, end: Int) {
        let head = try reader.head(at: offset)
        switch head.major {
        case 0:
            return (.unsigned(head.argument), head.contentOffset)
        case 1:
            return (.negative(head.argument), head.contentOffset)
        case 2:
            let bytes = try reader.withStringContent(head) { Array($0) }
            return (.bytes(bytes), try reader.skip(at: offset))
        case 3:
            return (.text(try reader.string(head, at: offset)), try reader.skip(at: offset))
        case 4:
            var items: [CBORValue] = []
            var position = head.contentOffset
            if head.isIndefinite {
                while try !reader.isBreak(at: position) {
                    let (item, end) = try parse(reader, at: position, checkingKeys: checkingKeys)
                    items.append(item)
                    position = end
                }
                return (.array(items), position + 1)
            }
            let count = try reader.checkLength(head.argument, from: position)
            items.reserveCapacity(count)
            for _ in 0..<count {
                let (item, end) = try parse(reader, at: position, checkingKeys: checkingKeys)
                items.append(item)
                position = end
            }
            return (.array(items), position)
        case 5:
            var entries: [Entry] = []
            var keys: [Int] = []  // where the keys start, for the one duplicate check `validate` uses too
            var position = head.contentOffset
            func entry() throws {
                keys.append(position)
                let (key, keyEnd) = try parse(reader, at: position, checkingKeys: checkingKeys)
                let (value, valueEnd) = try parse(reader, at: keyEnd, checkingKeys: checkingKeys)
                entries.append(Entry(key, value))
                position = valueEnd
            }
            func checkKeys() throws {
                guard checkingKeys else { return }
                try keys.withUnsafeMutableBufferPointer { (keys) throws(CBORDecodingError) in
                    try reader.checkDistinctKeys(keys, ofMapAt: offset)
                }
            }
            if head.isIndefinite {
                while try !reader.isBreak(at: position) { try entry() }
                try checkKeys()
                return (.map(entries), position + 1)
            }
            let count = try reader.checkLength(head.argument, units: 2, from: position)
            entries.reserveCapacity(count)
            keys.reserveCapacity(count)
            for _ in 0..<count { try entry() }
            try checkKeys()
            return (.map(entries), position)
        case 6:
            let (inner, end) = try parse(reader, at: head.contentOffset, checkingKeys: checkingKeys)
            return (.tagged(head.argument, inner), end)
        default:
            switch head.info {
            case 20: return (.bool(false), head.contentOffset)
            case 21: return (.bool(true), head.contentOffset)
            case 22: return (.null, head.contentOffset)
            case 23: return (.undefined, head.contentOffset)
            case 25: return (.float(doubleFromHalf(UInt16(head.argument))), head.contentOffset)
            case 26: return (.float(Double(Float(bitPattern: UInt32(head.argument)))), head.contentOffset)
            case 27: return (.float(Double(bitPattern: head.argument)), head.contentOffset)
            default: return (.simple(UInt8(truncatingIfNeeded: head.argument)), head.contentOffset)
            }
        }
    }

    /// The value with every map's entries, at every depth, in deterministic order (RFC 8949
    /// §4.2.1: bytewise order of the encoded keys), as a deterministic encoder writes them.
    public func deterministicallyOrdered() -> CBORValue {
        switch self {
        case .map(let entries):
            let sorted = entries.map { Entry($0.key, $0.value.deterministicallyOrdered()) }
                .sorted { $0.key.encoded().lexicographicallyPrecedes($1.key.encoded()) }
            return .map(sorted)
        case .array(let items): return .array(items.map { $0.deterministicallyOrdered() })
        case .tagged(let tag, let inner): return .tagged(tag, inner.deterministicallyOrdered())
        default: return self
        }
    }

    /// The value's canonical encoding: definite lengths, shortest heads and floats, map entries in
    /// the order given (``deterministicallyOrdered()`` sorts them for deterministic bytes).
    public func encoded() -> [UInt8] {
        let writer = Writer()
        write(to: writer)
        return writer.toArray()
    }

    func write(to writer: Writer) {
        switch self {
        case .unsigned(let n): writer.head(0, n)
        case .negative(let n): writer.head(1, n)
        case .bytes(let bytes): bytes.withUnsafeBytes { writer.byteString($0) }
        case .text(let text): writer.text(text)
        case .array(let items):
            writer.head(4, UInt64(items.count))
            for item in items { item.write(to: writer) }
        case .map(let entries):
            writer.head(5, UInt64(entries.count))
            for entry in entries {
                entry.key.write(to: writer)
                entry.value.write(to: writer)
            }
        case .tagged(let tag, let inner): writer.head(6, tag); inner.write(to: writer)
        case .bool(let flag): writer.append(flag ? 0xF5 : 0xF4)
        case .null: writer.append(0xF6)
        case .undefined: writer.append(0xF7)
        case .simple(let value):
            if value < 24 { writer.append(0xE0 | value) } else { writer.append(0xF8); writer.append(value) }
        case .float(let value): writer.double(value)
        }
    }
}

extension CBORValue {
    /// The integer value, when this is an integer that fits in `Int64`.
    public var int64: Int64? {
        switch self {
        case .unsigned(let n): n <= UInt64(Int64.max) ? Int64(n) : nil
        case .negative(let n): n <= UInt64(Int64.max) ? -1 - Int64(n) : nil
        default: nil
        }
    }

    /// The text, when this is a text string.
    public var text: String? {
        if case .text(let text) = self { return text }
        return nil
    }

    /// The value stored under a text key, when this is a map.
    public subscript(key: String) -> CBORValue? {
        guard case .map(let entries) = self else { return nil }
        return entries.first { $0.key == .text(key) }?.value
    }
}
