// The model the benchmarks use: 6 fields (strings and integers) in three local versions and one
// remote version whose key names equal the plain Codable `User` of codec-bench. Its coding code
// is written by the @VariablyCoded macro, generated scanning and emitting included.
public import VariableCoding
import VariableCodingMacros

@VariablyCoded
public struct Member: VariablyCodable, Identifiable, Sendable {
    public var id: Int64
    public var name: String
    public var email: String
    public var age: Int
    public var city: String
    public var followers: Int

    public static let keySets = KeySets<Member>(
        local: [
            1: [
                \.id: "ID", \.name: "USER_NAME", \.email: "EMAIL_ADDRESS", \.age: "USER_AGE", \.city: "CITY_NAME",
                \.followers: "FOLLOWER_COUNT",
            ],
            2: [
                \.id: "ID", \.name: "NAME", \.email: "EMAIL_ADDRESS", \.age: "AGE", \.city: "CITY_NAME",
                \.followers: "FOLLOWER_COUNT",
            ],
            3: [\.id: "I", \.name: "N", \.email: "E", \.age: "A", \.city: "C", \.followers: "F"],
        ],
        remote: [
            "v1": [
                \.id: "id", \.name: "name", \.email: "email", \.age: "age", \.city: "city", \.followers: "followers",
            ]
        ]
    )

    public init(id: Int64, name: String, email: String, age: Int, city: String, followers: Int) {
        (self.id, self.name, self.email, self.age, self.city, self.followers) = (id, name, email, age, city, followers)
    }
}

/// `Member` with its `init(from:)` and `encode(to:)` written by hand, as they were before the
/// macro: the same key sets, read and written by key path with no generated code. store-bench
/// measures it beside `Member` to show what the generated code saves.
public struct KeyPathMember: VariablyCodable, Identifiable, Sendable {
    public var id: Int64
    public var name: String
    public var email: String
    public var age: Int
    public var city: String
    public var followers: Int

    public static let keySets = KeySets<KeyPathMember>(
        local: [
            1: [
                \.id: "ID", \.name: "USER_NAME", \.email: "EMAIL_ADDRESS", \.age: "USER_AGE", \.city: "CITY_NAME",
                \.followers: "FOLLOWER_COUNT",
            ],
            2: [
                \.id: "ID", \.name: "NAME", \.email: "EMAIL_ADDRESS", \.age: "AGE", \.city: "CITY_NAME",
                \.followers: "FOLLOWER_COUNT",
            ],
            3: [\.id: "I", \.name: "N", \.email: "E", \.age: "A", \.city: "C", \.followers: "F"],
        ]
    )

    public init(_ member: Member) {
        (id, name, email, age, city, followers) = (
            member.id, member.name, member.email, member.age, member.city, member.followers
        )
    }

    public init(from container: DecodingContainer<KeyPathMember>) throws {
        id = try container.decodeValue(for: \.id)
        name = try container.decodeValue(for: \.name)
        email = try container.decodeValue(for: \.email)
        age = try container.decodeValue(for: \.age)
        city = try container.decodeValue(for: \.city)
        followers = try container.decodeValue(for: \.followers)
    }

    public func encode(to container: inout EncodingContainer<KeyPathMember>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(name, for: \.name)
        try container.encodeValue(email, for: \.email)
        try container.encodeValue(age, for: \.age)
        try container.encodeValue(city, for: \.city)
        try container.encodeValue(followers, for: \.followers)
    }
}
