import CBOR
import Foundation
@_spi(LMDB) import Hoard
import HoardTestSupport
import LMDB
import TestSupport
import Testing
import VariableCoding

// A nested VariablyCodable type whose own local versions run ahead of the outer model's. The
// record's header stamps only the outer version, and reading decodes nested values with the key
// set of that version (the highest of the nested type's versions not above it), so writing must
// use the same one.

/// Version 2 renames the key.
struct Frame: VariablyCodable, Equatable, Sendable {
    var width: Int
    static let keySets = KeySets<Frame>(local: [1: [\.width: "W"], 2: [\.width: "WIDTH"]])
    init(width: Int) { self.width = width }
    init(from container: DecodingContainer<Frame>) throws { width = try container.decodeValue(for: \.width) }
    func encode(to container: inout EncodingContainer<Frame>) throws { try container.encodeValue(width, for: \.width) }
}

/// Version 2 adds a property that version 1 has no key for.
struct Box: VariablyCodable, Equatable, Sendable {
    var width: Int
    var height: Int
    static let keySets = KeySets<Box>(local: [1: [\.width: "W"], 2: [\.width: "W", \.height: "H"]])
    init(width: Int, height: Int) { (self.width, self.height) = (width, height) }
    init(from container: DecodingContainer<Box>) throws {
        width = try container.decodeValue(for: \.width)
        height = try container.decodeValue(for: \.height, default: 0)
    }
    func encode(to container: inout EncodingContainer<Box>) throws {
        try container.encodeValue(width, for: \.width)
        try container.encodeValue(height, for: \.height)
    }
}

struct Framed: VariablyCodable, Identifiable, Equatable, Sendable {
    var id: Int64
    var frame: Frame
    static let keySets = KeySets<Framed>(local: [1: [\.id: "I", \.frame: "F"]])
    init(id: Int64, frame: Frame) { (self.id, self.frame) = (id, frame) }
    init(from container: DecodingContainer<Framed>) throws {
        id = try container.decodeValue(for: \.id)
        frame = try container.decodeValue(for: \.frame)
    }
    func encode(to container: inout EncodingContainer<Framed>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(frame, for: \.frame)
    }
}

/// The outer model in version 1 only, and (`BoxedV2`) with a version 2.
struct Boxed: VariablyCodable, Identifiable, Equatable, Sendable {
    var id: Int64
    var box: Box
    static let keySets = KeySets<Boxed>(local: [1: [\.id: "I", \.box: "B"]])
    init(id: Int64, box: Box) { (self.id, self.box) = (id, box) }
    init(from container: DecodingContainer<Boxed>) throws {
        id = try container.decodeValue(for: \.id)
        box = try container.decodeValue(for: \.box)
    }
    func encode(to container: inout EncodingContainer<Boxed>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(box, for: \.box)
    }
}

struct BoxedV2: VariablyCodable, Identifiable, Equatable, Sendable {
    var id: Int64
    var box: Box
    static let keySets = KeySets<BoxedV2>(local: [1: [\.id: "I", \.box: "B"], 2: [\.id: "I", \.box: "B"]])
    init(id: Int64, box: Box) { (self.id, self.box) = (id, box) }
    init(from container: DecodingContainer<BoxedV2>) throws {
        id = try container.decodeValue(for: \.id)
        box = try container.decodeValue(for: \.box)
    }
    func encode(to container: inout EncodingContainer<BoxedV2>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(box, for: \.box)
    }
}

// The registry's ledger of nested key sets: `Framed` (outer version 1) nests `Frame`.

/// `Frame` as if its shipped version 1 had been edited in place.
struct TamperedFrame: VariablyCodable, Equatable, Sendable {
    var width: Int
    static let keySets = KeySets<TamperedFrame>(local: [1: [\.width: "WD"], 2: [\.width: "WIDTH"]])
    init(from container: DecodingContainer<TamperedFrame>) throws { width = try container.decodeValue(for: \.width) }
    func encode(to container: inout EncodingContainer<TamperedFrame>) throws {
        try container.encodeValue(width, for: \.width)
    }
}

