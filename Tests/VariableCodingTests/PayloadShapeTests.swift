import CBOR
import Foundation
import Testing
import VariableCoding

/// A URL without a scheme from the API, fixed on the way in; a colour kept as text, exposed typed.
struct Media: VariablyCodable, Equatable {
    var url: URL
    var colorHex: String

    /// The colour as numbers, computed from the stored text.
    var color: (red: UInt8, green: UInt8, blue: UInt8)? {
        let digits = colorHex.hasPrefix("#") ? colorHex.dropFirst() : Substring(colorHex)
        guard digits.count == 6, let value = UInt32(digits, radix: 16) else { return nil }
        return (UInt8(value >> 16), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF))
    }

    static let keySets = KeySets<Media>(
        local: [1: [\.url: "url", \.colorHex: "color"]],
        remote: ["v1": [\.url: "image", \.colorHex: "dominant_color"]],
        transforms: ["v1": [\.url: .schemeRelativeURL()]]
    )

    init(url: URL, colorHex: String) { (self.url, self.colorHex) = (url, colorHex) }
    init(from container: DecodingContainer<Media>) throws {
        url = try container.decodeValue(for: \.url)
        colorHex = try container.decodeValue(for: \.colorHex)
    }
    func encode(to container: inout EncodingContainer<Media>) throws {
        try container.encodeValue(url, for: \.url)
        try container.encodeValue(colorHex, for: \.colorHex)
    }
}

struct AlbumPhoto: VariablyCodable, Equatable {
    var id: Int
    var title: String
    static let keySets = KeySets<AlbumPhoto>(
        local: [1: [\.id: "id", \.title: "title"]],
        remote: ["v1": [\.id: "id", \.title: "title"]]
    )
    init(id: Int, title: String) { (self.id, self.title) = (id, title) }
    init(from container: DecodingContainer<AlbumPhoto>) throws {
        id = try container.decodeValue(for: \.id)
        title = try container.decodeValue(for: \.title)
    }
    func encode(to container: inout EncodingContainer<AlbumPhoto>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(title, for: \.title)
    }
}

/// An album whose API sends its photos as an object keyed by id; which policy it uses is the
/// caller's choice (`Policy`).
struct Album<Policy: AlbumPolicy>: VariablyCodable, Equatable {
    var name: String
    var photos: [AlbumPhoto]
    /// The keys of the photos that did not decode (not stored).
    var skipped: [String] = []

    static var keySets: KeySets<Album<Policy>> {
        KeySets<Album<Policy>>(
            local: [1: [\.name: "name", \.photos: "photos"]],
            remote: ["v1": [\.name: "album_name", \.photos: "photos"]]
        )
    }

    init(name: String, photos: [AlbumPhoto]) { (self.name, self.photos) = (name, photos) }
    init(from container: DecodingContainer<Album>) throws {
        name = try container.decodeValue(for: \.name)
        let list = try container.decodeList(
            AlbumPhoto.self, forProperty: \.photos, policy: Policy.policy, orderedBy: { $0.id < $1.id })
        photos = list.elements
        skipped = list.failures.map(\.key)
    }
    func encode(to container: inout EncodingContainer<Album>) throws {
        try container.encodeValue(name, for: \.name)
        try container.encodeValue(photos, for: \.photos)
    }
    static func == (a: Album, b: Album) -> Bool { a.name == b.name && a.photos == b.photos }
}

protocol AlbumPolicy { static var policy: ListPolicy { get } }
enum Lossy: AlbumPolicy { static let policy = ListPolicy.lossy }
enum Strict: AlbumPolicy { static let policy = ListPolicy.strict }

/// An API that wraps its object: {"content": {...}}.
struct Article: VariablyCodable, Equatable {
    var id: Int
    var title: String
    static let keySets = KeySets<Article>(
        local: [1: [\.id: "id", \.title: "title"]],
        remote: ["v1": [\.id: "id", \.title: "headline"], "v2": [\.id: "id", \.title: "title"]],
        wrappers: ["v1": "content", "v2": "data.article"]
    )
    init(id: Int, title: String) { (self.id, self.title) = (id, title) }
    init(from container: DecodingContainer<Article>) throws {
        id = try container.decodeValue(for: \.id)
        title = try container.decodeValue(for: \.title)
    }
    func encode(to container: inout EncodingContainer<Article>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(title, for: \.title)
    }
}

