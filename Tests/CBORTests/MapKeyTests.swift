import CBOR
import Foundation
import TestSupport
import Testing

/// Writes the given keys in the given order, each with its position as the value, so that a test
/// can hand the encoder any key sequence, duplicates included.
private struct KeyList: Encodable {
    struct Key: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
    let keys: [String]
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        for (i, key) in keys.enumerated() { try container.encode(i, forKey: Key(stringValue: key)) }
    }
}

/// The encoded form of a text key, as CBOR orders it (RFC 8949 §4.2.1: bytewise over the encoding).
private func encodedKey(_ key: String) throws -> [UInt8] { try CBOREncoder().encode(key) }

@Suite("Map keys: duplicates and deterministic order on every path")
struct MapKeyTests {
    /// Key sets that reach the short-key, long-key (≥ 24 and ≥ 64 bytes), equal-length and
    /// many-key paths of both coders.
    func randomKeys(count: Int, using rng: inout SeededGenerator) -> [String] {
        var keys = Set<String>()
        while keys.count < count {
            let length = [1, 2, 5, 23, 24, 30, 63, 64, 70][Int(rng.next() % 9)]
            let alphabet = Array("ab")  // a small alphabet: many keys of one length, some equal prefixes
            keys.insert(String((0..<length).map { _ in alphabet[Int(rng.next() % 2)] }))
        }
        return Array(keys)
    }