struct TamperedFramed: VariablyCodable, Identifiable, Equatable, Sendable {
    var id: Int64
    var frame: TamperedFrame
    static let keySets = KeySets<TamperedFramed>(local: [1: [\.id: "I", \.frame: "F"]])
    init(from container: DecodingContainer<TamperedFramed>) throws {
        id = try container.decodeValue(for: \.id)
        frame = try container.decodeValue(for: \.frame)
    }
    func encode(to container: inout EncodingContainer<TamperedFramed>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(frame, for: \.frame)
    }
}

/// `Frame` with only its version 1: an outer version 2 codes it with version 1.
struct OldFrame: VariablyCodable, Equatable, Sendable {
    var width: Int
    static let keySets = KeySets<OldFrame>(local: [1: [\.width: "W"]])
    init(width: Int) { self.width = width }
    init(from container: DecodingContainer<OldFrame>) throws { width = try container.decodeValue(for: \.width) }
    func encode(to container: inout EncodingContainer<OldFrame>) throws {
        try container.encodeValue(width, for: \.width)
    }
}

/// An outer model in versions 1 and 2 over `OldFrame`, then (`FramedTwice`) over `Frame`,
/// whose version 2 would change how the outer version 2's records read.
struct FramedTwiceOld: VariablyCodable, Identifiable, Equatable, Sendable {
    var id: Int64
    var frame: OldFrame
    static let keySets = KeySets<FramedTwiceOld>(local: [1: [\.id: "I", \.frame: "F"], 2: [\.id: "I", \.frame: "F"]])
    init(id: Int64, frame: OldFrame) { (self.id, self.frame) = (id, frame) }
    init(from container: DecodingContainer<FramedTwiceOld>) throws {
        id = try container.decodeValue(for: \.id)
        frame = try container.decodeValue(for: \.frame)
    }
    func encode(to container: inout EncodingContainer<FramedTwiceOld>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(frame, for: \.frame)
    }
}

struct FramedTwice: VariablyCodable, Identifiable, Equatable, Sendable {
    var id: Int64
    var frame: Frame
    static let keySets = KeySets<FramedTwice>(local: [1: [\.id: "I", \.frame: "F"], 2: [\.id: "I", \.frame: "F"]])
    init(id: Int64, frame: Frame) { (self.id, self.frame) = (id, frame) }
    init(from container: DecodingContainer<FramedTwice>) throws {
        id = try container.decodeValue(for: \.id)
        frame = try container.decodeValue(for: \.frame)
    }
    func encode(to container: inout EncodingContainer<FramedTwice>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(frame, for: \.frame)
    }
}

