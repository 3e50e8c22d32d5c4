import CBOR
import Foundation
@_spi(LMDB) import Hoard
import HoardTestSupport
import LMDB
import Synchronization
import TestSupport
import Testing
import VariableCoding

/// Emitting written by hand, in the shape generated code has, that declines every third model
/// after writing part of its map: a bulk put must store those the ordinary way, between others
/// that its emit buffer writes.
struct Choosy: VariablyCodable, Identifiable, Equatable, Sendable {
    var id: Int64
    var text: String

    static let keySets = KeySets<Choosy>(local: [1: [\.id: "id", \.text: "text"]])

    init(id: Int64, text: String) {
        self.id = id
        self.text = text
    }

    init(from container: DecodingContainer<Choosy>) throws {
        id = try container.decodeValue(for: \.id)
        text = try container.decodeValue(for: \.text)
    }

    func encode(to container: inout EncodingContainer<Choosy>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(text, for: \.text)
    }

    static var emittedProperties: [PartialKeyPath<Choosy>] { [\Choosy.id, \Choosy.text] }
    /// How many times `emit` ran (only one test stores `Choosy`).
    static let emitCalls = Mutex(0)

    func emit<E: FieldEmitting & ~Copyable>(into emitter: inout E) -> Bool {
        Self.emitCalls.withLock { $0 += 1 }
        emitter.beginMap(count: emitter.propertyOrder.count)
        if id % 3 == 0 {
            emitter.emit(id, property: 0)
            return false
        }
        for property in emitter.propertyOrder {
            switch property {
            case 0: emitter.emit(id, property: 0)
            case 1: emitter.emit(text, property: 1)
            default: return false
            }
        }
        return true
    }
}

/// A clock that moves on by one millisecond each time it is read, and counts its reads.
final class TickingClock: Sendable {
    let reads = Mutex<Int64>(0)
    /// 5,001 ms after 1970 at the first read, then a millisecond more at each.
    var read: @Sendable () -> Date {
        { [self] in
            Date(
                timeIntervalSince1970: Double(
                    reads.withLock {
                        $0 += 1; return 5_000 + $0
                    }) / 1000)
        }
    }
    var count: Int64 { reads.withLock { $0 } }
}

@Suite("Bulk put: many models in one call")
struct BulkPutTests {
    func record(_ id: some HoardKey, in store: Store, collection: String) throws -> [UInt8] {
        let database = try store.environment.openDatabase("c:" + collection)
        return try #require(try store.environment.read { txn in try txn.value(forKey: id.keyBytes, in: database) })
    }

    @Test(
        "one call reads the clock once: its records share their write time and expiry, and hold what one put each would"
    )
    func sharedTime() throws {
        // Note is coded by hand (the ordinary path), Plain by @VariablyCoded (generated code).
        try checkSharedTime((1...50).map { Note(id: $0, text: "note \($0)", stars: Int($0 % 5), pinned: $0 % 2 == 0) })
        var rng = SeededGenerator(seed: SeededGenerator.seedFromEnvironment())
        try checkSharedTime((1...50).map { Plain.random(id: $0, using: &rng) })
    }

    func checkSharedTime<Model: VariablyCodable & Identifiable & Equatable>(_ models: [Model]) throws
    where Model.ID: HoardKey {
        let clock = TickingClock()
        try withTemporaryDirectory { dir in
            let store = try Store(
                path: dir + "/store", options: .init(durability: .riskStoreOnOSCrash, clock: clock.read))
            let bulk = try store.collection(Model.self, named: "Bulk")
            let each = try store.collection(Model.self, named: "Each")

            let before = clock.count
            try store.write { txn in try bulk.put(models, expiry: .after(.seconds(1_000)), in: txn) }
            #expect(clock.count == before + 1)
            let headers = try models.map { try #require(try bulk.header(of: $0.id)) }
            let writtenAt = try #require(headers.first?.writtenAt)
            #expect(
                headers.allSatisfy {
                    $0.writtenAt == writtenAt && $0.expiresAt == writtenAt + 1_000_000
                        && $0.version == Model.keySets.currentVersion
                })

            try store.write { txn in
                for model in models { try each.put(model, expiry: .after(.seconds(1_000)), in: txn) }
            }
            #expect(clock.count == before + 1 + Int64(models.count))
            for model in models {
                // Beyond the header (write time, expiry, checksum), the bytes are the same.
                let bulkRecord = try record(model.id, in: store, collection: "Bulk")
                let eachRecord = try record(model.id, in: store, collection: "Each")
                #expect(payload(of: bulkRecord) == payload(of: eachRecord))
                #expect(try bulk.get(model.id) == model)
            }
        }
    }

