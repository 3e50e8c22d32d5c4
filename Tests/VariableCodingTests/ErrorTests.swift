import CBOR
import Foundation
import Testing
import VariableCoding

/// Expects `body` to throw a VariableCodingError whose description contains every fragment.
func expectError(_ fragments: [String], sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void) {
    do {
        try body()
        Issue.record("no error; expected one mentioning \(fragments)", sourceLocation: sourceLocation)
    } catch let error as VariableCodingError {
        for fragment in fragments {
            #expect("\(error)".contains(fragment), "'\(error)' lacks '\(fragment)'", sourceLocation: sourceLocation)
        }
    } catch {
        Issue.record("expected a VariableCodingError, got \(error)", sourceLocation: sourceLocation)
    }
}

// Models with mistakes in their key sets.

struct TwoPropertiesOneKey: VariablyCodable {
    var a: Int
    var b: Int
    static let keySets = KeySets<TwoPropertiesOneKey>(local: [1: [\.a: "x", \.b: "x"]])
    init(from container: DecodingContainer<Self>) throws { a = 0; b = 0 }
    func encode(to container: inout EncodingContainer<Self>) throws {}
}

struct StorageLacksRemoteProperty: VariablyCodable {
    var a: Int
    var b: Int
    static let keySets = KeySets<StorageLacksRemoteProperty>(
        local: [1: [\.a: "a"]], remote: ["v1": [\.a: "a", \.b: "b"]])
    init(from container: DecodingContainer<Self>) throws { a = 0; b = 0 }
    func encode(to container: inout EncodingContainer<Self>) throws {}
}

struct UnknownCurrentVersion: VariablyCodable {
    var a: Int
    static let keySets = KeySets<UnknownCurrentVersion>(current: 4, local: [1: [\.a: "a"], 2: [\.a: "A"]])
    init(a: Int) { self.a = a }
    init(from container: DecodingContainer<Self>) throws { a = 0 }
    func encode(to container: inout EncodingContainer<Self>) throws {}
}

struct ValueAndObject: VariablyCodable {
    var a: Int
    var b: Int
    static let keySets = KeySets<ValueAndObject>(local: [1: [\.a: "meta", \.b: "meta.b"]])
    init(from container: DecodingContainer<Self>) throws { a = 0; b = 0 }
    func encode(to container: inout EncodingContainer<Self>) throws {}
}

struct WritesUnkeyedProperty: VariablyCodable {
    var a: Int
    var secret: Int
    static let keySets = KeySets<WritesUnkeyedProperty>(local: [1: [\.a: "a"]], remote: ["v1": [\.a: "a"]])
    init(a: Int, secret: Int) { (self.a, self.secret) = (a, secret) }
    init(from container: DecodingContainer<Self>) throws { a = try container.decodeValue(for: \.a); secret = 0 }
    func encode(to container: inout EncodingContainer<Self>) throws {
        try container.encodeValue(a, for: \.a)
        try container.encodeValue(secret, for: \.secret)
    }
}

/// One property per policy, to check missing, null and wrong type under each.
struct Policies: VariablyCodable, Equatable {
    var required: Int
    var withDefault: Int
    var optional: Int?
    var presence: String
    static let keySets = KeySets<Policies>(local: [1: [\.required: "r", \.withDefault: "d", \.optional: "o"]])
    init(required: Int, withDefault: Int, optional: Int?, presence: String) {
        (self.required, self.withDefault, self.optional, self.presence) = (required, withDefault, optional, presence)
    }
    init(from container: DecodingContainer<Self>) throws {
        required = try container.decodeValue(for: \.required)
        withDefault = try container.decodeValue(for: \.withDefault, default: -1)
        optional = try container.decodeValueIfPresent(for: \.optional)
        switch try container.presence(of: Int.self, forProperty: \.optional) {
        case .missing: presence = "missing"
        case .null: presence = "null"
        case .value(let value): presence = "value \(value)"
        }
    }
    func encode(to container: inout EncodingContainer<Self>) throws {}
}

