import CBOR
import Foundation
import TestSupport
import Testing

/// Every kind of value the coder supports, nested.
struct Everything: Codable, Equatable {
    enum Mood: String, Codable, CaseIterable { case calm, busy, 晴れ }
    struct Inner: Codable, Equatable {
        var name: String
        var tags: [String]
        var score: Double?

        static func == (a: Inner, b: Inner) -> Bool {
            a.name == b.name && a.tags == b.tags && (a.score == nil) == (b.score == nil)
                && same(a.score ?? 0, b.score ?? 0)
        }
    }

    var int: Int
    var int8: Int8
    var int16: Int16
    var int32: Int32
    var int64: Int64
    var uint: UInt
    var uint8: UInt8
    var uint16: UInt16
    var uint32: UInt32
    var uint64: UInt64
    var double: Double
    var float: Float
    var bool: Bool
    var text: String
    var data: Data
    var date: Date
    var url: URL
    var uuid: UUID
    var mood: Mood
    var optional: Int?
    var numbers: [Int]
    var table: [String: Int]
    var intTable: [Int: String]
    var inner: Inner
    var inners: [Inner]
    var nested: [[Double]]

    static func == (a: Everything, b: Everything) -> Bool {
        // Doubles compare by bits (so -0 differs from 0), except that every NaN equals every NaN:
        // the encoder writes all NaNs as the canonical one and does not keep payloads.
        a.int == b.int && a.int8 == b.int8 && a.int16 == b.int16 && a.int32 == b.int32 && a.int64 == b.int64
            && a.uint == b.uint && a.uint8 == b.uint8 && a.uint16 == b.uint16 && a.uint32 == b.uint32
            && a.uint64 == b.uint64
            && same(a.double, b.double) && same(Double(a.float), Double(b.float))
            && a.bool == b.bool && a.text == b.text && a.data == b.data && a.date == b.date && a.url == b.url
            && a.uuid == b.uuid && a.mood == b.mood && a.optional == b.optional && a.numbers == b.numbers
            && a.table == b.table && a.intTable == b.intTable && a.inner == b.inner && a.inners == b.inners
            && a.nested.count == b.nested.count
            && zip(a.nested, b.nested).allSatisfy { $0.count == $1.count && zip($0, $1).allSatisfy(same) }
    }

