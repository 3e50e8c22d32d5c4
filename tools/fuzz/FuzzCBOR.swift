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
    checkScanner(input)
    return 0
}

// The scanner of generated model code must accept only what the general decoder reads the same.
let scanTable = CBORPropertyTable(["id", "name", "a", "b", nil, "a longer key of more than 23 bytes"])!
let scanKeys = CBORKeyTable(["id", "name", "a", "b", "(no key)", "a longer key of more than 23 bytes"])

func checkScanner(_ input: UnsafeRawBufferPointer) {
    guard var scanner = CBORFieldScanner(input, table: scanTable) else { return }
    var read: [Int: String] = [:]
    while let property = scanner.nextProperty() {
        let value: String?
        switch property {
        case 0: value = scanner.int64().map { "\($0)" }
        case 1: value = scanner.skipNull() ? "null" : scanner.string()
        case 2: value = scanner.double().map { $0.isNaN ? "nan" : "\($0.bitPattern)" }
        case 3: value = scanner.bool().map { "\($0)" }
        case 5: value = scanner.uint64().map { "\($0)" }
        default: value = nil
        }
        guard let value else { return }
        read[property] = value
    }
    guard scanner.isComplete else { return }
    do {
        let general = try CBORDecoder().decodeFields(from: input, keys: scanKeys) { map -> [Int: String] in
            var general: [Int: String] = [:]
            for property in read.keys {
                switch property {
                case 0: general[0] = "\(try map.decode(Int64.self, field: 0))"
                case 1: general[1] = try map.decodeNil(field: 1) ? "null" : try map.decode(String.self, field: 1)
                case 2: general[2] = { $0.isNaN ? "nan" : "\($0.bitPattern)" }(try map.decode(Double.self, field: 2))
                case 3: general[3] = "\(try map.decode(Bool.self, field: 3))"
                default: general[5] = "\(try map.decode(UInt64.self, field: 5))"
                }
            }
            return general
        }
        if general != read { fatalError("the scanner read \(read), the general decoder \(general)") }
    } catch {
        fatalError("the scanner read \(read) where the general decoder refuses: \(error)")
    }
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
