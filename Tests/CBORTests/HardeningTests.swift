import CBOR
import Foundation
import TestSupport
import Testing

struct Person: Codable, Equatable {
    var name: String
    var age: Int
}

@Suite("Untrusted input")
struct HardeningTests {
    func expectCBORError(
        _ input: [UInt8], _ reason: CBORDecodingError.Reason, at offset: Int,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(throws: CBORDecodingError(reason, at: offset), sourceLocation: sourceLocation) {
            try CBORValue(decoding: input)
        }
    }

    @Test("lengths larger than the input are refused before anything is allocated")
    func hugeLengths() {
        expectCBORError(
            [0x5B, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x00], .lengthExceedsInput(0x7FFF_FFFF_FFFF_FFFF),
            at: 9)
        expectCBORError([0x9B, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], .lengthExceedsInput(.max), at: 9)
        expectCBORError([0xBA, 0x80, 0x00, 0x00, 0x00, 0x01], .lengthExceedsInput(0x8000_0000), at: 5)
        #expect(throws: CBORDecodingError.self) {
            try CBORDecoder().decode([Int].self, from: [0x9A, 0xFF, 0xFF, 0xFF, 0xFF])
        }
    }

    @Test("nesting deeper than the limit is refused")
    func depth() throws {
        let deep = [UInt8](repeating: 0x81, count: 10_000) + [0x00]
        expectCBORError(deep, .tooDeep(limit: 128), at: 129)
        #expect(throws: CBORDecodingError.self) { try CBORDecoder().decode([[[[Int]]]].self, from: deep) }
        let shallow = [UInt8](repeating: 0x81, count: 5) + [0x00]
        #expect(throws: CBORDecodingError(.tooDeep(limit: 3), at: 4)) {
            try CBORDecoder(maxDepth: 3).decode([[[[[Int]]]]].self, from: shallow)
        }
        #expect(try CBORDecoder().decode([[[[[Int]]]]].self, from: shallow) == [[[[[0]]]]])
    }

    @Test("invalid UTF-8 names its offset and coding path")
    func invalidUTF8() {
        // {"name": <text of 2 bytes ff fe>, "age": 3}
        let input: [UInt8] = [0xA2, 0x64] + Array("name".utf8) + [0x62, 0xFF, 0xFE, 0x63] + Array("age".utf8) + [0x03]
        #expect(throws: CBORDecodingError(.invalidUTF8, at: 6, codingPath: "name")) {
            try CBORDecoder().decode(Person.self, from: input)
        }
        expectCBORError(input, .invalidUTF8, at: 6)
        #expect((try? CBORDecoder().decode(Person.self, from: input)).map { _ in "decoded" } == nil)
    }

    @Test("trailing bytes, truncation and reserved bytes")
    func malformed() {
        expectCBORError([0x01, 0x02], .trailingBytes(count: 1), at: 1)
        expectCBORError([0x19, 0x01], .truncated, at: 0)
        expectCBORError([0x62, 0x61], .lengthExceedsInput(2), at: 1)
        expectCBORError([0x83, 0x01, 0x02], .lengthExceedsInput(3), at: 1)
        expectCBORError([0x82, 0x19, 0x01], .truncated, at: 1)
        expectCBORError([0x1C], .reservedAdditionalInformation(28), at: 0)
        expectCBORError([0xFF], .unexpectedBreak, at: 0)
        expectCBORError([0x5F, 0x61, 0x61, 0xFF], .invalidChunk, at: 1)
        expectCBORError([], .truncated, at: 0)
        #expect(throws: CBORDecodingError(.trailingBytes(count: 1), at: 13)) {
            try CBORDecoder().decode(Person.self, from: try CBOREncoder().encode(Person(name: "a", age: 1)) + [0])
        }
    }

    @Test("a keyed container refuses duplicate keys")
    func duplicateKeys() {
        // {"name": "a", "age": 1, "name": "b"}
        let input: [UInt8] =
            [0xA3, 0x64] + Array("name".utf8) + [0x61, 0x61, 0x63] + Array("age".utf8) + [0x01, 0x64]
            + Array("name".utf8) + [0x61, 0x62]
        #expect(throws: CBORDecodingError(.duplicateKey("name"), at: 0)) {
            try CBORDecoder().decode(Person.self, from: input)
        }
        // A large map takes the hashed path.
        var big: [UInt8] = [0xB8, 40]
        for i in 0..<40 {
            let key = Array("k\(i % 39)".utf8)
            big += [0x60 | UInt8(key.count)] + key + [0x00]
        }
        #expect(throws: CBORDecodingError(.duplicateKey("k0"), at: 0)) {
            try CBORDecoder().decode([String: Int].self, from: big)
        }
    }

    @Test("CBORValue refuses duplicate keys too, at any depth, compared as values")
    func valueDuplicateKeys() throws {
        // [{"a": 1, "a": 2}]: the inner map starts at offset 1.
        expectCBORError([0x81, 0xA2, 0x61, 0x61, 0x01, 0x61, 0x61, 0x02], .duplicateKey("a"), at: 1)
        // {1: 0, 1: 0} with the second key in a longer head: the same value.
        expectCBORError([0xA2, 0x01, 0x00, 0x18, 0x01, 0x00], .duplicateKey("unsigned(1)"), at: 0)
        // An indefinite map with a repeated key.
        expectCBORError([0xBF, 0x61, 0x62, 0x01, 0x61, 0x62, 0x02, 0xFF], .duplicateKey("b"), at: 0)
        // 0.0 and -0.0 are two values; "a" and "A" two keys.
        #expect(try CBORValue(decoding: [0xA2, 0xF9, 0x00, 0x00, 0x01, 0xF9, 0x80, 0x00, 0x02]).mapEntries?.count == 2)
        #expect(try CBORValue(decoding: [0xA2, 0x61, 0x61, 0x01, 0x61, 0x41, 0x02]).mapEntries?.count == 2)
    }

    @Test("maps used as keys of maps, 127 deep, are checked once per level")
    func nestedMapKeys() throws {
        // {{{…{0: 0}…: 0}: 0}: 0}. Comparing keys by parsing them again at every level, each
        // parse checking its own keys the same way, doubles the work per level: 2^127 steps,
        // which never finishes. Found by the fuzz target (a 4 KB input that took 10 s).
        let depth = 127
        let bytes: [UInt8] = Array(repeating: 0xA1, count: depth) + [0x00] + Array(repeating: 0x00, count: depth)
        var value = try CBORValue(decoding: bytes)
        var levels = 0
        while case .map(let entries) = value, let first = entries.first {
            levels += 1
            value = first.key
        }
        #expect(levels == depth && value == .unsigned(0))
        #expect(try bytes.withUnsafeBytes { try CBORValue.validate($0) } == 5)
        // The same shape with a repeated key at the bottom is refused by both.
        let repeated: [UInt8] =
            Array(repeating: 0xA1, count: depth - 1) + [0xA2, 0x00, 0x00, 0x00, 0x00]
            + Array(repeating: 0x00, count: depth - 1)
        expectCBORError(repeated, .duplicateKey("unsigned(0)"), at: depth - 1)
        #expect(throws: CBORDecodingError(.duplicateKey("unsigned(0)"), at: depth - 1)) {
            try repeated.withUnsafeBytes { try CBORValue.validate($0) }
        }
    }

    @Test("wrong types and missing keys are DecodingErrors with the path and offset")
    func wrongShapes() throws {
        let input = try CBOREncoder().encode(["name": CBORTestValue.text("Ada"), "age": .text("old")])
        do {
            _ = try CBORDecoder().decode(Person.self, from: input)
            Issue.record("decoded a text age")
        } catch DecodingError.typeMismatch(_, let context) {
            #expect(context.codingPath.map(\.stringValue) == ["age"])
            #expect(context.debugDescription.contains("expected an integer but found a text string at byte offset"))
        }
        let missing = try CBOREncoder().encode(["name": "Ada"])
        #expect {
            try CBORDecoder().decode(Person.self, from: missing)
        } throws: { error in
            guard case DecodingError.keyNotFound(let key, _) = error else { return false }
            return key.stringValue == "age"
        }
        let tooBig = try CBOREncoder().encode(["name": CBORTestValue.text("Ada"), "age": .int(300)])
        struct Small: Decodable { var age: Int8 }
        #expect(throws: DecodingError.self) { try CBORDecoder().decode(Small.self, from: tooBig) }
        let null = try CBOREncoder().encode(["name": CBORTestValue.text("Ada"), "age": .null])
        #expect {
            try CBORDecoder().decode(Person.self, from: null)
        } throws: { error in
            if case DecodingError.valueNotFound = error { return true }
            return false
        }
    }

    @Test("random bytes never crash the decoder")
    func randomBytes() throws {
        let seed = SeededGenerator.seedFromEnvironment()
        // Its only failures are a crash or a hang, where no expectation can name the seed.
        print("random bytes: seed \(seed) (HOARD_TEST_SEED reproduces it)")
        var rng = SeededGenerator(seed: seed)
        let valid = try CBOREncoder().encode(Everything.random(&rng))
        // One seed in twenty makes a value with large collections (~80 KB encoded); 20,000
        // decodes of that take minutes in a debug build, and a few hundred reach the same paths.
        let rounds = valid.count > 10_000 ? 500 : 20_000
        for _ in 0..<rounds {
            var input = valid
            // Flip, truncate or splice: inputs that are almost valid reach the deep paths.
            switch Int.random(in: 0..<3, using: &rng) {
            case 0:
                for _ in 0..<Int.random(in: 1...4, using: &rng) {
                    input[Int.random(in: 0..<input.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                }
            case 1:
                input = Array(input.prefix(Int.random(in: 0..<input.count, using: &rng)))
            default:
                input = (0..<Int.random(in: 0...64, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            }
            _ = try? CBORValue(decoding: input)
            _ = try? CBORDecoder().decode(Everything.self, from: input)
        }
    }
}

/// A small heterogeneous value for building test inputs.
enum CBORTestValue: Encodable {
    case text(String), int(Int), null
    func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .text(let t): try c.encode(t)
        case .int(let i): try c.encode(i)
        case .null: try c.encodeNil()
        }
    }
}

@Suite("UTF-8 validation")
struct UTF8ValidationTests {
    /// Every 1-, 2- and 3-byte sequence over a set of interesting bytes, and random longer ones:
    /// the decoder must accept exactly what the standard library's validator accepts.
    @Test("agrees with the standard library on short and random sequences")
    func agreesWithStandardLibrary() throws {
        let interesting: [UInt8] = [
            0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xEC, 0xED, 0xEE,
            0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF,
        ]
        var inputs: [[UInt8]] = []
        for a in interesting {
            inputs.append([a])
            for b in interesting {
                inputs.append([a, b])
                for c in interesting { inputs.append([a, b, c]); inputs.append([0xF0, a, b, c]) }
            }
        }
        var rng = SeededGenerator(seed: SeededGenerator.seedFromEnvironment())
        for _ in 0..<20_000 {
            inputs.append(
                (0..<Int.random(in: 0...24, using: &rng)).map { _ in interesting.randomElement(using: &rng)! })
        }
        inputs.append(Array("plain ASCII text that is longer than eight bytes, Grüße 水 🦊".utf8))
        for input in inputs {
            let expected = String(validating: input, as: UTF8.self) != nil
            let cbor = [0x78, UInt8(input.count)] + input
            let accepted = (try? CBORValue(decoding: cbor)) != nil
            #expect(accepted == expected, "\(input.map { String($0, radix: 16) })")
        }
    }
}
