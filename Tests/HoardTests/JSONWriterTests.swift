import CBOR
import Foundation
import Testing

@testable import HoardCLI

#if canImport(Glibc)
import Glibc
#endif

// The byte writer behind every JSON line `hoard` prints, checked against independent references:
// the C library's calendar, Foundation's base64 and JSON parser.
@Suite("hoard's JSON writer")
struct JSONWriterTests {
    @Test("ISO 8601 times match gmtime_r for 100,000 random instants from year 1 to 9999, and the edges")
    func iso8601MatchesTheCLibrary() {
        var rng = SystemRandomNumberGenerator()
        let lowest: Int64 = -62_135_596_800_000  // 0001-01-01T00:00:00.000Z
        let highest: Int64 = 253_402_300_799_999  // 9999-12-31T23:59:59.999Z
        let edges: [Int64] = [lowest, highest, 0, -1, 1, 951_782_400_000, 4_107_542_400_000, -2_208_988_800_001]
        for milliseconds in edges + (0..<100_000).map({ _ in Int64.random(in: lowest...highest, using: &rng) }) {
            var seconds = time_t(floorDivision(milliseconds, 1000).quotient)
            var parts = tm()
            #expect(gmtime_r(&seconds, &parts) != nil)
            let expected = String(
                format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                parts.tm_hour, parts.tm_min, parts.tm_sec, Int32(floorDivision(milliseconds, 1000).remainder))
            let written = iso8601(milliseconds: milliseconds)
            if written != expected {
                Issue.record("\(milliseconds) ms: wrote \(written), the C library says \(expected)")
                return
            }
        }
    }

    @Test("base64 matches Foundation's for every length from 0 to 300")
    func base64MatchesFoundation() {
        var rng = SystemRandomNumberGenerator()
        for length in 0...300 {
            let data = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let writer = JSONWriter()
            data.withUnsafeBytes { writer.append(base64: $0) }
            #expect(String(decoding: writer.bytes, as: UTF8.self) == Data(data).base64EncodedString())
        }
    }

    @Test("strings with quotes, backslashes, control characters and non-ASCII text parse back as they were")
    func quotedStringsRoundTrip() throws {
        let samples = [
            "", "plain", "quote \" and \\ backslash", "tab\tnew\nline\rreturn", "\u{0}\u{1}\u{1F}\u{7F}",
            "ünïcødé ✓ 🦉", String((0..<128).map { Character(Unicode.Scalar(UInt8($0))) }),
        ]
        for sample in samples {
            let writer = JSONWriter()
            writer.append(quoted: sample)
            let parsed = try JSONSerialization.jsonObject(with: Data(writer.bytes), options: .fragmentsAllowed)
            #expect(parsed as? String == sample)
        }
    }