@Suite("Nested models whose versions run ahead of the outer model's")
struct NestedVersionTests {
    /// The payload of the record stored under `id` in collection `name`.
    func payload(_ name: String, _ id: Int64, in store: Store) throws -> CBORValue {
        let database = try store.environment.openDatabase("c:" + name)
        let record = try #require(
            try store.environment.read { txn in try txn.value(forKey: id.keyBytes, in: database) })
        return try CBORValue(decoding: try namedPayload(of: record, collection: name, in: store))
    }

    @Test("a nested value is written with the key set reading will use, and reads back")
    func renamedKey() throws {
        try withStore { store, _ in
            let framed = try store.collection(Framed.self)
            let model = Framed(id: 1, frame: Frame(width: 5))
            try framed.put(model)
            #expect(try framed.get(1) == model)
            // Frame's version 1 (the outer record's version), not its current version 2.
            #expect(
                try payload("Framed", 1, in: store)
                    == .map([
                        .init(.text("F"), .map([.init(.text("W"), .unsigned(5))])),
                        .init(.text("I"), .unsigned(1)),
                    ]))
        }
    }

    @Test("a nested property the record's version has no key for is refused, not dropped")
    func propertyWithoutKey() throws {
        try withStore { store, _ in
            let boxed = try store.collection(Boxed.self)
            do {
                try boxed.put(Boxed(id: 1, box: Box(width: 2, height: 3)))
                Issue.record("the height was dropped silently")
            } catch HoardError.encoding(_, _, let underlying) {
                guard case VariableCodingError.propertyWithoutKey(let type, let keySet, let property) = underlying
                else {
                    Issue.record("unexpected underlying error \(underlying)")
                    return
                }
                #expect(type == "Box" && keySet == "local(1)" && property == "height")
            }
            #expect(try boxed.count() == 0)
            // Once the outer model has a version 2, the nested one is written in its version 2.
            let boxedV2 = try store.collection(BoxedV2.self)
            let model = BoxedV2(id: 1, box: Box(width: 2, height: 3))
            try boxedV2.put(model)
            #expect(try boxedV2.get(1) == model)
            #expect(
                try payload("BoxedV2", 1, in: store)
                    == .map([
                        .init(.text("B"), .map([.init(.text("H"), .unsigned(3)), .init(.text("W"), .unsigned(2))])),
                        .init(.text("I"), .unsigned(1)),
                    ]))
        }
    }

    @Test("the registry records the nested key sets each version is written with")
    func recorded() throws {
        try withStore { store, _ in
            _ = try store.collection(Framed.self)
            let nested = try #require(try store.schema(of: "Framed")).nested
            #expect(
                nested == [
                    NestedKeySets(path: "frame", type: "Frame", versionUsed: [1: 1], keyNames: [1: ["width": "W"]])
                ])
            _ = try store.collection(Boxed.self)
            #expect(try store.schema(of: "Boxed")?.nested.map(\.path) == ["box"])
            // A flat model records none.
            _ = try store.collection(Note.self)
            #expect(try store.schema(of: "Note")?.nested == [])
        }
    }

    @Test("a recorded key set of a nested type that changed is refused when the collection opens")
    func frozenNested() throws {
        try withStore { store, _ in
            _ = try store.collection(Framed.self)
            expectHoardError(
                .keySetChanged,
                [
                    "TamperedFrame at 'frame' in TamperedFramed", "collection Framed", "local key set 1",
                    "'width': key 'W' recorded, 'WD' now",
                ]
            ) {
                _ = try store.collection(TamperedFramed.self, named: "Framed")
            }
            _ = try store.collection(Framed.self)
        }
    }

    @Test("a nested type's new version that would change how an outer version in use reads is refused")
    func nestedVersionBelowOuter() throws {
        try withStore { store, _ in
            let old = try store.collection(FramedTwiceOld.self, named: "boxes")
            try old.put(FramedTwiceOld(id: 1, frame: OldFrame(width: 7)))
            #expect(try store.schema(of: "boxes")?.nested.first?.versionUsed == [1: 1, 2: 1])
            // Frame's version 2 (key WIDTH) would read the outer version 2's record, written with key W.
            expectHoardError(
                .keySetChanged,
                ["Frame at 'frame' in FramedTwice", "version 2 hold its version 1", "read them with its version 2"]
            ) {
                _ = try store.collection(FramedTwice.self, named: "boxes")
            }
            #expect(try old.get(1)?.frame.width == 7)
        }
    }

    @Test("an entry recorded before nested key sets were gains them when the collection opens")
    func upgradedEntry() throws {
        try withStore { store, _ in
            _ = try store.collection(Framed.self)
            var schema = try #require(try store.schema(of: "Framed"))
            let nested = schema.nested
            // Rewrite the entry as earlier code wrote it: without `nested`.
            let meta = try store.environment.openDatabase("hoard.meta")
            _ = try store.environment.write { txn in try txn.delete(Array("collection:Framed".utf8), in: meta) }
            schema.nested = []
            try store.writeLMDB { txn in try store.record(schema, in: txn) }
            #expect(try store.schema(of: "Framed")?.nested == [])
            _ = try store.collection(Framed.self)
            #expect(try store.schema(of: "Framed")?.nested == nested)
        }
    }
}
