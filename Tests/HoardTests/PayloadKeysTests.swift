import CBOR
import Foundation
@testable @_spi(LMDB) import Hoard
import HoardTestSupport
import TestSupport
import Testing
import VariableCoding

/// A model with UUID IDs, for the ID left out of its payloads.
struct Badge: VariablyCodable, Identifiable, Equatable, Sendable {
    var id: UUID
    var label: String
    static let keySets = KeySets<Badge>(local: [1: [\.id: "ID", \.label: "LABEL"]])
    init(id: UUID, label: String) { (self.id, self.label) = (id, label) }
    init(from container: DecodingContainer<Badge>) throws {
        id = try container.decodeValue(for: \.id)
        label = try container.decodeValue(for: \.label)
    }
    func encode(to container: inout EncodingContainer<Badge>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(label, for: \.label)
    }
}

/// Record format 3's payloads: keys by number, the ID once.
@Suite("Payload keys by number")
struct PayloadKeysTests {
    /// The stored record under `key` in collection `name`.
    func stored(_ key: [UInt8], _ name: String, in store: Store) throws -> [UInt8] {
        let database = try store.environment.openDatabase("c:" + name)
        return try #require(try store.environment.read { txn in try txn.value(forKey: key, in: database) })
    }

    @Test("the ID's key name is number 0, the others follow in UTF-8 order; a dotted ID is not first")
    func numbering() {
        let names = CBORKeyNumbering.payload(keyNames: ["id": "ZID", "b": "B", "a": "É", "c": "meta.x", "d": "meta.y"])
        #expect(names.names == ["ZID", "B", "meta", "É"])
        #expect(CBORKeyNumbering.payload(keyNames: ["id": "meta.id", "b": "B"]).names == ["B", "meta"])
        #expect(CBORKeyNumbering.payload(keyNames: ["b": "B", "a": "A"]).names == ["A", "B"])
    }

    @Test(
        "an ID's value made from its key is the bytes the encoder writes for the ID, for every kind that leaves it out")
    func canonicalValues() throws {
        let encoder = CBOREncoder(deterministic: true)
        func check<ID: HoardKey & Encodable>(_ id: ID) throws {
            let made = id.withKeyBytes { key in
                withUnsafeTemporaryAllocation(byteCount: key.count + 9, alignment: 1) { buffer in
                    PayloadID.value(ofKey: key, kind: ID.keyKind, into: buffer).map { Array(buffer[..<$0]) }
                }
            }
            #expect(made == (try encoder.encode(id)), "\(id)")
        }
        for value in [Int64.min, -1_000_000, -25, -24, -1, 0, 23, 24, 255, 256, 65_536, 1 << 40, .max] {
            try check(value)
        }
        for value in [UInt64(0), 23, 24, 1 << 33, .max] { try check(value) }
        for value in ["", "a", "Grüße, 水", String(repeating: "x", count: 300)] { try check(value) }
        try check(UUID())
        let none = withUnsafeTemporaryAllocation(byteCount: 9, alignment: 1) { buffer in
            PayloadID.value(ofKey: UnsafeRawBufferPointer(start: nil, count: 0), kind: .int, into: buffer)
        }
        #expect(none == nil)
        #expect(!PayloadID.elides(.custom))
    }

