import CBOR
import Testing

/// The scanner and emitter that generated model code uses, on their own: what they accept, and
/// every way of misusing them ending in the ordinary path instead of wrong bytes.
@Suite("Scanning and emitting maps by property number")
struct ScanningTests {
    // Properties 0 ("name") and 2 ("age") have keys; property 1 has none.
    let table = CBORPropertyTable(["name", nil, "age"])!

    /// Emits through `fill` and returns the bytes, or `nil` when the emitter declined.
    func emitted(deterministic: Bool = true, _ fill: (inout CBORFieldEmitter) -> Bool) throws -> [UInt8]? {
        try CBOREncoder(deterministic: deterministic).emitFields(
            table: table, fill, reading: { Optional(Array($0)) }, otherwise: { nil })
    }

    func map(_ entries: [(String, CBORValue)]) -> [UInt8] {
        CBORValue.map(entries.map { CBORValue.Entry(.text($0.0), $0.1) }).encoded()
    }

    @Test("an emitted map is the general encoder's, in deterministic or property order")
    func emitting() throws {
        func fill(_ e: inout CBORFieldEmitter) -> Bool {
            e.beginMap(count: 2)
            for property in e.propertyOrder {
                switch property {
                case 0: e.emit("Ada", property: 0)
                case 2: e.emit(36, property: 2)
                default: return false
                }
            }
            return true
        }
        // Deterministic order puts "age" (the shorter key) first; property order puts "name" first.
        #expect(try emitted(deterministic: true, fill) == map([("age", .unsigned(36)), ("name", .text("Ada"))]))
        #expect(try emitted(deterministic: false, fill) == map([("name", .text("Ada")), ("age", .unsigned(36))]))
        #expect(
            try emitted(deterministic: true, fill)
                == (try CBOREncoder(deterministic: true).encode(Person(name: "Ada", age: 36))))
    }

    struct Person: Encodable {
        var name: String
        var age: Int
    }

    @Test("every misuse of the emitter ends in the ordinary path")
    func emitterDeclines() throws {
        let cases: [(String, (inout CBORFieldEmitter) -> Bool)] = [
            (
                "fill declines",
                { e in
                    e.beginMap(count: 0); return false
                }
            ),
            (
                "fewer entries than announced",
                { e in
                    e.beginMap(count: 2); e.emit("Ada", property: 0); return true
                }
            ),
            (
                "more entries than announced",
                { e in
                    e.beginMap(count: 1); e.emit("Ada", property: 0); e.emit(1, property: 2); return true
                }
            ),
            (
                "a property twice",
                { e in
                    e.beginMap(count: 2); e.emit("Ada", property: 0); e.emit("Bob", property: 0); return true
                }
            ),
            (
                "a property without a key",
                { e in
                    e.beginMap(count: 1); e.emit(1, property: 1); return true
                }
            ),
            (
                "a property out of range",
                { e in
                    e.beginMap(count: 1); e.emit(1, property: 3); return true
                }
            ),
            (
                "a negative property",
                { e in
                    e.beginMap(count: 1); e.emit(1, property: -1); return true
                }
            ),
            (
                "no head",
                { e in
                    e.emit("Ada", property: 0); return true
                }
            ),
            (
                "the head after the entries",
                { e in
                    e.emit("Ada", property: 0); e.beginMap(count: 1); return true
                }
            ),
            (
                "two heads",
                { e in
                    e.beginMap(count: 0); e.beginMap(count: 0); return true
                }
            ),
        ]
        for (what, fill) in cases {
            #expect(try emitted(fill) == nil, "\(what)")
        }
    }

    @Test("the scanner reads a map of the table's keys and stops at anything else")
    func scanning() throws {
        func scan(_ bytes: [UInt8]) -> (name: String?, age: Int?)? {
            bytes.withUnsafeBytes { raw in
                guard var scanner = CBORFieldScanner(raw, table: table) else { return nil }
                var result: (name: String?, age: Int?) = (nil, nil)
                while let property = scanner.nextProperty() {
                    switch property {
                    case 0: result.name = scanner.string()
                    case 2: result.age = scanner.int()
                    default: return nil
                    }
                }
                return scanner.isComplete ? result : nil
            }
        }
        let both = map([("age", .unsigned(36)), ("name", .text("Ada"))])
        #expect(scan(both).map { "\($0.name ?? "-") \($0.age ?? -1)" } == "Ada 36")
        #expect(
            scan(map([("name", .text("Ada")), ("age", .unsigned(36))])).map { "\($0.name ?? "-") \($0.age ?? -1)" }
                == "Ada 36", "another order")
        #expect(scan(map([("age", .unsigned(7))])).map { $0.age } == 7)
        #expect(scan(map([("nick", .text("x"))])) == nil, "a key the table does not name")
        #expect(
            scan(map([("age", .unsigned(1)), ("name", .text("Ada")), ("x", .unsigned(1))])) == nil,
            "more entries than keys")
        #expect(scan(map([("age", .text("36"))])) == nil, "a value of another type")
        #expect(scan(both + [0x00]) == nil, "a byte after the map")
        #expect(scan(Array(both.dropLast())) == nil, "cut short")
        #expect(
            scan([0xA1, 0x63] + Array("age".utf8) + [0x63] + Array("age".utf8)) == nil, "a key where a value should be")
        #expect(
            scan([0xA2, 0x63] + Array("age".utf8) + [0x01, 0x63] + Array("age".utf8) + [0x02]) == nil, "a key twice")
        #expect(scan([0x82, 0x01, 0x02]) == nil, "an array")
        #expect(scan([0xBF, 0xFF]) == nil, "an indefinite-length map")
        #expect(scan([]) == nil, "no bytes")
        #expect(scan([0xA1, 0x64] + Array("name".utf8) + [0x62, 0xC3, 0x28]) == nil, "invalid UTF-8")
        // A key written with a longer head than it needs is still the key.
        #expect(scan([0xA1, 0x78, 0x03] + Array("age".utf8) + [0x05]).map { $0.age } == 5)
    }
}
