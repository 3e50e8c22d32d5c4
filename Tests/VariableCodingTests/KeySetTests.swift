import CBOR
import Foundation
import TestSupport
import Testing
import VariableCoding

func json(_ text: String) -> Data { Data(text.utf8) }

/// Encodes with `keySet` through CBOR (the store's coder), decodes back with the same key set.
func cborRoundTrip<T: VariablyCodable>(_ value: T, _ keySet: KeySetID) throws -> T {
    let bytes = try CBOREncoder(userInfo: [.keySet: keySet]).encode(value)
    return try CBORDecoder(userInfo: [.keySet: keySet]).decode(T.self, from: bytes)
}

/// The top-level keys of a JSON object.
func keys(of data: Data) throws -> Set<String> {
    Set((try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]).keys)
}

@Suite("Key sets")
struct KeySetTests {
    let user = UserInfo(userName: "ada", email: "ada@example.com", age: 36)

    @Test("UserInfo: local key set through a property list, remote through JSON, round trips in every key set")
    func userInfo() throws {
        let remote = json(#"{"user_name": "ada", "email_address": "ada@example.com", "user_age": 36}"#)
        #expect(try JSONDecoder().decode(UserInfo.self, from: remote, keySet: .remote("v1")) == user)

        let plist = try PropertyListEncoder().encode(user, keySet: .currentLocal)
        let stored = try PropertyListSerialization.propertyList(from: plist, format: nil) as? [String: Any]
        #expect(Set(stored?.keys.map { $0 } ?? []) == ["USER_NAME", "EMAIL", "AGE"])
        #expect(try PropertyListDecoder().decode(UserInfo.self, from: plist, keySet: .local(1)) == user)

        for keySet: KeySetID in [.currentLocal, .local(1), .remote("v1")] {
            let data = try JSONEncoder().encode(user, keySet: keySet)
            #expect(try JSONDecoder().decode(UserInfo.self, from: data, keySet: keySet) == user, "\(keySet)")
            #expect(try cborRoundTrip(user, keySet) == user, "\(keySet)")
        }
        #expect(
            try keys(of: JSONEncoder().encode(user, keySet: .remote("v1"))) == [
                "user_name", "email_address", "user_age",
            ])

        // userInfo works as well as the convenience methods; the call's own choice wins.
        let decoder = JSONDecoder()
        decoder.userInfo[.keySet] = KeySetID.remote("v1")
        #expect(try decoder.decode(UserInfo.self, from: remote) == user)
        let local = try JSONEncoder().encode(user, keySet: .local(1))
        #expect(try decoder.decode(UserInfo.self, from: local, keySet: .local(1)) == user)
        #expect(throws: VariableCodingError.self) { try decoder.decode(UserInfo.self, from: local) }
    }

    @Test("Photo: nested objects as nested models and as a flat model, both ways")
    func photo() throws {
        let payload = json(
            """
            {"id": 7, "url": "https://example.com/7.jpg", "meta": {"width": 640, "height": 480},
             "photographer": {"id": 3, "name": "Ada"}}
            """)
        let nested = try JSONDecoder().decode(Photo.self, from: payload, keySet: .remote("v1"))
        #expect(
            nested
                == Photo(
                    id: 7, url: URL(string: "https://example.com/7.jpg")!, meta: Meta(width: 640, height: 480),
                    photographer: Photographer(id: 3, name: "Ada")))
        let flat = try JSONDecoder().decode(FlatPhoto.self, from: payload, keySet: .remote("v1"))
        #expect(
            flat
                == FlatPhoto(
                    id: 7, url: URL(string: "https://example.com/7.jpg")!, width: 640, height: 480,
                    photographerName: "Ada"))

        // The nested model follows the outer choice of key set: local keys all the way down.
        let stored = try CBORValue(decoding: CBOREncoder(userInfo: [.keySet: KeySetID.currentLocal]).encode(nested))
        #expect(stored["META"]?["W"] == .unsigned(640))
        #expect(try cborRoundTrip(nested, .currentLocal) == nested)

        // Encoding the flat model writes the nested shape back.
        let back = try JSONEncoder().encode(flat, keySet: .remote("v1"))
        let object = try JSONSerialization.jsonObject(with: back) as? [String: Any]
        #expect((object?["meta"] as? [String: Any])?["width"] as? Int == 640)
        #expect((object?["photographer"] as? [String: Any])?["name"] as? String == "Ada")
        #expect(try JSONDecoder().decode(FlatPhoto.self, from: back, keySet: .remote("v1")) == flat)
        let local = try CBORValue(decoding: CBOREncoder(userInfo: [.keySet: KeySetID.currentLocal]).encode(flat))
        #expect(local["size"]?["h"] == .unsigned(480))
        #expect(try cborRoundTrip(flat, .currentLocal) == flat)
    }

    @Test("two API versions with different key names decode into one type")
    func apiVersions() throws {
        let v1 = json(#"{"image_id": 1, "source_url": "https://example.com/a.png", "caption_text": "A"}"#)
        let v2 = json(#"{"id": 1, "src": "https://example.com/a.png"}"#)
        let fromV1 = try JSONDecoder().decode(Image.self, from: v1, keySet: .remote("v1"))
        let fromV2 = try JSONDecoder().decode(Image.self, from: v2, keySet: .remote("v2"))
        #expect(fromV1 == Image(id: 1, source: URL(string: "https://example.com/a.png")!, caption: "A"))
        #expect(fromV2 == Image(id: 1, source: URL(string: "https://example.com/a.png")!, caption: nil))
        // Encoding for v2 leaves out what v2 does not know; storage keeps it.
        #expect(try keys(of: JSONEncoder().encode(fromV1, keySet: .remote("v2"))) == ["id", "src"])
        #expect(try cborRoundTrip(fromV1, .currentLocal) == fromV1)
    }

    @Test("key sets are available as data for registries")
    func keyNamesAsData() throws {
        #expect(try Profile.keySets.keyNames(for: .local(1)) == ["name": "USER_NAME", "score": "SCORE"])
        #expect(
            try Profile.keySets.keyNames(for: .currentLocal) == [
                "name": "NAME", "score": "SCORE", "verified": "VERIFIED", "tags": "TAGS",
            ])
        #expect(try FlatPhoto.keySets.keyNames(for: .remote("v1"))["photographerName"] == "photographer.name")
        #expect(Profile.keySets.currentVersion == 3)
        #expect(Profile.keySets.localVersions == [1, 2, 3])
        #expect(Profile.keySets.remoteVersions == ["v1"])
    }
}