    @Test("a put leaves the ID out of the payload; get, scan and the hoard tool's view put it back", arguments: [0, 1])
    func idOnce(_ kind: Int) throws {
        try withStore { store, _ in
            let (key, collection, keyName): ([UInt8], String, String)
            if kind == 0 {
                let notes = try store.collection(Note.self)
                let note = Note(id: -42, text: "forty-two", stars: 3, pinned: true)
                try notes.put(note)
                #expect(try notes.get(-42) == note)
                #expect(try notes.scan() == [note])
                (key, collection, keyName) = (note.id.keyBytes, "Note", "ID")
            } else {
                let badges = try store.collection(Badge.self)
                let badge = Badge(id: UUID(), label: "gold")
                try badges.put(badge)
                #expect(try badges.get(badge.id) == badge)
                (key, collection, keyName) = (badge.id.keyBytes, "Badge", "ID")
            }
            let record = try stored(key, collection, in: store)
            let (header, payload) = try record.withUnsafeBytes { bytes in
                let (header, payload) = try RecordHeader.parse(bytes)
                return (header, Array(payload))
            }
            #expect(header.recordFormat == 3)
            // Numbers only, and no entry 0: the key holds the ID.
            guard case .map(let entries) = try CBORValue(decoding: payload) else {
                Issue.record("the payload is not a map")
                return
            }
            #expect(
                !entries.isEmpty && entries.allSatisfy { if case .unsigned(let n) = $0.key { n > 0 } else { false } })
            // Read by name, the ID is there, as the Codable path writes it.
            guard case .map(let named) = try CBORValue(decoding: try namedPayloadOf(record, key, collection, store))
            else {
                Issue.record("the named payload is not a map")
                return
            }
            #expect(named.contains { $0.key == .text(keyName) })
            #expect(named.count == entries.count + 1)
        }
    }

    func namedPayloadOf(_ record: [UInt8], _ key: [UInt8], _ collection: String, _ store: Store) throws -> [UInt8] {
        let schema = try #require(try store.schema(of: collection))
        let kind = try store.keyKind(of: schema)
        return try record.withUnsafeBytes { bytes in
            let (header, payload) = try RecordHeader.parse(bytes)
            return try key.withUnsafeBytes { key in
                try schema.textKeyed(payload, header: header, key: key, keyKind: kind)
            }
        }
    }

    @Test("an ID entry that is not what the key says stays in the payload, and is what a read decodes")
    func idThatDiffers() throws {
        try withStore { store, _ in
            let notes = try store.collection(Note.self)
            let note = Note(id: 5, text: "five", stars: 1, pinned: false)
            // A payload whose ID (6) is not its key's (5), as a foreign writer might store it.
            let named = try CBOREncoder(deterministic: true, userInfo: [.keySet: KeySetID.local(3)])
                .encode(Note(id: 6, text: "five", stars: 1, pinned: false))
            let stored = try Int64(5).withKeyBytes { key in
                try Note.keySets.storedPayload(named, version: 3, key: key, keyKind: .int)
            }
            guard case .map(let entries) = try CBORValue(decoding: stored) else {
                Issue.record("not a map")
                return
            }
            #expect(entries.first?.key == .unsigned(0) && entries.first?.value == .unsigned(6))
            let database = try store.environment.openDatabase("c:Note")
            try store.environment.write { txn in
                try txn.put(
                    RecordHeader(version: 3, writtenAt: 1, expiresAt: nil).record(with: stored),
                    forKey: note.id.keyBytes,
                    in: database)
            }
            #expect(try notes.get(5)?.id == 6)
            // Left out, the entry is the key's again: a put of the real note stores one entry fewer.
            try notes.put(note)
            let record = try self.stored(note.id.keyBytes, "Note", in: store)
            #expect(record.count < RecordHeader(version: 3, writtenAt: 1, expiresAt: nil).size + stored.count)
            #expect(try notes.get(5) == note)
        }
    }

    @Test("the ID's entry leaves and comes back byte for byte; other first entries stay")
    func stripAndRestore() throws {
        var rng = SeededGenerator(seed: SeededGenerator.seedFromEnvironment())
        for _ in 0..<500 {
            let id = Int64.random(in: -1_000_000...1_000_000, using: &rng)
            let others = (1..<Int.random(in: 1...30, using: &rng)).map {
                CBORValue.Entry(
                    .unsigned(UInt64($0)), .text(String(repeating: "v", count: Int.random(in: 0...40, using: &rng))))
            }
            let value: CBORValue = id >= 0 ? .unsigned(UInt64(id)) : .negative(UInt64(-1 - id))
            let payload = CBORValue.map([.init(.unsigned(0), value)] + others).encoded()
            try payload.withUnsafeBytes { payload in
                try id.withKeyBytes { key in
                    let stored: [UInt8] = PayloadID.withStored(payload, key: key, kind: .int) { Array($0) }
                    #expect(stored == CBORValue.map(others).encoded(), "seed \(rng.seed)")
                    let restored: [UInt8] = stored.withUnsafeBytes {
                        PayloadID.withRestored($0, key: key, kind: .int) { Array($0) }
                    }
                    #expect(restored == Array(payload), "seed \(rng.seed)")
                    // Another ID's key: the entry is not its value, and stays.
                    (id + 1).withKeyBytes { other in
                        let kept: [UInt8] = PayloadID.withStored(payload, key: other, kind: .int) { Array($0) }
                        #expect(kept == Array(payload))
                    }
                    _ = try CBORValue(decoding: stored)
                }
            }
        }
    }
}