    @Test("10,000 random strings of plain, special and multi-byte characters at every position parse back as they were")
    func randomQuotedStringsRoundTrip() throws {
        // The writer skips eight bytes at a time that need no escape: specials land at every offset.
        let alphabet: [Character] = ["a", "b", "\"", "\\", "\n", "\u{1}", "\u{1F}", " ", "~", "é", "✓", "🦉", "\u{7F}"]
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<10_000 {
            let sample = String(
                (0..<Int.random(in: 0...40, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! })
            let writer = JSONWriter()
            writer.append(quoted: sample)
            let parsed = try JSONSerialization.jsonObject(with: Data(writer.bytes), options: .fragmentsAllowed)
            guard parsed as? String == sample else {
                Issue.record("\(sample.debugDescription) came back as \(String(describing: parsed))")
                return
            }
        }
    }

    @Test("numbers: integers at the edges, doubles integral and not, NaN and infinity as text")
    func numbers() {
        func text(_ value: JSON) -> String { value.text }
        #expect(text(.int(Int64.min)) == "-9223372036854775808")
        #expect(text(.int(Int64.max)) == "9223372036854775807")
        #expect(text(.uint(UInt64.max)) == "18446744073709551615")
        #expect(text(.int(0)) == "0" && text(.int(-7)) == "-7")
        #expect(text(.double(3)) == "3.0" && text(.double(-0.0)) == "-0.0" && text(.double(1.5)) == "1.5")
        #expect(text(.double(999_999_999_999_999)) == "999999999999999.0")
        #expect(text(.double(1e15)) == "\(1e15)")
        #expect(text(.double(.nan)) == "\"nan\"" && text(.double(-.infinity)) == "\"-inf\"")
    }

    @Test(
        "a payload written from its bytes is what the decoded value gives, for 5,000 random values; tags and other keys decline"
    )
    func payloadsFromBytesMatchDecodedValues() throws {
        var rng = SystemRandomNumberGenerator()
        func scalar() -> CBORValue {
            switch Int.random(in: 0..<9, using: &rng) {
            case 0: .unsigned(UInt64.random(in: 0...UInt64.max, using: &rng) >> UInt64.random(in: 0...63, using: &rng))
            case 1: .negative(UInt64.random(in: 0...UInt64.max, using: &rng) >> UInt64.random(in: 0...63, using: &rng))
            case 2:
                .text(
                    String(
                        (0..<Int.random(in: 0...12, using: &rng)).map { _ in "aé\"\\\n✓".randomElement(using: &rng)! }))
            case 3: .bytes((0..<Int.random(in: 0...6, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) })
            case 4: .float([0.5, -0.0, 3, 1e300, .nan, -.infinity, 1.0 / 3][Int.random(in: 0..<7, using: &rng)])
            case 5: .bool(Bool.random(using: &rng))
            case 6: .null
            case 7: .undefined
            default: .simple(UInt8.random(in: 0...19, using: &rng))
            }
        }
        func value(_ depth: Int) -> CBORValue {
            guard depth < 3 else { return scalar() }
            switch Int.random(in: 0..<10, using: &rng) {
            case 0...4: return scalar()
            case 5...6: return .array((0..<Int.random(in: 0...4, using: &rng)).map { _ in value(depth + 1) })
            case 7...8:
                // Distinct text keys (a map with equal keys is not valid CBOR).
                let count = Int.random(in: 0...4, using: &rng)
                return .map((0..<count).map { CBORValue.Entry(.text("k\($0)"), value(depth + 1)) })
            default:
                return Bool.random(using: &rng)
                    ? .tagged(1, .unsigned(1_700_000_000)) : .map([.init(.unsigned(1), value(depth + 1))])
            }
        }
        var fromBytes = 0
        var declined = 0
        for _ in 0..<5_000 {
            let original = value(0)
            let encoded = original.encoded()
            let decoded = try CBORValue(decoding: encoded)  // floats come back as Doubles
            let writer = JSONWriter()
            writer.append("prefix")
            let accepted = encoded.withUnsafeBytes { payload in
                (try? CBORValue.validate(payload)) != nil && writer.append(validatedCBOR: payload)
            }
            if accepted {
                fromBytes += 1
                #expect(String(decoding: writer.bytes, as: UTF8.self) == "prefix" + JSON.cbor(decoded).text)
            } else {
                declined += 1
                #expect(String(decoding: writer.bytes, as: UTF8.self) == "prefix")  // nothing left behind
            }
        }
        #expect(fromBytes > 1_000 && declined > 100)
    }

    @Test("CBOR values map to JSON as the dump format says, compact and indented")
    func cborMapping() {
        let uuid: [UInt8] = [
            0xE6, 0x21, 0xE1, 0xF8, 0xC3, 0x6C, 0x49, 0x5A, 0x93, 0xFC, 0x0C, 0x24, 0x7A, 0x3E, 0x6E, 0x5F,
        ]
        let value: CBORValue = .map([
            .init(.text("n"), .negative(UInt64.max)),
            .init(.text("b"), .bytes([0x00, 0xAB])),
            .init(.text("t"), .tagged(1, .unsigned(1_700_000_000))),
            .init(.text("huge time"), .tagged(1, .unsigned(UInt64(Int64.max)))),
            .init(.text("u"), .tagged(37, .bytes(uuid))),
            .init(.text("url"), .tagged(32, .text("https://example.com"))),
            .init(.unsigned(5), .array([.null, .undefined, .bool(true), .simple(16)])),
            .init(.text("empty"), .array([])),
        ])
        let expected: [String] = [
            #"{"n":"-18446744073709551615 - 1","b":{"$bytes":"00ab"},"t":"2023-11-14T22:13:20.000Z","#,
            #""huge time":{"$tag":1,"value":9223372036854775807},"u":"E621E1F8-C36C-495A-93FC-0C247A3E6E5F","#,
            #""url":"https://example.com","5":[null,null,true,{"$simple":16}],"empty":[]}"#,
        ]
        #expect(JSON.cbor(value).text == expected.joined())
        #expect(JSON.cbor(.map([.init(.text("a"), .array([.unsigned(1)]))])).pretty == "{\n  \"a\": [\n    1\n  ]\n}")
    }
}
