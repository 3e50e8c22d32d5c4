import CBOR
import Foundation
@_spi(LMDB) import Hoard
import HoardTestSupport
import LMDB
import TestSupport
import Testing
import VariableCoding

/// Every plain type, coded by hand through key paths in an order unlike the keys': puts record
/// its `encode(to:)` by field. `nickname` is left out when `nil`, `note` written as `null`.
struct HandPlain: VariablyCodable, Identifiable, Equatable, Sendable {
    var id: Int64
    var name: String
    var score: Double
    var ratio: Float
    var count: Int
    var small: Int32
    var big: UInt64
    var flag: Bool
    var nickname: String?

    static let keySets = KeySets<HandPlain>(local: [
        1: [\.id: "ID", \.name: "NAME", \.score: "SCORE", \.count: "COUNT", \.flag: "FLAG"],
        2: [
            \.id: "i", \.name: "n", \.score: "s", \.ratio: "r", \.count: "c", \.small: "m", \.big: "b", \.flag: "f",
            \.nickname: "THE_NICKNAME_OF_THE_USER_IF_ANY",
        ],
    ])

    static func random(id: Int64, using rng: inout SeededGenerator) -> HandPlain {
        HandPlain(
            id: id, name: ["", "a", "Ada Lovelace", "名前", String(repeating: "x", count: 40)][Int(rng.next() % 5)],
            score: [0, -1.5, 1e300, 0.1, .infinity][Int(rng.next() % 5)], ratio: [0, 2.5, -0.125][Int(rng.next() % 3)],
            count: Int(Int64(bitPattern: rng.next())), small: Int32(truncatingIfNeeded: rng.next()),
            big: rng.next() >> (rng.next() % 64), flag: rng.next() % 2 == 0,
            nickname: rng.next() % 2 == 0 ? nil : "nick\(rng.next() % 100)")
    }

    init(
        id: Int64, name: String, score: Double, ratio: Float, count: Int, small: Int32, big: UInt64, flag: Bool,
        nickname: String?
    ) {
        (self.id, self.name, self.score, self.ratio, self.count) = (id, name, score, ratio, count)
        (self.small, self.big, self.flag, self.nickname) = (small, big, flag, nickname)
    }

    init(from container: DecodingContainer<HandPlain>) throws {
        id = try container.decodeValue(for: \.id)
        name = try container.decodeValue(for: \.name)
        score = try container.decodeValue(for: \.score)
        ratio = try container.decodeValue(for: \.ratio, default: 1)
        count = try container.decodeValue(for: \.count)
        small = try container.decodeValue(for: \.small, default: 0)
        big = try container.decodeValue(for: \.big, default: 0)
        flag = try container.decodeValue(for: \.flag)
        nickname = try container.decodeValueIfPresent(for: \.nickname)
    }

    func encode(to container: inout EncodingContainer<HandPlain>) throws {
        try container.encodeValue(flag, for: \.flag)
        try container.encodeValueIfPresent(nickname, for: \.nickname)
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(big, for: \.big)
        try container.encodeValue(name, for: \.name)
        try container.encodeValue(score, for: \.score)
        try container.encodeValue(ratio, for: \.ratio)
        try container.encodeValue(small, for: \.small)
        try container.encodeValue(count, for: \.count)
    }
}

/// A model whose `encode(to:)` writes a value of a type that is not plain, or (when `twice`) one
/// field twice: recording declines, and the ordinary path writes it or refuses it.
struct Mixed: VariablyCodable, Identifiable, Equatable, Sendable {
    var id: Int64
    var at: Date
    var twice = false

    static let keySets = KeySets<Mixed>(local: [1: [\.id: "id", \.at: "at", \.twice: "twice"]])

    init(id: Int64, at: Date, twice: Bool = false) { (self.id, self.at, self.twice) = (id, at, twice) }
    init(from container: DecodingContainer<Mixed>) throws {
        id = try container.decodeValue(for: \.id)
        at = try container.decodeValue(for: \.at)
        twice = try container.decodeValue(for: \.twice)
    }
    func encode(to container: inout EncodingContainer<Mixed>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(twice, for: \.twice)
        if twice { try container.encodeValue(id, for: \.id) }
        try container.encodeValue(at, for: \.at)
    }
}

@Suite("Coding methods written by hand: recorded by field, the bytes of the ordinary path")
struct RecordedCodingTests {
    func payloads(_ ids: [Int64], of collection: String, in store: Store) throws -> [[UInt8]] {
        let database = try store.environment.openDatabase("c:" + collection)
        return try store.environment.read { txn in
            try ids.map { id in
                let record = try #require(try txn.value(forKey: id.keyBytes, in: database))
                return try namedPayload(of: record, collection: collection, in: store)
            }
        }
    }

    @Test("every form of put stores the bytes the Codable path writes, and they read back equal")
    func bytes() throws {
        let seed = SeededGenerator.seedFromEnvironment()
        var rng = SeededGenerator(seed: seed)
        try withStore { store, _ in
            let collection = try store.collection(HandPlain.self)
            let bulk = (0..<200).map { HandPlain.random(id: Int64($0) - 100, using: &rng) }
            let single = (200..<260).map { HandPlain.random(id: Int64($0), using: &rng) }
            try collection.put(bulk)
            for model in single { try collection.put(model) }
            let models = bulk + single
            let expected = try models.map { model in
                try withKeySet(.currentLocal) { try CBOREncoder(deterministic: true).encode(model) }
            }
            #expect(try payloads(models.map(\.id), of: "HandPlain", in: store) == expected, "seed \(seed)")
            for model in models { #expect(try collection.get(model.id) == model, "seed \(seed), model \(model.id)") }
        }
    }

    @Test("a value that is not plain goes the ordinary way; a field written twice is refused as there")
    func declines() throws {
        try withStore { store, _ in
            let collection = try store.collection(Mixed.self)
            let models = [Mixed(id: 1, at: Date(timeIntervalSince1970: 1_000)), Mixed(id: 2, at: Date())]
            try collection.put(models[0])
            try collection.put(models[1])
            let expected = try models.map { model in
                try withKeySet(.currentLocal) { try CBOREncoder(deterministic: true).encode(model) }
            }
            #expect(try payloads([1, 2], of: "Mixed", in: store) == expected)
            #expect(try collection.get(1) == models[0])
            // A new collection object records again, and declines at the field written twice.
            let fresh = try store.collection(Mixed.self)
            #expect(throws: HoardError.self) { try collection.put(Mixed(id: 3, at: Date(), twice: true)) }
            #expect(throws: HoardError.self) { try fresh.put(Mixed(id: 3, at: Date(), twice: true)) }
            #expect(try collection.get(3) == nil)
        }
    }
}