    @Test("models generated code declines are stored the ordinary way, between ones it writes")
    func declinedAmongOthers() throws {
        try withStore { store, _ in
            let choosy = try store.collection(Choosy.self)
            let models = (1...30).map { Choosy(id: $0, text: String(repeating: "t", count: Int($0))) }
            let calls = Choosy.emitCalls.withLock { $0 }
            try store.write { txn in try choosy.put(models, in: txn) }
            // Once per model: a model whose generated code declined is not tried again.
            #expect(Choosy.emitCalls.withLock { $0 } == calls + models.count)
            let encoder = CBOREncoder(deterministic: true)
            for model in models {
                let expected = try withKeySet(.currentLocal) { try encoder.encode(model) }
                #expect(
                    try namedPayload(
                        of: try record(model.id, in: store, collection: "Choosy"), collection: "Choosy", in: store)
                        == expected,
                    "model \(model.id)")
                #expect(try choosy.get(model.id) == model)
            }
        }
    }

    @Test("a sequence that is not an array stores the same records as an array")
    func anySequence() throws {
        try checkAnySequence((1...40).map { Note(id: $0 * 3 - 60, text: "n\($0)", stars: 1, pinned: false) })
        var rng = SeededGenerator(seed: SeededGenerator.seedFromEnvironment())
        try checkAnySequence((1...40).map { Plain.random(id: $0 * 3 - 60, using: &rng) })
    }

    func checkAnySequence<Model: VariablyCodable & Identifiable & Equatable>(_ models: [Model]) throws
    where Model.ID: HoardKey {
        try withStore { store, _ in
            let fromArray = try store.collection(Model.self, named: "FromArray")
            let fromSequence = try store.collection(Model.self, named: "FromSequence")
            try store.write { txn in
                try fromArray.put(models, in: txn)
                try fromSequence.put(models.lazy.filter { _ in true }, in: txn)
            }
            #expect(try fromArray.scan() == models)
            #expect(try fromSequence.scan() == models)
            for model in models {
                #expect(
                    try record(model.id, in: store, collection: "FromArray")
                        == record(model.id, in: store, collection: "FromSequence"))
            }
        }
    }

    @Test("keys after the collection's last go by the append path: fuller pages, and keys among stored ones still land")
    func appendPath() throws {
        try withStore { store, _ in
            let bulk = try store.collection(Note.self, named: "Bulk")
            let each = try store.collection(Note.self, named: "Each")
            let notes = (1...20_000).map { Note(id: $0 * 2, text: "note \($0)", stars: Int($0 % 5), pinned: false) }
            try store.write { txn in
                try bulk.put(notes, in: txn)
                for note in notes { try each.put(note, in: txn) }
            }
            // An insert at the end of a full page leaves that page a little emptier than an append.
            let pages = try ["Bulk", "Each"].map { name in
                let database = try store.environment.openDatabase("c:" + name)
                return try store.environment.read { try $0.statistics(of: database).leafPages }
            }
            #expect(pages[0] < pages[1], "leaf pages: bulk \(pages[0]), one put each \(pages[1])")

            // Odd keys among the stored ones, a key twice, then keys past the end: all stored, the
            // later of two equal keys winning.
            let first = [(5, "odd"), (40_002, "past"), (40_002, "again"), (3, "before")]
            let mixed =
                first.map { Note(id: Int64($0.0), text: $0.1, stars: 1, pinned: true) }
                + (40_003...40_010).map { Note(id: $0, text: "end \($0)", stars: 3, pinned: true) }
            try store.write { txn in try bulk.put(mixed, in: txn) }
            #expect(try bulk.count() == notes.count + 11)
            #expect(try bulk.get(5)?.text == "odd")
            #expect(try bulk.get(3)?.text == "before")
            #expect(try bulk.get(40_002)?.text == "again")
            #expect(try bulk.scan(from: 40_001).map(\.id) == [40_002] + Array(40_003...40_010))
            #expect(try bulk.get(4)?.text == "note 2")
        }
    }

    @Test("insert-only: a model already stored fails the call, and the transaction stores none of it")
    func insertOnly() throws {
        try withStore { store, _ in
            let notes = try store.collection(Note.self)
            try notes.put(Note(id: 7, text: "first", stars: 1, pinned: false))
            let batch = (1...10).map { Note(id: $0, text: "batch \($0)", stars: 2, pinned: true) }
            #expect {
                try store.write { txn in try notes.put(batch, insertOnly: true, in: txn) }
            } throws: { error in
                // The error names the key as the collection's IDs read (KeyKind), not as hex.
                guard let error = error as? HoardError, error.kind == .alreadyStored else { return false }
                return "\(error)".hasPrefix("Note[7] is stored already")
            }
            #expect(try notes.scan().map(\.text) == ["first"])
            let tags = try store.collection(Tag.self)
            try tags.put(Tag(id: "0x10", uses: 1))
            #expect {
                try store.write { txn in try tags.put(Tag(id: "0x10", uses: 2), insertOnly: true, in: txn) }
            } throws: { error in
                (error as? HoardError)?.kind == .alreadyStored && "\(error)".hasPrefix(#"Tag["0x10"]"#)
            }
            try store.write { txn in try notes.put(batch.filter { $0.id != 7 }, insertOnly: true, in: txn) }
            #expect(try notes.count() == 10)
            #expect(try notes.get(7)?.text == "first")
        }
    }
}
