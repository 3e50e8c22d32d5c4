import CBOR
import Foundation
@_spi(LMDB) import Hoard
import HoardTestSupport
import LMDB
import TestSupport
import Testing
import VariableCoding
import VariableCodingMacros

/// A model of plain properties only: the macro writes its ordinary code and the generated
/// scanning and emitting. Version 1 has other key names and no `level` (which has a default);
/// version 2 has no `big`. Keys of every length: one byte, over eight bytes encoded, and over 23
/// bytes (a two-byte head).
@VariablyCoded
struct Plain: Identifiable, Equatable, Sendable {
    var id: Int64
    var name: String
    var score: Double
    var ratio: Float
    var count: Int
    var small: Int32
    var big: UInt64?
    var flag: Bool
    var nickname: String?
    var level: Int = 1

    static let keySets = KeySets<Plain>(local: [
        1: [
            \.id: "ID", \.name: "NAME", \.score: "SCORE", \.ratio: "RATIO", \.count: "COUNT", \.small: "SMALL",
            \.big: "BIG", \.flag: "FLAG", \.nickname: "NICKNAME_OF_USER",
        ],
        2: [
            \.id: "ID", \.name: "NAME", \.score: "SCORE", \.ratio: "RATIO", \.count: "COUNT", \.small: "SMALL",
            \.flag: "FLAG", \.nickname: "THE_NICKNAME_OF_THE_USER_IF_ANY", \.level: "LEVEL",
        ],
        3: [
            \.id: "i", \.name: "n", \.score: "s", \.ratio: "r", \.count: "c", \.small: "m", \.big: "b",
            \.flag: "f", \.nickname: "nick", \.level: "lvl",
        ],
    ])

    static func random(id: Int64, using rng: inout SeededGenerator) -> Plain {
        Plain(
            id: id, name: ["", "a", "Ada Lovelace", "名前", String(repeating: "x", count: 40)][Int(rng.next() % 5)],
            score: [0, -1.5, 1e300, 0.1, .infinity][Int(rng.next() % 5)],
            ratio: [0, 2.5, -0.125, 1e-3][Int(rng.next() % 4)],
            count: Int(Int64(bitPattern: rng.next())), small: Int32(truncatingIfNeeded: rng.next()),
            big: rng.next() % 3 == 0 ? nil : rng.next() >> (rng.next() % 64), flag: rng.next() % 2 == 0,
            nickname: rng.next() % 2 == 0 ? nil : "nick\(rng.next() % 100)", level: Int(rng.next() % 10) - 5
        )
    }
}

/// A model with a property a scanner does not read: the macro writes only the ordinary code.
@VariablyCoded
struct Tagged: Identifiable, Equatable, Sendable {
    var id: String
    var tags: [String]
    var note: String? = "none"

    static let keySets = KeySets<Tagged>(local: [1: [\.id: "id", \.tags: "tags", \.note: "note"]])
}

/// A model with a stored property no key set names: storing it must fail as the ordinary
/// `encode(to:)` fails, not drop the property.
@VariablyCoded
struct Unkeyed: Identifiable, Equatable, Sendable {
    var id: Int64
    var cached: Int

    static let keySets = KeySets<Unkeyed>(local: [1: [\.id: "id"]])
}

@Suite("@VariablyCoded: generated code reads and writes what the ordinary code does")
struct GeneratedCodingTests {
    /// What the ordinary (Codable) path makes of a payload written with local version `version`.
    func reference(_ payload: [UInt8], version: Int) -> Plain? {
        try? withKeySet(.local(version)) { try CBORDecoder().decode(Plain.self, from: payload) }
    }

    /// Equal, NaN included (a changed payload may hold one).
    func same(_ a: Plain??, _ b: Plain?) -> Bool { String(describing: a ?? nil) == String(describing: b) }

    /// What generated code alone makes of it, through the same table a collection builds.
    func scanned(_ payload: [UInt8], version: Int) throws -> Plain? {
        try scannedAlone(Plain.self, payload, version: version)
    }