@Suite("Validation and decoding errors")
struct ErrorTests {
    @Test("declaration mistakes are reported at first use, naming type, key set and property")
    func validation() {
        expectError(["TwoPropertiesOneKey", "local(1)", "'a'", "'b'", "'x'"]) {
            _ = try JSONDecoder().decode(TwoPropertiesOneKey.self, from: json("{}"))
        }
        expectError(["StorageLacksRemoteProperty", "local(1)", "property 'b'", "remote(v1)"]) {
            _ = try JSONDecoder().decode(StorageLacksRemoteProperty.self, from: json("{}"), keySet: .remote("v1"))
        }
        expectError(["UnknownCurrentVersion", "current local version 4 is not declared", "1, 2"]) {
            _ = try JSONEncoder().encode(UnknownCurrentVersion(a: 1))
        }
        expectError(["ValueAndObject", "'meta'", "'meta.b'"]) {
            _ = try JSONDecoder().decode(ValueAndObject.self, from: json("{}"))
        }
        expectError(["UserInfo has no key set remote(v7)", "local(1)", "remote(v1)"]) {
            _ = try JSONDecoder().decode(UserInfo.self, from: json("{}"), keySet: .remote("v7"))
        }
    }

    @Test("a property encode(to:) writes without a key: an error for storage, left out for a remote API")
    func propertyWithoutKey() throws {
        let value = WritesUnkeyedProperty(a: 1, secret: 2)
        expectError(["WritesUnkeyedProperty", "local(1)", "property 'secret'"]) { _ = try JSONEncoder().encode(value) }
        #expect(try keys(of: JSONEncoder().encode(value, keySet: .remote("v1"))) == ["a"])
    }

