import Foundation
import VariableCoding

/// The classic example: one type, a local key set for storage and a remote one for the API.
struct UserInfo: VariablyCodable, Equatable {
    var userName: String
    var email: String
    var age: Int

    static let keySets = KeySets<UserInfo>(
        local: [1: [\.userName: "USER_NAME", \.email: "EMAIL", \.age: "AGE"]],
        remote: ["v1": [\.userName: "user_name", \.email: "email_address", \.age: "user_age"]]
    )

    init(userName: String, email: String, age: Int) {
        (self.userName, self.email, self.age) = (userName, email, age)
    }

    init(from container: DecodingContainer<UserInfo>) throws {
        userName = try container.decodeValue(for: \.userName)
        email = try container.decodeValue(for: \.email)
        age = try container.decodeValue(for: \.age)
    }

    func encode(to container: inout EncodingContainer<UserInfo>) throws {
        try container.encodeValue(userName, for: \.userName)
        try container.encodeValue(email, for: \.email)
        try container.encodeValue(age, for: \.age)
    }
}

// MARK: - Photos: nested objects as nested models, or as a flat model

struct Meta: VariablyCodable, Equatable {
    var width: Int
    var height: Int
    static let keySets = KeySets<Meta>(
        local: [1: [\.width: "W", \.height: "H"]],
        remote: ["v1": [\.width: "width", \.height: "height"]]
    )
    init(width: Int, height: Int) { (self.width, self.height) = (width, height) }
    init(from container: DecodingContainer<Meta>) throws {
        width = try container.decodeValue(for: \.width)
        height = try container.decodeValue(for: \.height)
    }
    func encode(to container: inout EncodingContainer<Meta>) throws {
        try container.encodeValue(width, for: \.width)
        try container.encodeValue(height, for: \.height)
    }
}

/// A plain Codable value inside a variably coded one.
struct Photographer: Codable, Equatable {
    var id: Int
    var name: String
}

struct Photo: VariablyCodable, Equatable {
    var id: Int
    var url: URL
    var meta: Meta
    var photographer: Photographer

    static let keySets = KeySets<Photo>(
        local: [1: [\.id: "ID", \.url: "URL", \.meta: "META", \.photographer: "BY"]],
        remote: ["v1": [\.id: "id", \.url: "url", \.meta: "meta", \.photographer: "photographer"]]
    )
    init(id: Int, url: URL, meta: Meta, photographer: Photographer) {
        (self.id, self.url, self.meta, self.photographer) = (id, url, meta, photographer)
    }
    init(from container: DecodingContainer<Photo>) throws {
        id = try container.decodeValue(for: \.id)
        url = try container.decodeValue(for: \.url)
        meta = try container.decodeValue(for: \.meta)
        photographer = try container.decodeValue(for: \.photographer)
    }
    func encode(to container: inout EncodingContainer<Photo>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(url, for: \.url)
        try container.encodeValue(meta, for: \.meta)
        try container.encodeValue(photographer, for: \.photographer)
    }
}

/// The same payload read into a flat model: dotted key names reach into the nested objects.
struct FlatPhoto: VariablyCodable, Equatable {
    var id: Int
    var url: URL
    var width: Int
    var height: Int
    var photographerName: String

    static let keySets = KeySets<FlatPhoto>(
        local: [1: [\.id: "id", \.url: "url", \.width: "size.w", \.height: "size.h", \.photographerName: "by"]],
        remote: [
            "v1": [
                \.id: "id", \.url: "url", \.width: "meta.width", \.height: "meta.height",
                \.photographerName: "photographer.name",
            ]
        ]
    )
    init(id: Int, url: URL, width: Int, height: Int, photographerName: String) {
        (self.id, self.url, self.width, self.height, self.photographerName) = (id, url, width, height, photographerName)
    }
    init(from container: DecodingContainer<FlatPhoto>) throws {
        id = try container.decodeValue(for: \.id)
        url = try container.decodeValue(for: \.url)
        width = try container.decodeValue(for: \.width)
        height = try container.decodeValue(for: \.height)
        photographerName = try container.decodeValue(for: \.photographerName)
    }
    func encode(to container: inout EncodingContainer<FlatPhoto>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(url, for: \.url)
        try container.encodeValue(width, for: \.width)
        try container.encodeValue(height, for: \.height)
        try container.encodeValue(photographerName, for: \.photographerName)
    }
}

// MARK: - Two API versions of one object

struct Image: VariablyCodable, Equatable {
    var id: Int
    var source: URL
    var caption: String?

