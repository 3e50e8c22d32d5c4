import CBOR
import Foundation
@testable @_spi(LMDB) import Hoard
import HoardTestSupport
import Testing
import VariableCoding

/// Record format 3's payloads: top-level keys by number.
@Suite("Payload keys by number")
struct PayloadKeysTests {
    @Test("numbers stand for a version's top-level key names in UTF-8 order; a dotted name counts once")
    func numbering() {
        let numbering = CBORKeyNumbering.payload(keyNames: ["B", "É", "meta.x", "meta.y", "A"])
        #expect(numbering.names == ["A", "B", "meta", "É"])
        #expect(numbering.number(of: "meta") == 2 && numbering.number(of: "meta.x") == nil)
    }

    @Test("a map of more numbered fields than one-byte keys hold is written and read back, field by field")
    func manyFields() throws {
        let names = (0..<40).map { "FIELD_\($0)" }
        let numbering = CBORKeyNumbering(names.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
        let keys = CBORKeyTable(names, numbering: numbering)
        let bytes = try CBOREncoder(deterministic: true).encodeFields(keys: keys) { map in
            for field in names.indices { try map.encode(Int64(field * 1_000), field: field) }
        }
        guard case .map(let entries) = try CBORValue(decoding: bytes) else {
            Issue.record("not a map")
            return
        }
        #expect(entries.map(\.key) == (0..<40).map { .unsigned(UInt64($0)) })
        let read = try CBORDecoder().decodeFields(from: bytes, keys: keys) { map in
            try names.indices.map { try map.decode(Int64.self, field: $0) }
        }
        #expect(read == names.indices.map { Int64($0 * 1_000) })
        // The transcoder agrees with the table.
        let named = try bytes.withUnsafeBytes { try numbering.named($0) }
        #expect(try named.withUnsafeBytes { try numbering.numbered($0) } == bytes)
    }

    @Test("two equal numbers in a map are refused, however wide their heads; distinct ones pass")
    func duplicateNumbers() throws {
        // {0: 1, 0: 2}, {0: 1, 0 (as 0x18 0x00): 2}, {1: 1, 0: 2}
        #expect(throws: CBORDecodingError(.duplicateKey("unsigned(0)"), at: 0)) {
            try ([0xA2, 0x00, 0x01, 0x00, 0x02] as [UInt8]).withUnsafeBytes { _ = try CBORValue.validate($0) }
        }
        #expect(throws: CBORDecodingError(.duplicateKey("unsigned(0)"), at: 0)) {
            try ([0xA2, 0x00, 0x01, 0x18, 0x00, 0x02] as [UInt8]).withUnsafeBytes { _ = try CBORValue.validate($0) }
        }
        #expect(try ([0xA2, 0x01, 0x01, 0x00, 0x02] as [UInt8]).withUnsafeBytes { try CBORValue.validate($0) } == 5)
    }

    @Test("a put stores only numbers at the top level, which name back to the payload the Codable path writes")
    func stored() throws {
        try withStore { store, _ in
            let notes = try store.collection(Note.self)
            let note = Note(id: -42, text: "forty-two", stars: 3, pinned: true)
            try notes.put(note)
            let database = try store.environment.openDatabase("c:Note")
            let record = try #require(
                try store.environment.read { txn in try txn.value(forKey: note.id.keyBytes, in: database) })
            let (header, payload) = try record.withUnsafeBytes { bytes in
                let (header, payload) = try RecordHeader.parse(bytes)
                return (header, Array(payload))
            }
            #expect(header.recordFormat == 3 && header.hasNumberedKeys)
            guard case .map(let entries) = try CBORValue(decoding: payload) else {
                Issue.record("the payload is not a map")
                return
            }
            // Note's version 3 has four key names: numbers 0 to 3, in order, once each.
            #expect(entries.map(\.key) == (0..<4).map { .unsigned(UInt64($0)) })
            let codable = try CBOREncoder(deterministic: true, userInfo: [.keySet: KeySetID.local(3)]).encode(note)
            #expect(try namedPayload(of: record, collection: "Note", in: store) == codable)
            #expect(payload.count < codable.count)
            #expect(try notes.get(note.id) == note)
        }
    }
}