    static func random(_ rng: inout SeededGenerator) -> Everything {
        func pick<T>(_ extremes: [T], _ random: () -> T) -> T {
            Int.random(in: 0..<4, using: &rng) == 0 ? extremes.randomElement(using: &rng)! : random()
        }
        func text() -> String {
            let pieces = [
                "", "a", "Grüße", "水", "🦊", "\u{0}", "line\nbreak", String(repeating: "x", count: 300), "naïve café",
            ]
            return (0..<Int.random(in: 0...3, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined()
        }
        func double() -> Double {
            pick([
                .nan, .infinity, -.infinity, -0.0, 0, .greatestFiniteMagnitude, .leastNonzeroMagnitude, 1.5, 65504, 1.1,
            ]) {
                Double(bitPattern: rng.next())
            }
        }
        func inner() -> Inner {
            Inner(
                name: text(), tags: (0..<Int.random(in: 0...3, using: &rng)).map { _ in text() },
                score: Bool.random(using: &rng) ? double() : nil)
        }
        let bigArray = Int.random(in: 0..<20, using: &rng) == 0
        return Everything(
            int: pick([.min, .max, 0, -1, 23, 24]) { Int(truncatingIfNeeded: rng.next()) },
            int8: pick([.min, .max]) { Int8(truncatingIfNeeded: rng.next()) },
            int16: pick([.min, .max]) { Int16(truncatingIfNeeded: rng.next()) },
            int32: pick([.min, .max]) { Int32(truncatingIfNeeded: rng.next()) },
            int64: pick([.min, .max, -24, -25]) { Int64(truncatingIfNeeded: rng.next()) },
            uint: pick([.max, 0]) { UInt(truncatingIfNeeded: rng.next()) },
            uint8: pick([.max, 0]) { UInt8(truncatingIfNeeded: rng.next()) },
            uint16: pick([.max, 255, 256]) { UInt16(truncatingIfNeeded: rng.next()) },
            uint32: pick([.max, 65535, 65536]) { UInt32(truncatingIfNeeded: rng.next()) },
            uint64: pick([.max, UInt64(UInt32.max) + 1]) { rng.next() },
            double: double(),
            float: pick([.nan, .infinity, -0.0, .greatestFiniteMagnitude, 1.5]) {
                Float(bitPattern: UInt32(truncatingIfNeeded: rng.next()))
            },
            bool: Bool.random(using: &rng),
            text: text(),
            data: Data((0..<Int.random(in: 0...40, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }),
            date: Date(
                timeIntervalSince1970: pick([0, -1, 1_700_000_000, 1_700_000_000.25]) {
                    Double(Int32.random(in: .min ... .max, using: &rng))
                }),
            url: URL(
                string:
                    "https://example.com/\(Int.random(in: 0...1000, using: &rng))?q=\(text().addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")"
            )!,
            uuid: UUID(),
            mood: Mood.allCases.randomElement(using: &rng)!,
            optional: Bool.random(using: &rng) ? nil : Int.random(in: -1000...1000, using: &rng),
            numbers: (0..<(bigArray ? 10_000 : Int.random(in: 0...30, using: &rng))).map { _ in
                Int(truncatingIfNeeded: rng.next() >> UInt64.random(in: 0...63, using: &rng))
            },
            table: Dictionary(
                uniqueKeysWithValues: (0..<(bigArray ? 2_000 : Int.random(in: 0...30, using: &rng))).map {
                    ("k\($0)", $0)
                }),
            intTable: Dictionary(
                uniqueKeysWithValues: (0..<Int.random(in: 0...10, using: &rng)).map { ($0 - 5, text()) }),
            inner: inner(),
            inners: (0..<Int.random(in: 0...4, using: &rng)).map { _ in inner() },
            nested: (0..<Int.random(in: 0...3, using: &rng)).map { _ in
                (0..<Int.random(in: 0...3, using: &rng)).map { _ in double() }
            }
        )
    }
}

@Suite("Codable round trips")
struct CodableTests {
    @Test("randomized values of every supported type round-trip, deterministic mode is stable")
    func randomizedRoundTrips() throws {
        let seed = SeededGenerator.seedFromEnvironment()
        var rng = SeededGenerator(seed: seed)
        for round in 0..<300 {
            let value = Everything.random(&rng)
            let bytes = try CBOREncoder().encode(value)
            let decoded = try CBORDecoder().decode(Everything.self, from: bytes)
            let same = decoded == value  // not inside #expect: the values are too large to print
            #expect(same, "seed \(seed), round \(round), fields differing: \(differingFields(decoded, value))")
            // Any CBOR tool can read it.
            _ = try CBORValue(decoding: bytes)

            let canonical = try CBOREncoder(deterministic: true).encode(value)
            #expect(try CBOREncoder(deterministic: true).encode(decoded) == canonical, "seed \(seed), round \(round)")
            let fromCanonical = try CBORDecoder().decode(Everything.self, from: canonical) == value
            #expect(fromCanonical, "seed \(seed), round \(round)")
        }
    }

    @Test("deterministic mode sorts map keys by their encoded bytes")
    func deterministicOrder() throws {
        var forward: [String: Int] = [:]
        var backward: [String: Int] = [:]
        let keys = (0..<200).map { "key-\($0)" } + ["", "a", "b", "aa", "zz", "ü"]
        for (i, key) in keys.enumerated() { forward[key] = i }
        for (i, key) in keys.enumerated().reversed() { backward[key] = i }
        let a = try CBOREncoder(deterministic: true).encode(forward)
        let b = try CBOREncoder(deterministic: true).encode(backward)
        #expect(a == b)
        guard case .map(let entries) = try CBORValue(decoding: a) else { Issue.record("not a map"); return }
        let encodedKeys = entries.map { $0.key.encoded() }
        #expect(encodedKeys == encodedKeys.sorted { $0.lexicographicallyPrecedes($1) })
        // Shorter keys first: "" then "a", "b", then two-letter keys.
        #expect(entries.prefix(3).map(\.key) == [.text(""), .text("a"), .text("b")])
    }

    @Test("shortest integer and float encodings")
    func shortestEncodings() throws {
        let cases: [(any Encodable, String)] = [
            (0, "00"), (23, "17"), (24, "1818"), (255, "18ff"), (256, "190100"), (65536, "1a00010000"),
            (-1, "20"), (-24, "37"), (-25, "3818"), (Int64.min, "3b7fffffffffffffff"),
            (UInt64.max, "1bffffffffffffffff"),
            (1.5, "f93e00"), (0.0, "f90000"), (-0.0, "f98000"), (100000.0, "fa47c35000"), (1.1, "fb3ff199999999999a"),
            (Double.infinity, "f97c00"), (Double.nan, "f97e00"), (Float(3.4028234663852886e+38), "fa7f7fffff"),
            (5.960464477539063e-08, "f90001"), ("IETF", "6449455446"), (true, "f5"), ([1, 2, 3], "83010203"),
            (Data([1, 2, 3, 4]), "4401020304"), (Date(timeIntervalSince1970: 1363896240), "c11a514b67b0"),
            (Date(timeIntervalSince1970: 1363896240.5), "c1fb41d452d9ec200000"),
            (URL(string: "http://www.example.com")!, "d82076687474703a2f2f7777772e6578616d706c652e636f6d"),
            (UUID(uuidString: "00112233-4455-6677-8899-AABBCCDDEEFF")!, "d825500011223344556677" + "8899aabbccddeeff"),
        ]
        for (value, expected) in cases {
            #expect(hex(try CBOREncoder().encode(value)) == expected, "\(value)")
        }
    }

    @Test("decodes straight from a raw buffer, Data and bytes alike")
    func inputs() throws {
        let value = Everything.Inner(name: "x", tags: ["a"], score: 2.5)
        let bytes = try CBOREncoder().encode(value)
        let fromRaw = try bytes.withUnsafeBytes { try CBORDecoder().decode(Everything.Inner.self, from: $0) }
        #expect(fromRaw == value)
        #expect(try CBORDecoder().decode(Everything.Inner.self, from: Data(bytes)) == value)
    }

    @Test("indefinite-length input decodes into types")
    func indefiniteInput() throws {
        // {_ "name": (_ "st", "ream"), "tags": [_ "a", "b"]}
        let input = bytes(hex: "bf646e616d657f627374647265616dff64746167739f61616162ffff")
        let inner = try CBORDecoder().decode(Everything.Inner.self, from: input)
        #expect(inner == Everything.Inner(name: "stream", tags: ["a", "b"], score: nil))
    }

    @Test("an indefinite-length byte string inside a map does not hide the keys after it")
    func indefiniteBytesInMap() throws {
        struct Blob: Decodable, Equatable { var a: Data; var b: Int }
        // {"a": (_ h'01', h'0203'), "b": 5}
        let input = bytes(hex: "a261615f41014202 03ff616205".replacingOccurrences(of: " ", with: ""))
        #expect(try CBORDecoder().decode(Blob.self, from: input) == Blob(a: Data([1, 2, 3]), b: 5))
    }

    @Test("userInfo reaches the values' coding code")
    func userInfo() throws {
        let key = CodingUserInfoKey(rawValue: "flavor")!
        struct Flavored: Codable {
            var seen: String
            init(seen: String) { self.seen = seen }
            init(from decoder: any Decoder) throws {
                seen = decoder.userInfo[CodingUserInfoKey(rawValue: "flavor")!] as? String ?? "none"
            }
            func encode(to encoder: any Encoder) throws {
                var c = encoder.singleValueContainer()
                try c.encode(encoder.userInfo[CodingUserInfoKey(rawValue: "flavor")!] as? String ?? "none")
            }
        }
        let bytes = try CBOREncoder(userInfo: [key: "vanilla"]).encode(Flavored(seen: ""))
        #expect(try CBORValue(decoding: bytes) == .text("vanilla"))
        #expect(try CBORDecoder(userInfo: [key: "mint"]).decode(Flavored.self, from: bytes).seen == "mint")
    }

    @Test("a map that would hold a key twice is refused when encoding")
    func duplicateKeysRefused() throws {
        struct Twice: Encodable {
            enum K: String, CodingKey { case a }
            func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: K.self)
                try c.encode(1, forKey: .a)
                try c.encode(2, forKey: .a)
            }
        }
        #expect(throws: EncodingError.self) { try CBOREncoder().encode(Twice()) }
        #expect(throws: EncodingError.self) { try CBOREncoder(deterministic: true).encode(Twice()) }
    }