/// A model holding every kind of value Codable can: foundation types, collections, optionals,
/// nested models and enums, in a local and a remote key set.
struct Kitchen: VariablyCodable, Equatable {
    var id: UUID
    var created: Date
    var blob: Data
    var link: URL
    var counts: [String: Int]
    var matrix: [[Double]]
    var note: String?
    var status: Status
    var meta: Meta

    static let keySets = KeySets<Kitchen>(
        local: [
            1: [
                \.id: "i", \.created: "c", \.blob: "b", \.link: "l", \.counts: "n", \.matrix: "m", \.note: "o",
                \.status: "s", \.meta: "x",
            ]
        ],
        remote: [
            "v1": [
                \.id: "id", \.created: "created_at", \.blob: "blob", \.link: "link", \.counts: "counts",
                \.matrix: "matrix", \.note: "note", \.status: "state", \.meta: "meta",
            ]
        ]
    )
    init(
        id: UUID, created: Date, blob: Data, link: URL, counts: [String: Int], matrix: [[Double]], note: String?,
        status: Status, meta: Meta
    ) {
        (self.id, self.created, self.blob, self.link, self.counts, self.matrix, self.note, self.status, self.meta) =
            (id, created, blob, link, counts, matrix, note, status, meta)
    }
    init(from container: DecodingContainer<Kitchen>) throws {
        id = try container.decodeValue(for: \.id)
        created = try container.decodeValue(for: \.created)
        blob = try container.decodeValue(for: \.blob)
        link = try container.decodeValue(for: \.link)
        counts = try container.decodeValue(for: \.counts)
        matrix = try container.decodeValue(for: \.matrix)
        note = try container.decodeValueIfPresent(for: \.note)
        status = try container.decodeValue(for: \.status)
        meta = try container.decodeValue(for: \.meta)
    }
    func encode(to container: inout EncodingContainer<Kitchen>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(created, for: \.created)
        try container.encodeValue(blob, for: \.blob)
        try container.encodeValue(link, for: \.link)
        try container.encodeValue(counts, for: \.counts)
        try container.encodeValue(matrix, for: \.matrix)
        try container.encodeValueIfPresent(note, for: \.note)
        try container.encodeValue(status, for: \.status)
        try container.encodeValue(meta, for: \.meta)
    }
}

@Suite("Everything Codable can hold")
struct KitchenTests {
    @Test("foundation types, collections, optionals, enums and nested models round-trip in every key set and coder")
    func roundTrips() throws {
        for note in [nil, "salt"] as [String?] {
            let value = Kitchen(
                id: UUID(), created: Date(timeIntervalSince1970: 1_700_000_000), blob: Data([0, 1, 255]),
                link: URL(string: "https://example.com/k?q=1")!, counts: ["a": 1, "b": -2],
                matrix: [[1.5, -0.25], []],
                note: note, status: .suspended, meta: Meta(width: 3, height: 4)
            )
            for keySet: KeySetID in [.currentLocal, .remote("v1")] {
                for coder in Coder.allCases {
                    #expect(
                        try coder.decode(Kitchen.self, coder.encode(value, keySet), keySet) == value,
                        "\(keySet), \(coder)")
                }
            }
            // An absent optional writes no key; a present one does.
            let remote =
                try JSONSerialization.jsonObject(with: JSONEncoder().encode(value, keySet: .remote("v1")))
                as? [String: Any]
            #expect((remote?["note"] != nil) == (note != nil))
            #expect(remote?["state"] as? String == "BLOCKED")
        }
    }
}
