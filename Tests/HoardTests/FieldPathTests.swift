import CBOR
import Foundation
@_spi(LMDB) import Hoard
import HoardTestSupport
import LMDB
import TestSupport
import Testing
import VariableCoding

/// A nested model with key sets of its own: inside a field-coded model it is coded through
/// Codable, with the key set of the version being coded.
struct ProbeOwner: VariablyCodable, Equatable, Sendable {
    var handle: String
    static let keySets = KeySets<ProbeOwner>(local: [1: [\.handle: "H"]])
    init(handle: String) { self.handle = handle }
    init(from container: DecodingContainer<ProbeOwner>) throws { handle = try container.decodeValue(for: \.handle) }
    func encode(to container: inout EncodingContainer<ProbeOwner>) throws {
        try container.encodeValue(handle, for: \.handle)
    }
}

/// A model with a property of every kind the decoding container treats differently: primitives
/// of each typed entry point, widening targets, an optional, a default, a list, nested values.
struct Probe: VariablyCodable, Identifiable, Equatable, Sendable {
    struct Size: Codable, Equatable, Sendable {
        var width: Int
        var height: Int
    }
    var id: Int64
    var name: String
    var score: Double
    var ratio: Float
    var count: Int
    var small: Int32
    var big: UInt64
    var flag: Bool
    var nickname: String?
    var level: Int
    var tags: [String]
    var size: Size
    var seen: Date?
    var owner: ProbeOwner

    static let keySets = KeySets<Probe>(
        local: [
            1: [
                \.id: "i", \.name: "n", \.score: "s", \.ratio: "r", \.count: "c", \.small: "m", \.big: "b",
                \.flag: "f", \.nickname: "nick", \.level: "lvl", \.tags: "tags", \.size: "size", \.seen: "seen",
                \.owner: "o",
            ]
        ]
    )

    init(
        id: Int64, name: String, score: Double, ratio: Float, count: Int, small: Int32, big: UInt64, flag: Bool,
        nickname: String?, level: Int, tags: [String], size: Size, seen: Date?, owner: ProbeOwner
    ) {
        (self.id, self.name, self.score, self.ratio, self.count, self.small, self.big, self.flag) = (
            id, name, score, ratio, count, small, big, flag
        )
        (self.nickname, self.level, self.tags, self.size, self.seen, self.owner) = (
            nickname, level, tags, size, seen, owner
        )
    }

    init(from container: DecodingContainer<Probe>) throws {
        id = try container.decodeValue(for: \.id)
        name = try container.decodeValue(for: \.name)
        score = try container.decodeValue(for: \.score)
        ratio = try container.decodeValue(for: \.ratio)
        count = try container.decodeValue(for: \.count)
        small = try container.decodeValue(for: \.small)
        big = try container.decodeValue(for: \.big)
        flag = try container.decodeValue(for: \.flag)
        nickname = try container.decodeValueIfPresent(for: \.nickname)
        level = try container.decodeValue(for: \.level, default: 1)
        tags = try container.decodeList(String.self, forProperty: \.tags).elements
        size = try container.decodeValue(for: \.size)
        seen = try container.decodeValueIfPresent(for: \.seen)
        owner = try container.decodeValue(for: \.owner)
    }

    func encode(to container: inout EncodingContainer<Probe>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(name, for: \.name)
        try container.encodeValue(score, for: \.score)
        try container.encodeValue(ratio, for: \.ratio)
        try container.encodeValue(count, for: \.count)
        try container.encodeValue(small, for: \.small)
        try container.encodeValue(big, for: \.big)
        try container.encodeValue(flag, for: \.flag)
        try container.encodeValueIfPresent(nickname, for: \.nickname)
        try container.encodeValue(level, for: \.level)
        try container.encodeValue(tags, for: \.tags)
        try container.encodeValue(size, for: \.size)
        try container.encodeValueIfPresent(seen, for: \.seen)
        try container.encodeValue(owner, for: \.owner)
    }

    static func random(id: Int64, using rng: inout SeededGenerator) -> Probe {
        Probe(
            id: id, name: ["", "a", "Ada Lovelace", "名前", String(repeating: "x", count: 40)][Int(rng.next() % 5)],
            score: [0, -1.5, 1e300, 0.1][Int(rng.next() % 4)], ratio: [0, 2.5, -0.125][Int(rng.next() % 3)],
            count: Int(Int64(bitPattern: rng.next())), small: Int32(truncatingIfNeeded: rng.next()), big: rng.next(),
            flag: rng.next() % 2 == 0, nickname: rng.next() % 2 == 0 ? nil : "nick\(rng.next() % 100)",
            level: Int(rng.next() % 10), tags: (0..<Int(rng.next() % 4)).map { "t\($0)" },
            size: Size(width: Int(rng.next() % 1000), height: Int(rng.next() % 1000)),
            seen: rng.next() % 2 == 0 ? nil : Date(timeIntervalSince1970: Double(rng.next() % 2_000_000_000)),
            owner: ProbeOwner(handle: "@\(rng.next() % 1000)")
        )
    }
}