    @Test("class hierarchies share one map through superEncoder and repeated containers")
    func nestedContainersAndHierarchies() throws {
        struct Flat: Codable, Equatable {
            var id: Int
            var width: Int
            var height: Int
            enum Keys: String, CodingKey { case id, meta }
            enum MetaKeys: String, CodingKey { case width, height }
            init(id: Int, width: Int, height: Int) { (self.id, self.width, self.height) = (id, width, height) }
            init(from decoder: any Decoder) throws {
                let c = try decoder.container(keyedBy: Keys.self)
                id = try c.decode(Int.self, forKey: .id)
                let meta = try c.nestedContainer(keyedBy: MetaKeys.self, forKey: .meta)
                width = try meta.decode(Int.self, forKey: .width)
                height = try meta.decode(Int.self, forKey: .height)
            }
            func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: Keys.self)
                var meta = c.nestedContainer(keyedBy: MetaKeys.self, forKey: .meta)
                try meta.encode(width, forKey: .width)
                try meta.encode(height, forKey: .height)
                try c.encode(id, forKey: .id)  // the parent moves on after the nested map
            }
        }
        let value = Flat(id: 7, width: 640, height: 480)
        let bytes = try CBOREncoder().encode(value)
        #expect(
            try CBORValue(decoding: bytes)
                == .map([
                    .init(
                        .text("meta"),
                        .map([.init(.text("width"), .unsigned(640)), .init(.text("height"), .unsigned(480))])),
                    .init(.text("id"), .unsigned(7)),
                ]))
        #expect(try CBORDecoder().decode(Flat.self, from: bytes) == value)
    }
}

/// The names of the stored properties whose printed values differ (for failure messages).
func differingFields<T>(_ a: T, _ b: T) -> [String] {
    zip(Mirror(reflecting: a).children, Mirror(reflecting: b).children).compactMap { x, y in
        String(describing: x.value) == String(describing: y.value) ? nil : (x.label ?? "?")
    }
}

/// Equal bits, or both NaN.
func same(_ a: Double, _ b: Double) -> Bool { a.bitPattern == b.bitPattern || (a.isNaN && b.isNaN) }
