import CBOR
import Foundation
import TestSupport
import Testing
import VariableCoding

/// The coders a record may have been written with.
enum Coder: CaseIterable {
    case json, propertyList, cbor

    func encode<T: Encodable>(_ value: T, _ keySet: KeySetID) throws -> Data {
        switch self {
        case .json: try JSONEncoder().encode(value, keySet: keySet)
        case .propertyList: try PropertyListEncoder().encode(value, keySet: keySet)
        case .cbor: Data(try CBOREncoder(userInfo: [.keySet: keySet]).encode(value))
        }
    }

    func decode<T: Decodable>(_ type: T.Type, _ data: Data, _ keySet: KeySetID) throws -> T {
        switch self {
        case .json: try JSONDecoder().decode(type, from: data, keySet: keySet)
        case .propertyList: try PropertyListDecoder().decode(type, from: data, keySet: keySet)
        case .cbor: try CBORDecoder(userInfo: [.keySet: keySet]).decode(type, from: data)
        }
    }
}

@Suite("Migration on read")
struct MigrationTests {
    static func randomProfile(_ rng: inout SeededGenerator) -> Profile {
        let names = ["ada", "Grace Hopper", "", "李", "🦊 fox", String(repeating: "n", count: 40)]
        return Profile(
            name: names.randomElement(using: &rng)!,
            score: Int.random(in: -1_000_000...1_000_000, using: &rng),
            verified: Bool.random(using: &rng),
            tags: (0..<Int.random(in: 0...3, using: &rng)).map { _ in names.randomElement(using: &rng)! }
        )
    }

    /// Records written by the old app versions (their own code) decode under today's code, for
    /// every writer version and every coder.
    @Test("records written by every earlier version's code decode under the current code")
    func oldWriters() throws {
        let seed = SeededGenerator.seedFromEnvironment()
        var rng = SeededGenerator(seed: seed)
        for _ in 0..<100 {
            let value = Self.randomProfile(&rng)
            let writers: [(version: Int, encode: (Coder) throws -> Data)] = [
                (
                    1,
                    {
                        try $0.encode(
                            ProfileV1(name: value.name, nickname: "nick", score: String(value.score)), .local(1))
                    }
                ),
                (
                    2,
                    {
                        try $0.encode(
                            ProfileV2(
                                name: value.name, nickname: "nick", score: String(value.score), verified: value.verified
                            ), .local(2))
                    }
                ),
                (3, { try $0.encode(value, .local(3)) }),
            ]
            for writer in writers {
                for coder in Coder.allCases {
                    let data = try writer.encode(coder)
                    let read = try coder.decode(Profile.self, data, .local(writer.version))
                    #expect(read == value.projected(to: writer.version), "seed \(seed), v\(writer.version), \(coder)")
                }
            }
        }
    }

    /// The matrix over (version written, version rewritten): a value written with version w's
    /// key set, read back, rewritten with version r's key set and read again holds what the
    /// lesser of the two versions can hold. Generated over every pair, every coder, random values.
    @Test("every pair of versions, every coder, randomized values")
    func versionPairMatrix() throws {
        let seed = SeededGenerator.seedFromEnvironment()
        var rng = SeededGenerator(seed: seed)
        let versions = Profile.keySets.localVersions
        #expect(versions == [1, 2, 3])
        for _ in 0..<50 {
            let value = Self.randomProfile(&rng)
            for written in versions {
                for rewritten in versions {
                    for coder in Coder.allCases {
                        let first = try coder.decode(
                            Profile.self, try coder.encode(value, .local(written)), .local(written))
                        #expect(
                            first == value.projected(to: written), "seed \(seed), \(written)→\(rewritten), \(coder)")
                        let second = try coder.decode(
                            Profile.self, try coder.encode(first, .local(rewritten)), .local(rewritten))
                        #expect(
                            second == value.projected(to: min(written, rewritten)),
                            "seed \(seed), \(written)→\(rewritten), \(coder)")
                    }
                }
            }
        }
    }

    @Test("a renamed key needs no code: the key path keeps its identity across versions")
    func renames() throws {
        let v1 = json(#"{"USER_NAME": "ada", "SCORE": "7", "NICK": "a"}"#)
        let v2 = json(#"{"NAME": "ada", "SCORE": "7", "NICK": "a", "VERIFIED": true}"#)
        #expect(
            try JSONDecoder().decode(Profile.self, from: v1, keySet: .local(1))
                == Profile(name: "ada", score: 7, verified: false, tags: []))
        #expect(
            try JSONDecoder().decode(Profile.self, from: v2, keySet: .local(2))
                == Profile(name: "ada", score: 7, verified: true, tags: []))
        // The old key set writes the old names.
        #expect(
            try keys(
                of: JSONEncoder().encode(Profile(name: "x", score: 1, verified: true, tags: ["t"]), keySet: .local(1)))
                == ["USER_NAME", "SCORE"])
    }

    @Test("a nested model decodes with its highest version not above the outer one")
    func nestedVersions() throws {
        // Photo and Meta only have version 1: a request for version 5 of the outer type is unknown…
        #expect(throws: VariableCodingError.self) {
            try JSONDecoder().decode(Photo.self, from: json("{}"), keySet: .remote("v9"))
        }
        // …but local versions resolve downwards, as for a nested type that did not change.
        let photo = Photo(
            id: 1, url: URL(string: "https://e.com")!, meta: Meta(width: 1, height: 2),
            photographer: Photographer(id: 1, name: "a"))
        let data = try JSONEncoder().encode(photo, keySet: .local(1))
        #expect(try JSONDecoder().decode(Photo.self, from: data, keySet: .local(5)) == photo)
    }
}