    @Test("decoding errors name type, key set, property, key and coding path")
    func decodingErrors() {
        expectError(["UserInfo (key set remote(v1))", "property 'age'", "key 'user_age'", "is missing"]) {
            _ = try JSONDecoder().decode(
                UserInfo.self, from: json(#"{"user_name": "a", "email_address": "b"}"#), keySet: .remote("v1"))
        }
        expectError(["UserInfo (key set local(1))", "property 'age'", "key 'AGE'", "expected Int"]) {
            _ = try JSONDecoder().decode(
                UserInfo.self, from: json(#"{"USER_NAME": "a", "EMAIL": "b", "AGE": "old"}"#), keySet: .local(1))
        }
        expectError(["property 'email'", "key 'EMAIL'", "null"]) {
            _ = try JSONDecoder().decode(
                UserInfo.self, from: json(#"{"USER_NAME": "a", "EMAIL": null, "AGE": 1}"#), keySet: .local(1))
        }
        // Inside a nested model the path leads there.
        expectError(["Meta (key set remote(v1))", "property 'height'", "meta.height"]) {
            _ = try JSONDecoder().decode(
                Photo.self,
                from: json(
                    """
                    {"id": 1, "url": "https://e.com", "meta": {"width": 1}, "photographer": {"id": 1, "name": "a"}}
                    """), keySet: .remote("v1"))
        }
        // A flat model reading a nested payload names the dotted key.
        expectError(["FlatPhoto", "property 'height'", "key 'meta.height'"]) {
            _ = try JSONDecoder().decode(
                FlatPhoto.self,
                from: json(
                    """
                    {"id": 1, "url": "https://e.com", "meta": {"width": 1}, "photographer": {"name": "a"}}
                    """), keySet: .remote("v1"))
        }
    }

    @Test("missing, null and wrong type under each policy")
    func policies() throws {
        func decode(_ text: String) throws -> Policies { try JSONDecoder().decode(Policies.self, from: json(text)) }
        // Everything present.
        #expect(
            try decode(#"{"r": 1, "d": 2, "o": 3}"#)
                == Policies(required: 1, withDefault: 2, optional: 3, presence: "value 3"))
        // Missing: required fails, default applies, optional is nil (presence says missing).
        expectError(["property 'required'", "key 'r' is missing"]) { _ = try decode(#"{"d": 2}"#) }
        #expect(try decode(#"{"r": 1}"#) == Policies(required: 1, withDefault: -1, optional: nil, presence: "missing"))
        // Null: required fails, the default does not hide it, optional is nil (presence says null).
        expectError(["property 'required'", "null"]) { _ = try decode(#"{"r": null}"#) }
        expectError(["property 'withDefault'", "null"]) { _ = try decode(#"{"r": 1, "d": null}"#) }
        #expect(
            try decode(#"{"r": 1, "o": null}"#)
                == Policies(required: 1, withDefault: -1, optional: nil, presence: "null"))
        // Wrong type: an error under every policy.
        expectError(["property 'required'", "expected Int"]) { _ = try decode(#"{"r": "x"}"#) }
        expectError(["property 'withDefault'", "expected Int"]) { _ = try decode(#"{"r": 1, "d": "x"}"#) }
        expectError(["property 'optional'", "expected Int"]) { _ = try decode(#"{"r": 1, "o": "x"}"#) }
    }

    @Test("lossless widening only")
    func widening() throws {
        struct Numbers: VariablyCodable {
            var real: Double
            var small: Float
            static let keySets = KeySets<Numbers>(local: [1: [\.real: "real", \.small: "small"]])
            init(from container: DecodingContainer<Numbers>) throws {
                real = try container.decodeValue(for: \.real)
                small = try container.decodeValue(for: \.small)
            }
            func encode(to container: inout EncodingContainer<Numbers>) throws {}
        }
        // A property list stores integers as integers: they widen into Double and Float.
        let plist = try PropertyListSerialization.data(
            fromPropertyList: ["real": 7, "small": 3], format: .binary, options: 0)
        let numbers = try PropertyListDecoder().decode(Numbers.self, from: plist)
        #expect(numbers.real == 7 && numbers.small == 3)
        // A string never turns into a number.
        let text = try PropertyListSerialization.data(
            fromPropertyList: ["real": "7", "small": 3], format: .binary, options: 0)
        expectError(["property 'real'", "expected Double"]) {
            _ = try PropertyListDecoder().decode(Numbers.self, from: text)
        }
    }
}

@Suite("Enums")
struct EnumTests {
    @Test("aliases per key set, canonical raw values everywhere, unknown values by policy")
    func aliases() throws {
        let remote = try JSONDecoder().decode(
            Account.self, from: json(#"{"state": "BLOCKED", "channel": "sms"}"#), keySet: .remote("v1"))
        #expect(remote == Account(status: .suspended, channel: .sms))
        // Canonical raw values are accepted in any key set.
        #expect(
            try JSONDecoder().decode(
                Account.self, from: json(#"{"state": "suspended", "channel": "sms"}"#), keySet: .remote("v1")
            ).status == .suspended)
        // An alias of another key set is not this key set's: it is unknown here.
        #expect(
            try JSONDecoder().decode(
                Account.self, from: json(#"{"status": "BLOCKED", "channel": "sms"}"#), keySet: .local(1)
            ).status == .unknown)
        // Local version 1 stored "paused".
        #expect(
            try JSONDecoder().decode(
                Account.self, from: json(#"{"status": "paused", "channel": "email"}"#), keySet: .local(1)
            ).status == .suspended)

        // One unknown case does not fail the record: it becomes the declared fallback, or keeps its raw value.
        let unknown = try JSONDecoder().decode(
            Account.self, from: json(#"{"state": "ARCHIVED", "channel": "pigeon"}"#), keySet: .remote("v1"))
        #expect(unknown == Account(status: .unknown, channel: .other("pigeon")))

        // Encoding writes the key set's alias.
        let encoded =
            try JSONSerialization.jsonObject(with: JSONEncoder().encode(remote, keySet: .remote("v1")))
            as? [String: String]
        #expect(encoded == ["state": "BLOCKED", "channel": "sms"])
        #expect(try cborRoundTrip(unknown, .currentLocal) == unknown)
        #expect(try cborRoundTrip(remote, .local(1)) == remote)
    }

    @Test("an enum without a fallback reports the unknown raw value")
    func strict() throws {
        struct Holder: Decodable { var value: StrictStatus }
        #expect(try JSONDecoder().decode(Holder.self, from: json(#"{"value": "on"}"#)).value == .on)
        #expect {
            try JSONDecoder().decode(Holder.self, from: json(#"{"value": "dimmed"}"#))
        } throws: { error in
            "\(error)".contains("'dimmed' is not a raw value of StrictStatus")
        }
    }
}