@Suite("Real-world payload shapes")
struct PayloadShapeTests {
    @Test("a transform fixes values from the API; storage keeps the fixed value")
    func transforms() throws {
        let payload = json(##"{"image": "//api.example.com/v1/a.jpg", "dominant_color": "#ff8000"}"##)
        let media = try JSONDecoder().decode(Media.self, from: payload, keySet: .remote("v1"))
        #expect(media.url == URL(string: "https://api.example.com/v1/a.jpg"))
        #expect(media.color.map { [$0.red, $0.green, $0.blue] } == [255, 128, 0])
        // Locally the fixed URL is stored and read back as it is.
        #expect(try cborRoundTrip(media, .currentLocal) == media)
        let stored = try CBORValue(decoding: CBOREncoder(userInfo: [.keySet: KeySetID.currentLocal]).encode(media))
        #expect(stored["url"] == .tagged(32, .text("https://api.example.com/v1/a.jpg")))
        // A URL that already has a scheme passes unchanged; a value the transform refuses is an error for the property.
        let full = json(##"{"image": "http://x.org/b.png", "dominant_color": "#000000"}"##)
        #expect(
            try JSONDecoder().decode(Media.self, from: full, keySet: .remote("v1")).url
                == URL(string: "http://x.org/b.png"))
        expectError(["Media", "property 'url'", "key 'image'"]) {
            _ = try JSONDecoder().decode(
                Media.self, from: json(##"{"image": 5, "dominant_color": "#000000"}"##), keySet: .remote("v1"))
        }
    }

    @Test("an object keyed by id decodes into an ordered list; lossy reports the broken element, strict fails on it")
    func dictionaryAsList() throws {
        let payload = json(
            """
            {"album_name": "Trip", "photos": {
                "17": {"id": 17, "title": "Lake"},
                "4": {"id": 4, "title": "Road"},
                "9": {"id": 9, "title": 12},
                "120": {"id": 120, "title": "Peak"}}}
            """)
        let lossy = try JSONDecoder().decode(Album<Lossy>.self, from: payload, keySet: .remote("v1"))
        #expect(lossy.photos.map(\.id) == [4, 17, 120])
        #expect(lossy.skipped == ["9"])
        expectError(["Album", "property 'photos'", "element '9'"]) {
            _ = try JSONDecoder().decode(Album<Strict>.self, from: payload, keySet: .remote("v1"))
        }
        // Without the broken element, strict decodes everything.
        let clean = json(
            #"{"album_name": "Trip", "photos": {"2": {"id": 2, "title": "A"}, "1": {"id": 1, "title": "B"}}}"#)
        #expect(
            try JSONDecoder().decode(Album<Strict>.self, from: clean, keySet: .remote("v1")).photos.map(\.id) == [1, 2])
        // An array is a list too, and storage keeps an array.
        let array = json(
            #"{"album_name": "Trip", "photos": [{"id": 3, "title": "C"}, {"id": "x"}, {"id": 1, "title": "A"}]}"#)
        let fromArray = try JSONDecoder().decode(Album<Lossy>.self, from: array, keySet: .remote("v1"))
        #expect(fromArray.photos.map(\.id) == [1, 3])
        #expect(fromArray.skipped == ["1"])
        #expect(try cborRoundTrip(lossy, .currentLocal) == lossy)
        let plist = try PropertyListEncoder().encode(lossy, keySet: .currentLocal)
        #expect(
            try PropertyListDecoder().decode(Album<Strict>.self, from: plist, keySet: .currentLocal).photos
                == lossy.photos)
        // A missing list is an empty one.
        #expect(
            try JSONDecoder().decode(Album<Strict>.self, from: json(#"{"album_name": "E"}"#), keySet: .remote("v1"))
                .photos == [])
    }

    @Test("a wrapped object decodes with a key set whose root says where it is, and is wrapped again on encoding")
    func wrappers() throws {
        let v1 = json(#"{"content": {"id": 1, "headline": "Hello"}, "meta": {"page": 1}}"#)
        let v2 = json(#"{"data": {"article": {"id": 1, "title": "Hello"}}}"#)
        let article = Article(id: 1, title: "Hello")
        #expect(try JSONDecoder().decode(Article.self, from: v1, keySet: .remote("v1")) == article)
        #expect(try JSONDecoder().decode(Article.self, from: v2, keySet: .remote("v2")) == article)
        let back =
            try JSONSerialization.jsonObject(with: JSONEncoder().encode(article, keySet: .remote("v2")))
            as? [String: Any]
        #expect(((back?["data"] as? [String: Any])?["article"] as? [String: Any])?["title"] as? String == "Hello")
        #expect(try cborRoundTrip(article, .currentLocal) == article)
        expectError(["Article", "(wrapper)", "no 'content' object"]) {
            _ = try JSONDecoder().decode(
                Article.self, from: json(#"{"id": 1, "headline": "x"}"#), keySet: .remote("v1"))
        }
    }
}
