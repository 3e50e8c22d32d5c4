#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

// The decoder's maps: finding a key's value in place (a search of the encoded keys, no
// dictionary), the duplicate-key check, and the keyed container over them (CBORDecoder.swift has
// the decoder and its state).

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
