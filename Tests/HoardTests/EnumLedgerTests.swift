import Hoard
import HoardTestSupport
import Testing
import VariableCoding

// The raw values a recorded version writes for an enum are part of the ledger: version 1 of
// `Ticket` stores `Priority.high` as "URGENT" (an alias of local version 1), version 2 as "high".

enum Priority: String, VariableEnum {
    case low, high
    static let aliases: [KeySetID: [Priority: String]] = [.local(1): [.high: "URGENT"]]
}

/// `Priority` with version 1's alias edited in place.
enum EditedPriority: String, VariableEnum {
    case low, high
    static let aliases: [KeySetID: [EditedPriority: String]] = [.local(1): [.high: "PRESSING"]]
}

/// `Priority` with an alias added to version 2, which already stores canonical raw values.
enum LaterPriority: String, VariableEnum {
    case low, high
    static let aliases: [KeySetID: [LaterPriority: String]] = [.local(1): [.high: "URGENT"], .local(2): [.low: "high"]]
}

struct Ticket<P: VariableEnum & Sendable>: VariablyCodable, Identifiable, Sendable {
    var id: Int64
    var priority: P
    var previous: [P]
    static var keySets: KeySets<Ticket<P>> {
        KeySets(local: [
            1: [\.id: "I", \.priority: "P", \.previous: "H"], 2: [\.id: "I", \.priority: "P", \.previous: "H"],
        ])
    }
    init(id: Int64, priority: P, previous: [P]) { (self.id, self.priority, self.previous) = (id, priority, previous) }
    init(from container: DecodingContainer<Ticket<P>>) throws {
        id = try container.decodeValue(for: \.id)
        priority = try container.decodeValue(for: \.priority)
        previous = try container.decodeValue(for: \.previous)
    }
    func encode(to container: inout EncodingContainer<Ticket<P>>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(priority, for: \.priority)
        try container.encodeValue(previous, for: \.previous)
    }
}

/// A model nesting `Ticket`: its enums are found through it.
struct Queue: VariablyCodable, Identifiable, Sendable {
    var id: Int64
    var head: Ticket<Priority>?
    static let keySets = KeySets<Queue>(local: [1: [\.id: "I", \.head: "T"]])
    init(from container: DecodingContainer<Queue>) throws {
        id = try container.decodeValue(for: \.id)
        head = try container.decodeValueIfPresent(for: \.head)
    }
    func encode(to container: inout EncodingContainer<Queue>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValueIfPresent(head, for: \.head)
    }
}

@Suite("Enum aliases in the registry")
struct EnumLedgerTests {
    @Test("the registry records the raw values each version writes, directly and inside nested models")
    func recorded() throws {
        try withStore { store, _ in
            _ = try store.collection(Ticket<Priority>.self, named: "tickets")
            #expect(
                try store.schema(of: "tickets")?.enums == [
                    StoredEnumAliases(path: "previous", type: "Priority", aliases: [1: ["high": "URGENT"], 2: [:]]),
                    StoredEnumAliases(path: "priority", type: "Priority", aliases: [1: ["high": "URGENT"], 2: [:]]),
                ])
            _ = try store.collection(Queue.self)
            #expect(try store.schema(of: "Queue")?.enums.map(\.path) == ["head.previous", "head.priority"])
            #expect(try store.schema(of: "Queue")?.enums.first?.aliases == [1: ["high": "URGENT"]])
            _ = try store.collection(Note.self)
            #expect(try store.schema(of: "Note")?.enums == [])
        }
    }

    @Test("an alias of a recorded version edited or added is refused; the recorded code opens again")
    func frozen() throws {
        try withStore { store, _ in
            let tickets = try store.collection(Ticket<Priority>.self, named: "tickets")
            try tickets.put(Ticket(id: 1, priority: .high, previous: [.low]))
            expectHoardError(
                .keySetChanged,
                [
                    "EditedPriority at 'previous' in Ticket<EditedPriority>", "local key set 1",
                    "case 'high': raw value 'URGENT' recorded, 'PRESSING' now",
                ]
            ) {
                _ = try store.collection(Ticket<EditedPriority>.self, named: "tickets")
            }
            expectHoardError(
                .keySetChanged,
                ["LaterPriority at 'previous'", "local key set 2", "case 'low' (raw value 'high') added"]
            ) {
                _ = try store.collection(Ticket<LaterPriority>.self, named: "tickets")
            }
            #expect(try store.collection(Ticket<Priority>.self, named: "tickets").get(1)?.priority == .high)
        }
    }
}
