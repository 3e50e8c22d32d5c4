import Testing
import VariableCoding

// Nested models as a registry sees them: found through optionals and collections, at any depth,
// with the version of the nested type that each outer version is coded with.

/// Versions 2 and 4: an outer version 3 codes it with version 2.
private struct Corner: VariablyCodable, Equatable {
    var x: Int
    static let keySets = KeySets<Corner>(local: [2: [\.x: "X"], 4: [\.x: "CX"]])
    init(from container: DecodingContainer<Corner>) throws { x = try container.decodeValue(for: \.x) }
    func encode(to container: inout EncodingContainer<Corner>) throws { try container.encodeValue(x, for: \.x) }
}

private struct Panel: VariablyCodable, Equatable {
    var corner: Corner?
    var label: String
    static let keySets = KeySets<Panel>(local: [1: [\.label: "L"], 3: [\.label: "L", \.corner: "C"]])
    init(from container: DecodingContainer<Panel>) throws {
        label = try container.decodeValue(for: \.label)
        corner = try container.decodeValueIfPresent(for: \.corner)
    }
    func encode(to container: inout EncodingContainer<Panel>) throws {
        try container.encodeValue(label, for: \.label)
        try container.encodeValueIfPresent(corner, for: \.corner)
    }
}

/// A tree: its own type inside it is not listed again.
private struct Node: VariablyCodable, Equatable {
    var children: [Node]
    var panels: [String: [Panel]]?
    var title: String
    static let keySets = KeySets<Node>(local: [
        1: [\.title: "T", \.children: "K"],
        3: [\.title: "T", \.children: "K", \.panels: "P"],
    ])
    init(from container: DecodingContainer<Node>) throws {
        title = try container.decodeValue(for: \.title)
        children = try container.decodeValue(for: \.children)
        panels = try container.decodeValueIfPresent(for: \.panels)
    }
    func encode(to container: inout EncodingContainer<Node>) throws {
        try container.encodeValue(title, for: \.title)
        try container.encodeValue(children, for: \.children)
        try container.encodeValueIfPresent(panels, for: \.panels)
    }
}

@Suite("Nested key sets")
struct NestedKeySetTests {
    @Test("a nested model directly in a property; a plain Codable value is not one")
    func direct() throws {
        #expect(
            try Photo.keySets.nestedKeySets() == [
                NestedKeySets(
                    path: "meta", type: "Meta", versionUsed: [1: 1], keyNames: [1: ["width": "W", "height": "H"]])
            ])
        #expect(try Meta.keySets.nestedKeySets().isEmpty)
    }

    @Test("through dictionaries, arrays and optionals, at depth, with the version each outer version uses")
    func throughCollections() throws {
        let nested = try Node.keySets.nestedKeySets()
        #expect(nested.map(\.path) == ["panels", "panels.corner"])
        // Only Node's version 3 has panels; it codes them with Panel's version 3.
        #expect(
            nested.first
                == NestedKeySets(
                    path: "panels", type: "Panel", versionUsed: [3: 3], keyNames: [3: ["label": "L", "corner": "C"]]))
        // Panel's version 3 has a corner, which Node's version 3 codes with Corner's version 2.
        #expect(
            nested.last
                == NestedKeySets(path: "panels.corner", type: "Corner", versionUsed: [3: 2], keyNames: [2: ["x": "X"]]))
    }

    @Test("an outer version below every version of the nested type has none")
    func belowNested() throws {
        #expect(
            try Sheet.keySets.nestedKeySets() == [
                NestedKeySets(
                    path: "corner", type: "Corner", versionUsed: [2: 2, 5: 4],
                    keyNames: [2: ["x": "X"], 4: ["x": "CX"]])
            ])
    }

    @Test("enums and the aliases each outer version writes")
    func enums() throws {
        #expect(
            try Account.keySets.enumAliases() == [
                StoredEnumAliases(path: "channel", type: "Channel", aliases: [1: [:]]),
                StoredEnumAliases(path: "status", type: "Status", aliases: [1: ["suspended": "paused"]]),
            ])
        #expect(try Photo.keySets.enumAliases().isEmpty)
    }

    @Test("an invalid nested declaration is reported")
    func invalidNested() {
        #expect(throws: VariableCodingError.self) { try Holder.keySets.nestedKeySets() }
    }
}

private struct Sheet: VariablyCodable {
    var corner: Corner
    static let keySets = KeySets<Sheet>(local: [1: [\.corner: "C"], 2: [\.corner: "C"], 5: [\.corner: "C"]])
    init(from container: DecodingContainer<Sheet>) throws { corner = try container.decodeValue(for: \.corner) }
    func encode(to container: inout EncodingContainer<Sheet>) throws {
        try container.encodeValue(corner, for: \.corner)
    }
}

private struct Broken: VariablyCodable {
    var a: Int
    var b: Int
    static let keySets = KeySets<Broken>(local: [1: [\.a: "A", \.b: "A"]])
    init(from container: DecodingContainer<Broken>) throws { (a, b) = (0, 0) }
    func encode(to container: inout EncodingContainer<Broken>) throws {}
}

private struct Holder: VariablyCodable {
    var broken: Broken
    static let keySets = KeySets<Holder>(local: [1: [\.broken: "B"]])
    init(from container: DecodingContainer<Holder>) throws { broken = try container.decodeValue(for: \.broken) }
    func encode(to container: inout EncodingContainer<Holder>) throws {
        try container.encodeValue(broken, for: \.broken)
    }
}