    @Test("encoding: stored payloads are the bytes the ordinary path writes, and read back equal")
    func encoding() throws {
        let seed = SeededGenerator.seedFromEnvironment()
        var rng = SeededGenerator(seed: seed)
        try withStore { store, _ in
            let plains = try store.collection(Plain.self)
            let database = try store.environment.openDatabase("c:Plain")
            let models = (0..<300).map { Plain.random(id: Int64($0) - 150, using: &rng) }
            try plains.put(models)
            for model in models {
                let record = try #require(
                    try store.environment.read { txn in try txn.value(forKey: model.id.keyBytes, in: database) })
                let payload = try namedPayload(of: record, collection: "Plain", in: store)
                let expected = try withKeySet(.currentLocal) { try CBOREncoder(deterministic: true).encode(model) }
                #expect(payload == expected, "seed \(seed), model \(model.id)")
                #expect(
                    try scanned(payload, version: 3) == model,
                    "seed \(seed): generated code declined a payload it wrote")
                #expect(try plains.get(model.id) == model, "seed \(seed), model \(model.id)")
            }
        }
    }

    @Test("decoding: changed payloads of every version are read as the ordinary path reads them, or declined")
    func decoding() throws {
        let seed = SeededGenerator.seedFromEnvironment()
        var rng = SeededGenerator(seed: seed)
        var (accepted, refused) = (0, 0)
        try withStore { store, _ in
            let plains = try store.collection(Plain.self)
            let database = try store.environment.openDatabase("c:Plain")
            for round in 0..<1_500 {
                let version = 1 + round % 3
                let model = Plain.random(id: Int64(round), using: &rng)
                var payload = try withKeySet(.local(version)) {
                    try CBOREncoder(deterministic: round % 2 == 0).encode(model)
                }
                // Entry-level changes (missing keys, nulls, other types, unknown or repeated keys),
                // then byte-level ones (flips, cuts, insertions); none at all in some rounds.
                if round % 5 != 0, case .map(var entries) = try CBORValue(decoding: payload) {
                    for _ in 0..<Int(rng.next() % 3) where !entries.isEmpty {
                        let index = Int(rng.next() % UInt64(entries.count))
                        // Integers at the edges of every integer type, and at random.
                        let edges: [UInt64] = [
                            0, 1, UInt64(Int32.max) - 1, UInt64(Int32.max), UInt64(Int32.max) + 1,
                            UInt64(Int64.max) - 1, UInt64(Int64.max), UInt64(Int64.max) + 1, .max,
                        ]
                        let integer =
                            rng.next() % 2 == 0
                            ? edges[Int(rng.next() % UInt64(edges.count))] : rng.next() >> (rng.next() % 64)
                        switch rng.next() % 10 {
                        case 0: entries.remove(at: index)
                        case 1: entries[index].value = .null
                        case 2: entries[index].value = .undefined
                        case 3: entries[index].value = .text("wrong")
                        case 4: entries[index].value = .unsigned(integer)
                        case 5: entries[index].value = .negative(integer)
                        case 8: entries[index].value = .bool(rng.next() % 2 == 0)
                        case 6: entries[index].value = .float([0.5, 1e40, -0.0, .nan, 3][Int(rng.next() % 5)])
                        case 7: entries.append(entries[index])
                        default:
                            entries.append(
                                CBORValue.Entry(.text(["extra", "NAME", "n"][Int(rng.next() % 3)]), .bool(true)))
                        }
                    }
                    payload = CBORValue.map(entries).encoded()
                }
                if round % 3 == 1, !payload.isEmpty {
                    for _ in 0..<(1 + Int(rng.next() % 2)) {
                        let at = Int(rng.next() % UInt64(payload.count))
                        switch rng.next() % 4 {
                        case 0: payload[at] ^= UInt8(1 << (rng.next() % 8))
                        case 1: payload.removeSubrange(at...)
                        case 2: payload.insert(UInt8(truncatingIfNeeded: rng.next()), at: at)
                        default: payload[at] = [0xF6, 0xF7, 0x7F, 0xFF, 0x1B, 0xC0][Int(rng.next() % 6)]
                        }
                        if payload.isEmpty { break }
                    }
                }
                let expected = reference(payload, version: version)
                let fast = try scanned(payload, version: version)
                if let fast {
                    #expect(
                        same(fast, expected),
                        "seed \(seed), round \(round): generated code read what the ordinary path reads otherwise")
                    accepted += 1
                }
                if expected == nil { refused += 1 }
                // And the store, which tries generated code first, agrees with the ordinary path.
                // Keys by name (format 2) in some rounds, by number (format 3, when they fit) in others.
                let record = makeRecord(
                    RecordHeader(version: version, writtenAt: 1, expiresAt: nil), payload: payload, of: Plain.self,
                    numbered: round % 3 != 0)
                try store.environment.write { txn in try txn.put(record, forKey: model.id.keyBytes, in: database) }
                #expect(same(try? plains.get(model.id), expected), "seed \(seed), round \(round)")
            }
        }
        // Both kinds of outcome were reached: generated code accepted many payloads, and the
        // ordinary path refused many changed ones.
        #expect(accepted > 500 && refused > 300, "seed \(seed): \(accepted) accepted, \(refused) refused")
    }

    @Test("what generated code declines still reads: unknown keys, chunked strings, indefinite maps")
    func declined() throws {
        let cases: [(String, [UInt8])] = [
            ("an unknown key", CBORValue.map(entries(extra: ("extra", .bool(true)))).encoded()),
            ("an indefinite-length map", [0xBF] + CBORValue.map(entries()).encoded().dropFirst() + [0xFF]),
            ("a chunked name", chunkedName()),
        ]
        for (what, payload) in cases {
            #expect(try scanned(payload, version: 3) == nil, "\(what): generated code should decline")
            let read = try #require(reference(payload, version: 3), "\(what)")
            #expect(read.name == "Ada" && read.id == 7, "\(what)")
        }
        // An integer where a Double is: both read it (the ordinary path widens it exactly).
        let widened = CBORValue.map(entries(replacing: "s", with: .unsigned(7))).encoded()
        #expect(try scanned(widened, version: 3)?.score == 7)
        #expect(reference(widened, version: 3)?.score == 7)
    }

    @Test("numbers at the edges of every property type: read as the ordinary path reads them, or declined")
    func edges() throws {
        let integers: [UInt64] = [
            0, 1, 23, 24, 255, 256, UInt64(Int32.max) - 1, UInt64(Int32.max), UInt64(Int32.max) + 1,
            1 << 53, (1 << 53) + 1, UInt64(Int64.max) - 1, UInt64(Int64.max), UInt64(Int64.max) + 1, .max,
        ]
        var values = integers.flatMap { [CBORValue.unsigned($0), .negative($0)] }
        values += [
            .float(1e40), .float(-0.0), .float(.infinity), .float(0.1), .float(16_777_217), .bool(false), .null,
            .undefined,
        ]
        var (accepted, refused) = (0, 0)
        for key in ["i", "s", "r", "c", "m", "b", "f", "nick", "lvl"] {
            for value in values {
                let payload = CBORValue.map(entries(replacing: key, with: value)).encoded()
                let expected = reference(payload, version: 3)
                if let fast = try scanned(payload, version: 3) {
                    #expect(same(fast, expected), "'\(key)': \(value)")
                    accepted += 1
                }
                if expected == nil { refused += 1 }
            }
        }
        #expect(accepted > 100 && refused > 100, "\(accepted) accepted, \(refused) refused")
    }

    func entries(
        extra: (String, CBORValue)? = nil, replacing key: String? = nil, with value: CBORValue = .null
    ) -> [CBORValue.Entry] {
        var entries: [CBORValue.Entry] = [
            .init(.text("i"), .unsigned(7)), .init(.text("n"), .text("Ada")), .init(.text("s"), .float(1.5)),
            .init(.text("r"), .float(0.5)), .init(.text("c"), .unsigned(1)), .init(.text("m"), .unsigned(2)),
            .init(.text("f"), .bool(true)), .init(.text("lvl"), .unsigned(3)), .init(.text("b"), .unsigned(4)),
            .init(.text("nick"), .text("Lady")),
        ]
        if let extra { entries.append(.init(.text(extra.0), extra.1)) }
        if let key, let index = entries.firstIndex(where: { $0.key == .text(key) }) { entries[index].value = value }
        return entries
    }

    /// The same map with `n` as an indefinite-length string of two chunks.
    func chunkedName() -> [UInt8] {
        let rest = CBORValue.map(entries().filter { $0.key != .text("n") }).encoded()
        // Map head + 1 entry: the rest's entries follow its own head (one byte: fewer than 24).
        return [
            0xA0 | ((rest[0] & 0x1F) + 1), 0x61, UInt8(ascii: "n"), 0x7F, 0x61, UInt8(ascii: "A"), 0x62,
            UInt8(ascii: "d"), UInt8(ascii: "a"), 0xFF,
        ]
            + rest.dropFirst()
    }

    @Test("a property without a key is refused when storing, as by the ordinary code")
    func unkeyed() throws {
        try withStore { store, _ in
            let collection = try store.collection(Unkeyed.self)
            #expect {
                try collection.put(Unkeyed(id: 1, cached: 5))
            } throws: { error in
                guard case HoardError.encoding(_, _, let underlying) = error,
                    case VariableCodingError.propertyWithoutKey(_, _, let property) = underlying
                else { return false }
                return property == "cached"
            }
            #expect(try collection.count() == 0)
        }
    }

    @Test("a model with a property generated code does not read goes the ordinary way, defaults included")
    func ordinaryOnly() throws {
        try withStore { store, _ in
            let tagged = try store.collection(Tagged.self)
            try tagged.put([Tagged(id: "a", tags: ["x", "y"], note: nil), Tagged(id: "b", tags: [])])
            #expect(try tagged.get("a") == Tagged(id: "a", tags: ["x", "y"], note: nil))
            #expect(try tagged.get("b") == Tagged(id: "b", tags: [], note: "none"))
        }
        // The initial value is the default of a missing key; an optional's missing key is nil.
        let payload = CBORValue.map([.init(.text("id"), .text("c")), .init(.text("tags"), .array([]))]).encoded()
        #expect(
            try withKeySet(.local(1)) { try CBORDecoder().decode(Tagged.self, from: payload) }
                == Tagged(id: "c", tags: [], note: nil))
    }
}
