// libFuzzer target for the CBOR decoder: arbitrary bytes must end in a value or a thrown error,
// never a crash, a trap, a hang or a runaway allocation. Built and run by tools/fuzz/run.sh.
import Foundation

struct Sample: Codable {
    var id: Int
    var name: String
    var tags: [String]
    var scores: [String: Double]
    var data: Data?
    var when: Date?
    var link: URL?
    var nested: [Sample]?
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = UnsafeRawBufferPointer(start: data, count: size)
    if let value = try? CBORValue(decoding: input) {
        // Whatever decodes must re-encode to bytes that decode to the same value.
        let again = try? CBORValue(decoding: value.encoded())
        if let again, !sameValue(again, value) {
            fatalError("round trip changed the value: \(value) -> \(again)")
        }
        if again == nil { fatalError("re-encoded value does not decode: \(value)") }
    }
    _ = try? CBORDecoder().decode(Sample.self, from: input)
    _ = try? CBORDecoder().decode([String: [Int]].self, from: input)
    // The by-field-number reader (the store's path): its one-pass match and its fallback.
    _ = try? CBORDecoder().decodeFields(from: input, keys: fieldKeys) { map in
        _ = try? map.decode(Int.self, field: 0)
        _ = try? map.decode(String.self, field: 1)
        _ = try? map.decode(Double.self, field: 2)
        _ = try? map.decode(Bool.self, field: 3)
        _ = try? map.decode([String].self, field: 4)
        _ = try? map.decode(Sample.self, field: 5)
        _ = try? map.decodeNil(field: 6)
    }
    return 0
}

let fieldKeys = CBORKeyTable(["id", "name", "a", "b", "tags", "nested", "a longer key of more than 23 bytes"])

/// Equality that treats every NaN as equal (NaN payloads are canonicalized on encoding).
func sameValue(_ a: CBORValue, _ b: CBORValue) -> Bool {
    switch (a, b) {
    case (.float(let x), .float(let y)): return x.isNaN && y.isNaN || x.bitPattern == y.bitPattern
    case (.array(let x), .array(let y)): return x.count == y.count && zip(x, y).allSatisfy(sameValue)
    case (.map(let x), .map(let y)):
        return x.count == y.count && zip(x, y).allSatisfy { sameValue($0.key, $1.key) && sameValue($0.value, $1.value) }
    case (.tagged(let t, let x), .tagged(let u, let y)): return t == u && sameValue(x, y)
    default: return a == b
    }
}