    static let keySets = KeySets<Image>(
        local: [1: [\.id: "id", \.source: "source", \.caption: "caption"]],
        remote: [
            "v1": [\.id: "image_id", \.source: "source_url", \.caption: "caption_text"],
            "v2": [\.id: "id", \.source: "src"],
        ]
    )
    init(id: Int, source: URL, caption: String?) { (self.id, self.source, self.caption) = (id, source, caption) }
    init(from container: DecodingContainer<Image>) throws {
        id = try container.decodeValue(for: \.id)
        source = try container.decodeValue(for: \.source)
        caption = try container.decodeValueIfPresent(for: \.caption)
    }
    func encode(to container: inout EncodingContainer<Image>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(source, for: \.source)
        try container.encodeValueIfPresent(caption, for: \.caption)
    }
}

// MARK: - A model evolved through three local versions

/// Version 1 stored USER_NAME, NICK and SCORE (a string). Version 2 renamed USER_NAME to NAME and
/// added VERIFIED. Version 3 removed NICK, made SCORE an integer and added TAGS.
struct Profile: VariablyCodable, Equatable {
    var name: String
    var score: Int
    var verified: Bool
    var tags: [String]

    static let keySets = KeySets<Profile>(
        local: [
            1: [\.name: "USER_NAME", \.score: "SCORE"],
            2: [\.name: "NAME", \.score: "SCORE", \.verified: "VERIFIED"],
            3: [\.name: "NAME", \.score: "SCORE", \.verified: "VERIFIED", \.tags: "TAGS"],
        ],
        remote: ["v1": [\.name: "name", \.score: "score", \.verified: "is_verified"]]
    )

    init(name: String, score: Int, verified: Bool, tags: [String]) {
        (self.name, self.score, self.verified, self.tags) = (name, score, verified, tags)
    }

    init(from container: DecodingContainer<Profile>) throws {
        name = try container.decodeValue(for: \.name)
        if let version = container.localVersion, version < 3 {
            // Until version 3 the score was a string.
            score = Int(try container.decodeValue(String.self, forProperty: \.score)) ?? 0
        } else {
            score = try container.decodeValue(for: \.score)
        }
        verified = try container.decodeValue(for: \.verified, default: false)
        tags = try container.decodeValue(for: \.tags, default: [])
    }

    func encode(to container: inout EncodingContainer<Profile>) throws {
        try container.encodeValue(name, for: \.name)
        if let version = container.localVersion, version < 3 {
            try container.encodeValue(String(score), forProperty: \.score)
        } else {
            try container.encodeValue(score, for: \.score)
        }
        try container.encodeValue(verified, for: \.verified)
        try container.encodeValue(tags, for: \.tags)
    }

    /// What a record of `version` can hold of this value.
    func projected(to version: Int) -> Profile {
        Profile(name: name, score: score, verified: version >= 2 ? verified : false, tags: version >= 3 ? tags : [])
    }
}

/// The code that wrote version 1 (an older app), kept to produce its records.
struct ProfileV1: Codable {
    var name: String
    var nickname: String
    var score: String
    enum CodingKeys: String, CodingKey { case name = "USER_NAME", nickname = "NICK", score = "SCORE" }
}

/// The code that wrote version 2.
struct ProfileV2: Codable {
    var name: String
    var nickname: String
    var score: String
    var verified: Bool
    enum CodingKeys: String, CodingKey { case name = "NAME", nickname = "NICK", score = "SCORE", verified = "VERIFIED" }
}

// MARK: - Enums

enum Status: String, VariableEnum {
    case active, suspended, unknown
    static let aliases: [KeySetID: [Status: String]] = [
        .remote("v1"): [.active: "ACTIVE", .suspended: "BLOCKED"],
        .local(1): [.suspended: "paused"],
    ]
    static let unknownCase: Status? = .unknown
}

enum StrictStatus: String, VariableEnum {
    case on, off
}

/// Keeps an unknown raw value instead of replacing it.
enum Channel: VariableEnum {
    case email, sms, other(String)
    init?(rawValue: String) {
        switch rawValue {
        case "email": self = .email
        case "sms": self = .sms
        default: self = .other(rawValue)
        }
    }
    var rawValue: String {
        switch self {
        case .email: "email"
        case .sms: "sms"
        case .other(let raw): raw
        }
    }
}

struct Account: VariablyCodable, Equatable {
    var status: Status
    var channel: Channel
    static let keySets = KeySets<Account>(
        local: [1: [\.status: "status", \.channel: "channel"]],
        remote: ["v1": [\.status: "state", \.channel: "channel"]]
    )
    init(status: Status, channel: Channel) { (self.status, self.channel) = (status, channel) }
    init(from container: DecodingContainer<Account>) throws {
        status = try container.decodeValue(for: \.status)
        channel = try container.decodeValue(for: \.channel)
    }
    func encode(to container: inout EncodingContainer<Account>) throws {
        try container.encodeValue(status, for: \.status)
        try container.encodeValue(channel, for: \.channel)
    }
}
