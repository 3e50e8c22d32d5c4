import CBOR
import Foundation
import Testing

/// The shared test vectors live beside the repository: ../shared/testdata/cbor.
func vectorFile(_ name: String) throws -> Data {
    let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    let url = packageRoot.deletingLastPathComponent().appendingPathComponent("shared/testdata/cbor/\(name)")
    guard FileManager.default.fileExists(atPath: url.path) else {
        Issue.record("missing test vectors: \(url.path) (the tests expect ../shared beside the repository)")
        throw CocoaError(.fileNoSuchFile)
    }
    return try Data(contentsOf: url)
}

func bytes(hex: String) -> [UInt8] {
    var result: [UInt8] = []
    var index = hex.startIndex
    while index < hex.endIndex {
        let next = hex.index(index, offsetBy: 2)
        result.append(UInt8(hex[index..<next], radix: 16)!)
        index = next
    }
    return result
}

func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

/// A JSON value as the vector files hold it.
indirect enum JSONValue: Decodable {
    case bool(Bool), integer(Int64), unsignedInteger(UInt64), number(Double), string(String), array([JSONValue]),
        object([String: JSONValue]), null

    init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .null
        } else if let v = try? c.decode(Bool.self) {
            self = .bool(v)
        } else if let v = try? c.decode(Int64.self) {
            self = .integer(v)
        } else if let v = try? c.decode(UInt64.self) {
            self = .unsignedInteger(v)
        } else if let v = try? c.decode(Double.self) {
            self = .number(v)
        } else if let v = try? c.decode(String.self) {
            self = .string(v)
        } else if let v = try? c.decode([JSONValue].self) {
            self = .array(v)
        } else {
            self = .object(try c.decode([String: JSONValue].self))
        }
    }
}

struct Vector: Decodable {
    let hex: String
    let roundtrip: Bool?
    /// `.null` when the file says `"decoded": null`, `nil` when it has no "decoded".
    let decoded: JSONValue?
    let diagnostic: String?

    enum CodingKeys: String, CodingKey { case hex, roundtrip, decoded, diagnostic }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        hex = try c.decode(String.self, forKey: .hex)
        roundtrip = try c.decodeIfPresent(Bool.self, forKey: .roundtrip)
        decoded = c.contains(.decoded) ? try c.decode(JSONValue.self, forKey: .decoded) : nil
        diagnostic = try c.decodeIfPresent(String.self, forKey: .diagnostic)
    }
}

/// Whether a decoded CBOR value equals the vector's expected JSON value.
func matches(_ value: CBORValue, _ expected: JSONValue) -> Bool {
    switch (value, expected) {
    case (.unsigned(let n), .integer(let e)): return e >= 0 && UInt64(e) == n
    case (.unsigned(let n), .unsignedInteger(let e)): return n == e
    case (.negative(let n), .integer(let e)): return e < 0 && UInt64(-1 - e) == n
    case (.float(let f), .integer(let e)): return f == Double(e)
    case (.float(let f), .number(let e)): return f == e
    case (.tagged(2, .bytes(let b)), .number(let e)): return bignum(b) == e
    case (.tagged(3, .bytes(let b)), .number(let e)): return -1 - bignum(b) == e
    case (.unsigned(let n), .number(let e)): return Double(n) == e
    case (.negative(let n), .number(let e)): return -1 - Double(n) == e
    case (.bool(let b), .bool(let e)): return b == e
    case (.null, .null): return true
    case (.text(let t), .string(let e)): return t == e
    case (.array(let items), .array(let e)): return items.count == e.count && zip(items, e).allSatisfy(matches)
    case (.map(let entries), .object(let e)):
        return entries.count == e.count
            && entries.allSatisfy { entry in
                guard case .text(let key) = entry.key, let other = e[key] else { return false }
                return matches(entry.value, other)
            }
    default: return false
    }
}

func bignum(_ bytes: [UInt8]) -> Double { bytes.reduce(0.0) { $0 * 256 + Double($1) } }

/// RFC 8949 diagnostic notation for the items the vectors describe that way.
func diagnostic(_ value: CBORValue) -> String {
    switch value {
    case .unsigned(let n): return String(n)
    case .negative(let n): return "-" + String(UInt64(n) + 1)
    case .float(let f):
        if f.isNaN { return "NaN" }
        if f.isInfinite { return f < 0 ? "-Infinity" : "Infinity" }
        return f == f.rounded() && abs(f) < 1e15 ? String(Int64(f)) : String(f)
    case .bytes(let b): return "h'\(hex(b))'"
    case .text(let t): return "\"\(t)\""
    case .tagged(let tag, let inner): return "\(tag)(\(diagnostic(inner)))"
    case .simple(let s): return "simple(\(s))"
    case .undefined: return "undefined"
    case .null: return "null"
    case .bool(let b): return String(b)
    case .array(let items): return "[" + items.map(diagnostic).joined(separator: ", ") + "]"
    case .map(let entries):
        return "{" + entries.map { "\(diagnostic($0.key)): \(diagnostic($0.value))" }.joined(separator: ", ") + "}"
    }
}

/// Diagnostic notation with indefinite-length chunks joined, as `CBORValue` joins them.
func joinedChunks(_ text: String) -> String {
    guard text.hasPrefix("(_ h'") else { return text }
    let chunks = text.dropFirst(3).dropLast().split(separator: ",").map {
        $0.trimmingCharacters(in: .whitespaces).dropFirst(2).dropLast()
    }
    return "h'" + chunks.joined() + "'"
}

@Suite("RFC 8949 vectors")
struct VectorTests {
    @Test("every Appendix A example decodes to its value and re-encodes where it should")
    func appendixA() throws {
        let vectors = try JSONDecoder().decode([Vector].self, from: try vectorFile("appendix_a.json"))
        #expect(vectors.count == 82)
        var checked = 0
        for vector in vectors {
            let input = bytes(hex: vector.hex)
            if vector.hex == "f818" {
                // RFC 7049 listed simple(24) as 0xf818; RFC 8949 §3.3 made two-byte simple values
                // below 32 not well-formed, and fail.json lists f818 as invalid. We follow RFC 8949.
                #expect(throws: CBORDecodingError(.invalidSimpleValue(24), at: 0)) { try CBORValue(decoding: input) }
                continue
            }
            let value = try CBORValue(decoding: input)
            if let expected = vector.decoded {
                #expect(matches(value, expected), "\(vector.hex) decoded to \(value), expected \(expected)")
            } else if let expected = vector.diagnostic {
                #expect(diagnostic(value) == joinedChunks(expected), "\(vector.hex)")
            } else {
                Issue.record("vector \(vector.hex) has neither decoded nor diagnostic")
            }
            if vector.roundtrip == true {
                #expect(hex(value.encoded()) == vector.hex, "re-encoding \(vector.hex)")
            }
            checked += 1
        }
        #expect(checked == 81)
    }

    @Test("every invalid input is rejected, by CBORValue and by the typed decoder")
    func failVectors() throws {
        let vectors = try JSONDecoder().decode([Vector].self, from: try vectorFile("fail.json"))
        #expect(vectors.count == 568)
        struct AnyItem: Decodable {
            init(from decoder: any Decoder) throws {}
        }
        for vector in vectors {
            let input = bytes(hex: vector.hex)
            #expect(throws: CBORDecodingError.self, "\(vector.hex)") { try CBORValue(decoding: input) }
            #expect(throws: CBORDecodingError.self, "\(vector.hex)") {
                try CBORDecoder().decode(AnyItem.self, from: input)
            }
        }
    }
}
