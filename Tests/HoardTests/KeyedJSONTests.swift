import CBOR
import Foundation
@_spi(LMDB) import Hoard
import HoardTestSupport
import LMDB
import TestSupport
import Testing
import VariableCoding

/// The framework adapters' record has its scan and emit written out rather than generated: they
/// must do exactly what its ordinary coding methods do, or decline.
@Suite("KeyedJSON: the written-out fast path reads and writes what the ordinary code does")
struct KeyedJSONTests {
    func scanned(_ payload: [UInt8]) throws -> KeyedJSON? { try scannedAlone(KeyedJSON.self, payload, version: 1) }

    @Test("stored payloads are the bytes the ordinary path writes, the scan reads them back, a get too")
    func roundTrip() throws {
        let seed = SeededGenerator.seedFromEnvironment()
        var rng = SeededGenerator(seed: seed)
        let texts = ["", "a", "{\"n\":1}", "名前", String(repeating: "x", count: 300)]
        try withStore { store, _ in
            let values = try store.collection(KeyedJSON.self, named: "values")
            let database = try store.environment.openDatabase("c:values")
            let models = (0..<200).map { index in
                KeyedJSON(id: "key \(index) \(texts[Int(rng.next() % 5)])", json: texts[Int(rng.next() % 5)])
            }
            try values.put(models)
            for model in models {
                let record = try #require(
                    try store.environment.read { txn in try txn.value(forKey: model.id.keyBytes, in: database) })
                let payload = try namedPayload(of: record, collection: "values", in: store)
                let expected = try withKeySet(.currentLocal) { try CBOREncoder(deterministic: true).encode(model) }
                #expect(payload == expected, "seed \(seed), \(model.id)")
                #expect(try scanned(payload) == model, "seed \(seed), \(model.id)")
                #expect(try values.get(model.id) == model, "seed \(seed), \(model.id)")
            }
        }
    }

    @Test("the scan declines what it should leave to the ordinary path: a key missing, another key, another type")
    func declines() throws {
        func payload(_ map: KeyValuePairs<String, CBORValue>) -> [UInt8] {
            CBORValue.map(map.map { CBORValue.Entry(.text($0.key), $0.value) }).encoded()
        }
        #expect(try scanned(payload(["KEY": .text("k"), "JSON": .text("{}")])) == KeyedJSON(id: "k", json: "{}"))
        // The ordinary path throws for the first and the third, and reads the second with the
        // extra key ignored: declining sends each of them there.
        #expect(try scanned(payload(["KEY": .text("k")])) == nil)
        #expect(try scanned(payload(["KEY": .text("k"), "JSON": .text("{}"), "MORE": .text("x")])) == nil)
        #expect(try scanned(payload(["KEY": .text("k"), "JSON": .unsigned(1)])) == nil)
    }

    @Test("a collection the adapters wrote under their earlier record type opens and reads as KeyedJSON")
    func earlierRecordType() throws {
        try withStore { store, _ in
            let earlier = try store.collection(EarlierCachedValue.self, named: "cache")
            try earlier.put([EarlierCachedValue(id: "a", json: "1"), EarlierCachedValue(id: "b", json: "[2]")])
            let values = try store.collection(KeyedJSON.self, named: "cache")
            #expect(try values.get("a") == KeyedJSON(id: "a", json: "1"))
            #expect(try values.get("b") == KeyedJSON(id: "b", json: "[2]"))
        }
    }
}

/// The record HoardVapor's cache declared itself before KeyedJSON, with the same key set: the
/// registry recorded its type's name, and the stores it wrote must stay readable.
private struct EarlierCachedValue: Identifiable, Sendable {
    var id: String
    var json: String
}

extension EarlierCachedValue: VariablyCodable {
    static let keySets = KeySets<EarlierCachedValue>(local: [1: [\.id: "KEY", \.json: "JSON"]])

    init(from container: DecodingContainer<EarlierCachedValue>) throws {
        id = try container.decodeValue(for: \.id)
        json = try container.decodeValue(for: \.json)
    }

    func encode(to container: inout EncodingContainer<EarlierCachedValue>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(json, for: \.json)
    }
}
