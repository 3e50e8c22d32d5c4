import CBOR
import Foundation
import TestSupport
import Testing

@Suite("Maps by field number: CBORKeyTable, decodeFields, encodeFields")
struct FieldTests {
    let keys = CBORKeyTable(["name", "age", "a", "zz"])

    @Test("written by field number, the bytes equal a Codable map's; read back by field number")
    func roundTrip() throws {
        struct Same: Encodable {
            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: Key.self)
                try container.encode("Ada", forKey: Key(stringValue: "name"))
                try container.encode(36, forKey: Key(stringValue: "age"))
                try container.encode(true, forKey: Key(stringValue: "a"))
            }
        }
        for deterministic in [false, true] {
            let encoder = CBOREncoder(deterministic: deterministic)
            let bytes = try encoder.encodeFields(keys: keys) { map in
                try map.encode("Ada", field: 0)
                try map.encode(36, field: 1)
                try map.encode(true, field: 2)
            }
            #expect(bytes == (try encoder.encode(Same())))
            let (name, age, flag, hasZZ) = try CBORDecoder().decodeFields(from: bytes, keys: keys) { map in
                (
                    try map.decode(String.self, field: 0), try map.decode(Int.self, field: 1),
                    try map.decode(Bool.self, field: 2), map.contains(field: 3)
                )
            }
            #expect(name == "Ada" && age == 36 && flag && !hasZZ)
        }
    }

    @Test("the whole item is checked first, as the Decoder checks it")
    func checks() throws {
        let decoder = CBORDecoder()
        func read(_ bytes: [UInt8]) throws -> String {
            try decoder.decodeFields(from: bytes, keys: keys) { try $0.decode(String.self, field: 0) }
        }
        #expect(throws: DecodingError.self) { try read([0x83, 0x01, 0x02, 0x03]) }  // an array
        #expect(throws: CBORDecodingError(.trailingBytes(count: 1), at: 7)) {
            try read([0xA1, 0x64, 0x6E, 0x61, 0x6D, 0x65, 0x60, 0x00])
        }
        // {"a": 1, "a": 2}: a duplicate, even of a key the table also names.
        #expect(throws: CBORDecodingError(.duplicateKey("a"), at: 0)) {
            try read([0xA2, 0x61, 0x61, 0x01, 0x61, 0x61, 0x02])
        }
        // A key written in chunks is the same key; integer and unknown keys are ignored.
        let chunked: [UInt8] = [
            0xA3, 0x7F, 0x62, 0x6E, 0x61, 0x62, 0x6D, 0x65, 0xFF, 0x62, 0x68, 0x69, 0x01, 0x02, 0x63, 0x78, 0x79, 0x7A,
            0x00,
        ]
        #expect(try read(chunked) == "hi")
        // Missing, out of range, of the wrong type: the errors a keyed container gives, naming the key.
        let bytes = try CBOREncoder().encodeFields(keys: keys) { try $0.encode(7, field: 1) }
        try decoder.decodeFields(from: bytes, keys: keys) { map in
            #expect(throws: DecodingError.self) { try map.decode(String.self, field: 0) }
            #expect(throws: DecodingError.self) { try map.decode(String.self, field: 9) }
            #expect(throws: DecodingError.self) { try map.decode(String.self, field: -1) }
            do {
                _ = try map.decode(String.self, field: 1)
                Issue.record("an integer decoded as a string")
            } catch DecodingError.typeMismatch(_, let context) {
                #expect(context.codingPath.map(\.stringValue) == ["age"])
            }
            #expect(try map.decode(Double.self, field: 1) == 7)  // integers into floats, as the Decoder does
        }
        // A reader kept past its call refuses to read.
        let kept = try decoder.decodeFields(from: bytes, keys: keys) { $0 }
        #expect(throws: DecodingError.self) { try kept.decode(Int.self, field: 1) }
        #expect(!kept.contains(field: 1))
    }

    @Test("the writer refuses a field twice and an unknown field number, and orders deterministic maps")
    func writer() throws {
        #expect(throws: EncodingError.self) {
            try CBOREncoder().encodeFields(keys: keys) {
                try $0.encode(1, field: 1); try $0.encode(2, field: 1)
            }
        }
        #expect(throws: EncodingError.self) {
            try CBOREncoder().encodeFields(keys: keys) { try $0.encode(1, field: 4) }
        }
        // Two fields of one name: either alone is fine, both are a duplicate key.
        let twins = CBORKeyTable(["a", "b", "a"])
        #expect(try CBOREncoder().encodeFields(keys: twins) { try $0.encode(1, field: 2) } == [0xA1, 0x61, 0x61, 0x01])
        #expect(throws: EncodingError.self) {
            try CBOREncoder(deterministic: true).encodeFields(keys: twins) {
                try $0.encode(1, field: 0); try $0.encode(2, field: 2)
            }
        }
        // The empty key is a key like any other.
        let withEmpty = CBORKeyTable(["a", ""])
        let map = try CBOREncoder(deterministic: true).encodeFields(keys: withEmpty) {
            try $0.encode(1, field: 0); try $0.encode(2, field: 1)
        }
        #expect(map == [0xA2, 0x60, 0x02, 0x61, 0x61, 0x01])
        #expect(
            try CBORDecoder().decodeFields(from: map, keys: withEmpty) {
                [try $0.decode(Int.self, field: 0), try $0.decode(Int.self, field: 1)]
            } == [1, 2])
        // A writer kept past its call refuses to write.
        nonisolated(unsafe) var kept: CBORFieldWriter?
        _ = try CBOREncoder().encodeFields(keys: keys) { kept = $0 }
        #expect(throws: EncodingError.self) { try kept?.encode(1, field: 1) }
        let bytes = try CBOREncoder(deterministic: true).encodeFields(keys: keys) { map in
            try map.encode("z", field: 3)
            try map.encode(Data([1, 2]), field: 0)  // through the Encoder: a byte string
            try map.encodeNil(field: 2)
        }
        #expect(
            bytes == [
                0xA3, 0x61, 0x61, 0xF6, 0x62, 0x7A, 0x7A, 0x61, 0x7A, 0x64, 0x6E, 0x61, 0x6D, 0x65, 0x42, 0x01, 0x02,
            ])
    }
}

private struct Key: CodingKey {
    let stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}