@Suite("The store's field-by-field coding agrees with the Codable path")
struct FieldPathTests {
    /// What the Codable path makes of `payload` (the reference): the model, or the property and
    /// key its error names.
    func reference(_ payload: [UInt8]) -> Result<Probe, Outcome> {
        do {
            return .success(try withKeySet(.local(1)) { try CBORDecoder().decode(Probe.self, from: payload) })
        } catch {
            return .failure(Outcome(error))
        }
    }

    /// A failure reduced to what both paths must agree on.
    struct Outcome: Error, Equatable {
        var property = "-"
        var key = "-"
        var kind: String
        init(_ error: any Error) {
            var error = error
            if case HoardError.decoding(_, _, _, let underlying) = error { error = underlying }
            if case VariableCodingError.decoding(_, _, let property, let key, _, _, _) = error {
                (self.property, self.key, kind) = (property, key, "decoding")
            } else if error is CBORDecodingError {
                kind = "malformed"
            } else if case HoardError.corruptRecord = error {
                kind = "malformed"  // the store's name for a payload the CBOR decoder refuses
            } else {
                kind = "\(type(of: error))"
            }
        }
    }

    @Test("decoding: random payloads with missing keys, nulls, wrong types, widened numbers and unknown keys")
    func decoding() throws {
        let seed = SeededGenerator.seedFromEnvironment()
        var rng = SeededGenerator(seed: seed)
        try withStore { store, _ in
            let probes = try store.collection(Probe.self)
            let database = try store.environment.openDatabase("c:Probe")
            var agreedFailures = 0
            for round in 0..<400 {
                let model = Probe.random(id: Int64(round), using: &rng)
                guard
                    case .map(var entries) = try CBORValue(
                        decoding: withKeySet(.currentLocal) { try CBOREncoder().encode(model) })
                else {
                    Issue.record("not a map")
                    return
                }
                // Up to three changes per payload; none at all in a quarter of the rounds.
                for _ in 0..<(round % 4 == 0 ? 0 : 1 + Int(rng.next() % 3)) where !entries.isEmpty {
                    let index = Int(rng.next() % UInt64(entries.count))
                    switch rng.next() % 6 {
                    case 0: entries.remove(at: index)
                    case 1: entries[index].value = .null
                    case 2: entries[index].value = .text("wrong")
                    case 3:
                        // Right for integers, widened for floats.
                        entries[index].value = .unsigned(rng.next() % 1000)
                    case 4:
                        entries.append(CBORValue.Entry(.text(["extra", "n", "lvl"][Int(rng.next() % 3)]), .bool(true)))
                    default: entries[index].value = .float(0.5)
                    }
                }
                if round % 2 == 0 {
                    var seenKeys = Set<CBORValue>()
                    // Most rounds without a duplicate key.
                    entries = entries.filter { seenKeys.insert($0.key).inserted }
                }
                let payload = CBORValue.map(entries).encoded()
                // Keys by name (format 2) in some rounds, by number (format 3, when they fit) in others.
                let record = makeRecord(
                    RecordHeader(version: 1, writtenAt: 1, expiresAt: nil), payload: payload, of: Probe.self,
                    numbered: round % 3 != 0)
                try store.environment.write { txn in try txn.put(record, forKey: model.id.keyBytes, in: database) }
                let viaFields: Result<Probe, Outcome>
                do {
                    viaFields = .success(try #require(try probes.get(model.id)))
                } catch {
                    viaFields = .failure(Outcome(error))
                }
                let expected = reference(payload)
                #expect(viaFields == expected, "seed \(seed), round \(round): \(CBORValue.map(entries))")
                if case .failure = expected { agreedFailures += 1 }
            }
            // The changes must have reached the error paths, not only the happy one.
            #expect(agreedFailures > 50, "seed \(seed)")
        }
    }

    @Test("encoding: the stored payload is the bytes the Codable path writes")
    func encoding() throws {
        let seed = SeededGenerator.seedFromEnvironment()
        var rng = SeededGenerator(seed: seed)
        try withStore { store, _ in
            let probes = try store.collection(Probe.self)
            let database = try store.environment.openDatabase("c:Probe")
            let models = (0..<300).map { Probe.random(id: Int64($0) - 150, using: &rng) }
            try probes.put(models)
            for model in models {
                let record = try #require(
                    try store.environment.read { txn in try txn.value(forKey: model.id.keyBytes, in: database) })
                let expected = try withKeySet(.currentLocal) { try CBOREncoder(deterministic: true).encode(model) }
                #expect(
                    try namedPayload(of: record, collection: "Probe", in: store) == expected,
                    "seed \(seed), model \(model.id)")
                #expect(try probes.get(model.id) == model, "seed \(seed), model \(model.id)")
            }
        }
    }
}