    @Test(
        "the encoder refuses a repeated key and orders deterministic maps by encoded key bytes",
        arguments: [2, 3, 9, 16, 17, 32, 33, 60])
    func encoder(count: Int) throws {
        let seed = SeededGenerator.seedFromEnvironment()
        var rng = SeededGenerator(seed: seed)
        for round in 0..<20 {
            let keys = randomKeys(count: count, using: &rng).shuffled(using: &rng)
            for deterministic in [false, true] {
                let bytes = try CBOREncoder(deterministic: deterministic).encode(KeyList(keys: keys))
                let map = try #require(try CBORValue(decoding: bytes).mapEntries, "seed \(seed), round \(round)")
                let written = map.compactMap(\.key.textValue)
                let expected =
                    deterministic
                    ? try keys.sorted { try encodedKey($0).lexicographicallyPrecedes(encodedKey($1)) } : keys
                #expect(written == expected, "seed \(seed), round \(round), deterministic \(deterministic)")
                // Every key still carries its own value after reordering.
                for entry in map {
                    #expect(
                        entry.value == .unsigned(UInt64(try #require(keys.firstIndex(of: entry.key.textValue ?? "")))))
                }
                var twice = keys
                twice.insert(keys[Int(rng.next() % UInt64(count))], at: Int(rng.next() % UInt64(count + 1)))
                #expect(throws: EncodingError.self, "seed \(seed), round \(round)") {
                    try CBOREncoder(deterministic: deterministic).encode(KeyList(keys: twice))
                }
            }
        }
    }

    @Test("the decoder refuses a repeated key of every kind, and only then", arguments: [2, 3, 9, 24, 25, 40])
    func decoder(count: Int) throws {
        let seed = SeededGenerator.seedFromEnvironment()
        var rng = SeededGenerator(seed: seed)
        for round in 0..<20 {
            let keys = randomKeys(count: count, using: &rng)
            /// A map of `keys`, each written plainly or (sometimes) as a chunked string.
            func map(_ keys: [String]) -> [UInt8] {
                var bytes: [UInt8] = [0xB8, UInt8(keys.count)]
                for key in keys {
                    let utf8 = Array(key.utf8)
                    if rng.next() % 5 == 0 && utf8.count > 1 {
                        bytes += [0x7F, 0x61, utf8[0]] + (try! encodedKey(String(key.dropFirst()))) + [0xFF]
                    } else {
                        bytes += try! encodedKey(key)
                    }
                    bytes.append(0x01)
                }
                return bytes
            }
            let decoded = try CBORDecoder().decode([String: Int].self, from: map(keys))
            #expect(decoded.count == count, "seed \(seed), round \(round)")
            var twice = keys
            let repeated = keys[Int(rng.next() % UInt64(count))]
            twice.insert(repeated, at: Int(rng.next() % UInt64(count + 1)))
            #expect(throws: CBORDecodingError(.duplicateKey(repeated), at: 0), "seed \(seed), round \(round)") {
                try CBORDecoder().decode([String: Int].self, from: map(twice))
            }
        }
        // Integer keys, alone and beside text keys.
        let ints: [UInt8] = [0xA3, 0x01, 0x00, 0x20, 0x00, 0x01, 0x00]  // {1: 0, -1: 0, 1: 0}
        #expect(throws: CBORDecodingError(.duplicateKey("1"), at: 0)) {
            try CBORDecoder().decode([Int: Int].self, from: ints)
        }
        #expect(try CBORDecoder().decode([Int: Int].self, from: [0xA2, 0x01, 0x00, 0x20, 0x00]) == [1: 0, -1: 0])
        let mixed: [UInt8] = [0xA3, 0x61, 0x31, 0x00, 0x01, 0x00, 0x61, 0x31, 0x00]  // {"1": 0, 1: 0, "1": 0}
        #expect(throws: CBORDecodingError(.duplicateKey("1"), at: 0)) {
            try CBORDecoder().decode([String: Int].self, from: mixed)
        }
    }

    @Test("a large map of keys of one length: all distinct decodes, a repeat anywhere is refused")
    func largeMaps() throws {
        // 50,000 three-byte keys. Checked key by key against every earlier key of the same length,
        // as maps of up to 24 entries are, this was 1.25 billion comparisons (an untrusted payload
        // could stall a reader for minutes); large maps are now checked through a hash set.
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        let count = 50_000
        func key(_ i: Int) -> [UInt8] { [alphabet[i % 64], alphabet[(i / 64) % 64], alphabet[i / 4096]] }
        func map(_ order: [Int]) -> [UInt8] {
            var bytes: [UInt8] = [0xBA] + withUnsafeBytes(of: UInt32(order.count).bigEndian, Array.init)
            for i in order { bytes += [0x63] + key(i) + [0x01] }
            return bytes
        }
        let seed = SeededGenerator.seedFromEnvironment()
        var rng = SeededGenerator(seed: seed)
        let order = Array(0..<count).shuffled(using: &rng)
        let decoded = try CBORDecoder().decode([String: Int].self, from: map(order))
        #expect(decoded.count == count)
        #expect(decoded[String(decoding: key(order[0]), as: UTF8.self)] == 1)
        for _ in 0..<3 {
            let repeated = order[Int(rng.next() % UInt64(count))]
            var twice = order
            twice.insert(repeated, at: Int(rng.next() % UInt64(count + 1)))
            #expect(
                throws: CBORDecodingError(.duplicateKey(String(decoding: key(repeated), as: UTF8.self)), at: 0),
                "seed \(seed)"
            ) {
                try CBORDecoder().decode([String: Int].self, from: map(twice))
            }
        }
    }

    @Test("one-byte keys (their own duplicate check): any ASCII byte, a repeat refused wherever it is")
    func oneByteKeys() throws {
        let seed = SeededGenerator.seedFromEnvironment()
        var rng = SeededGenerator(seed: seed)
        for round in 0..<200 {
            let count = 1 + Int(rng.next() % 100)
            let keys = Array((0..<128).map { String(UnicodeScalar(UInt8($0))) }.shuffled(using: &rng).prefix(count))
            func map(_ keys: [String]) throws -> [UInt8] {
                try keys.reduce(into: [0xB8, UInt8(keys.count)]) { bytes, key in bytes += try encodedKey(key) + [0x01] }
            }
            #expect(
                try CBORDecoder().decode([String: Int].self, from: map(keys)).count == count,
                "seed \(seed), round \(round)")
            var twice = keys
            let repeated = keys[Int(rng.next() % UInt64(count))]
            twice.insert(repeated, at: Int(rng.next() % UInt64(count + 1)))
            #expect(throws: CBORDecodingError(.duplicateKey(repeated), at: 0), "seed \(seed), round \(round)") {
                try CBORDecoder().decode([String: Int].self, from: try map(twice))
            }
        }
    }
}

extension CBORValue {
    var mapEntries: [Entry]? {
        if case .map(let entries) = self { return entries }
        return nil
    }
    var textValue: String? {
        if case .text(let text) = self { return text }
        return nil
    }
}
