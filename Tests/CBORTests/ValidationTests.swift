import CBOR
import Foundation
import TestSupport
import Testing

@Suite("CBORValue.validate")
struct ValidationTests {
    /// `validate` must accept exactly what `CBORValue(decoding:)` accepts, and report a map's text keys.
    func expectAgreement(_ input: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) {
        let decoded = try? CBORValue(decoding: input)
        var keys: [String?] = []
        let major = input.withUnsafeBytes { buffer in
            try? CBORValue.validate(buffer) { key in keys.append(key.map { String(decoding: $0, as: UTF8.self) }) }
        }
        #expect(
            (decoded != nil) == (major != nil), "\(input.map { String(format: "%02x", $0) }.joined())",
            sourceLocation: sourceLocation)
        if case .map(let entries)? = decoded, major == 5, input.first.map({ $0 & 0x1F != 31 }) == true {
            #expect(keys == entries.map(\.key.text), sourceLocation: sourceLocation)
        }
    }

    @Test("agrees with the decoder on every Appendix A and invalid vector")
    func vectors() throws {
        struct Vector: Decodable { var hex: String }
        for file in ["appendix_a.json", "fail.json"] {
            let vectors = try JSONDecoder().decode([Vector].self, from: try vectorFile(file))
            #expect(!vectors.isEmpty)
            for vector in vectors { expectAgreement(bytes(hex: vector.hex)) }
        }
    }

    @Test("agrees with the decoder on mutated maps")
    func mutated() throws {
        var rng = SeededGenerator(seed: SeededGenerator.seedFromEnvironment())
        let valid = CBORValue.map([
            .init(.text("ID"), .unsigned(7)), .init(.text("NAME"), .text("Zoë")),
            .init(.text("TAGS"), .array([.text("a"), .bytes([1, 2])])), .init(.unsigned(1), .float(1.5)),
        ]).encoded()
        expectAgreement(valid)
        for _ in 0..<20_000 {
            var input = valid
            if Bool.random(using: &rng) {
                for _ in 0..<Int.random(in: 1...3, using: &rng) {
                    input[Int.random(in: 0..<input.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                }
            } else {
                input = Array(input.prefix(Int.random(in: 0..<input.count, using: &rng)))
            }
            expectAgreement(input)
        }
    }
}
