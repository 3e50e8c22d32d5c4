import CBOR
import Foundation
@_spi(LMDB) import Hoard
import HoardTestSupport
import LMDB
import TestSupport
import Testing
import VariableCoding

@Suite("Synchronize")
struct SynchronizeTests {
    enum Stored { case current(Note), older(Note, Int), expired(Note), damaged, newer(Note) }

    static func scopeContains(_ scope: Int, _ id: Int64, _ note: Note?) -> Bool? {
        switch scope {
        case 0: return true
        case 1: return id >= 240 && id <= 270
        case 2: return id >= 256 && id <= 511  // the keys whose first 7 bytes equal 256's
        default: return note.map { $0.stars % 2 == 0 }  // nil: cannot tell (damaged)
        }
    }

    static func scope(_ kind: Int) -> SynchronizeScope<Note> {
        switch kind {
        case 0: .all
        case 1: .range(from: 240, through: 270)
        case 2: .keyPrefix(Array(Int64(256).keyBytes.prefix(7)))
        default: .matching { $0.stars % 2 == 0 }
        }
    }

    @Test(
        "randomized stored and fresh collections against a reference, every scope, dry runs (608 seeded cases, up to 5,000 per side)"
    )
    func againstReference() throws {
        let seed = SeededGenerator.seedFromEnvironment()
        var rng = SeededGenerator(seed: seed)
        let clock = ManualClock()
        for case_ in 0..<608 {
            // Most cases are small and dense (many collisions between the sides); the last eight
            // have up to 5,000 records on each side.
            let large = case_ >= 600
            let ids = large ? 230..<10_230 : 230..<290
            let most = large ? 5_000 : 40
            try withTemporaryDirectory { dir in
                let store = try Store(
                    path: dir + "/s", options: .init(durability: .riskStoreOnOSCrash, clock: clock.read))
                let notes = try store.collection(Note.self)
                let db = try store.environment.openDatabase("c:Note")
                func note(_ id: Int64) -> Note {
                    Note(
                        id: id, text: "t\(Int.random(in: 0..<3, using: &rng))",
                        stars: Int.random(in: 0..<4, using: &rng), pinned: Bool.random(using: &rng))
                }
                // The stored side.
                var stored: [Int64: Stored] = [:]
                let size = case_ % 50 == 0 ? 0 : Int.random(in: 0...most, using: &rng)
                for id in ids.shuffled(using: &rng).prefix(size).map(Int64.init) {
                    let n = note(id)
                    switch Int.random(in: 0..<10, using: &rng) {
                    case 0: stored[id] = .older(n, Int.random(in: 1...2, using: &rng))
                    case 1: stored[id] = .expired(n)
                    case 2: stored[id] = .damaged
                    case 3: stored[id] = .newer(n)
                    default: stored[id] = .current(n)
                    }
                }
                try store.environment.write { txn in
                    for (id, entry) in stored {
                        let (n, version, expires): (Note, Int, Int64?) =
                            switch entry {
                            case .current(let n): (n, 3, nil)
                            case .older(let n, let v): (n, v, nil)
                            case .expired(let n): (n, 3, clock.nowMilliseconds - 1)
                            case .damaged: (Note(id: id, text: "x", stars: 1, pinned: false), 3, nil)
                            case .newer(let n): (n, 5, nil)
                            }
                        let payload = try CBOREncoder(deterministic: true, userInfo: [.keySet: KeySetID.local(version)])
                            .encode(n)
                        // Older versions sometimes in format 2, as code before numbered keys wrote them.
                        var older = false
                        if case .older = entry { older = Bool.random(using: &rng) }
                        var record = makeRecord(
                            RecordHeader(version: version, writtenAt: 1, expiresAt: expires), payload: payload,
                            of: Note.self, numbered: !older)
                        if case .damaged = entry { record[record.count - 1] ^= 0xFF }
                        try txn.put(record, forKey: id.keyBytes, in: db)
                    }
                }
                // The fresh side: in scope; sometimes equal to what is stored.
                let kind = case_ % 4
                var fresh: [Note] = []
                for id in ids.shuffled(using: &rng).prefix(Int.random(in: 0...most, using: &rng)).map(Int64.init) {
                    var n = note(id)
                    if Bool.random(using: &rng) {
                        switch stored[id] {
                        case .current(let s)?, .older(let s, _)?, .expired(let s)?: n = s
                        default: break
                        }
                    }
                    if Self.scopeContains(kind, id, n) == true { fresh.append(n) }
                }
                // The reference.
                let freshByID = Dictionary(uniqueKeysWithValues: fresh.map { ($0.id, $0) })
                var added: Set<Int64> = [], updated: Set<Int64> = [], migrated: Set<Int64> = [],
                    removed: Set<Int64> = []
                var unchanged = 0
                var final: [Int64: Note] = [:]  // what a scan sees afterwards
                for (id, entry) in stored {
                    // What reading the record gives: old versions cannot hold `pinned`; damaged and
                    // newer records cannot be read (so a predicate cannot be checked on them).
                    let readable: Note? =
                        switch entry {
                        case .current(let n), .expired(let n): n
                        case .older(let n, _): Note(id: n.id, text: n.text, stars: n.stars, pinned: false)
                        case .damaged, .newer: nil
                        }
                    // A record with a fresh counterpart is in scope (the fresh model is); otherwise the scope decides.
                    let inScope = freshByID[id] != nil || Self.scopeContains(kind, id, readable) == true
                    if !inScope {
                        if case .current(let n) = entry { final[id] = n }
                        if case .older = entry { final[id] = readable }
                        continue
                    }
                    guard let f = freshByID[id] else {
                        switch entry {
                        case .damaged: break;
                        default: removed.insert(id)
                        }
                        continue
                    }
                    switch entry {
                    case .current(let n): if n == f { unchanged += 1 } else { updated.insert(id) }
                    case .older: if readable == f { migrated.insert(id) } else { updated.insert(id) }
                    case .expired, .damaged: added.insert(id)
                    case .newer: updated.insert(id)
                    }
                }
                for f in fresh {
                    final[f.id] = f
                    if stored[f.id] == nil { added.insert(f.id) }
                }
                let dryRun = case_ % 7 == 0
                let before = try store.environment.read { txn in try txn.entries(in: db) }
                let result = try notes.synchronize(
                    with: fresh.shuffled(using: &rng), scope: Self.scope(kind), dryRun: dryRun)
                let context = "seed \(seed), case \(case_), scope \(kind), dry run \(dryRun)"
                #expect(Set(result.added) == added, "\(context)")
                #expect(Set(result.updated) == updated, "\(context)")
                #expect(Set(result.migrated) == migrated, "\(context)")
                #expect(Set(result.removed) == removed, "\(context)")
                #expect(result.unchanged == unchanged, "\(context)")
                if dryRun {
                    #expect(
                        try store.environment.read { txn in try txn.entries(in: db) }.map(\.value)
                            == before.map(\.value), "\(context)")
                } else {
                    let after = try notes.scanSkippingDamaged()
                    #expect(Dictionary(uniqueKeysWithValues: after.models.map { ($0.id, $0) }) == final, "\(context)")
                    // Everything the synchronize wrote is in the current version.
                    for f in fresh { #expect(try notes.header(of: f.id)?.version == 3, "\(context)") }
                }
            }
        }
    }

    @Test("a fresh collection with an ID twice is refused before anything is written")
    func duplicates() throws {
        try withStore { store, _ in
            let notes = try store.collection(Note.self)
            try notes.put(Note(id: 1, text: "kept", stars: 1, pinned: false))
            expectHoardError(.invalidID, ["Note", "2 appears twice"]) {
                try notes.synchronize(with: [
                    Note(id: 2, text: "a", stars: 1, pinned: false), Note(id: 2, text: "b", stars: 1, pinned: false),
                ])
            }
            #expect(try notes.scan().map(\.text) == ["kept"])
        }
    }

    @Test("a model that throws while encoding midway leaves the store unchanged")
    func encodingFailure() throws {
        try withStore { store, _ in
            let items = try store.collection(Fragile.self)
            try items.put(Fragile(id: 1, text: "kept"))
            expectHoardError(.encoding, ["Fragile[3]", "does not encode", "boom"]) {
                try items.synchronize(with: [
                    Fragile(id: 2, text: "new"), Fragile(id: 3, text: "boom"), Fragile(id: 4, text: "new"),
                ])
            }
            #expect(try items.scan().map(\.text) == ["kept"])
        }
    }

    @Test("an ID outside the scope is refused before anything is written")
    func outOfScope() throws {
        try withStore { store, _ in
            let notes = try store.collection(Note.self)
            try notes.put(Note(id: 1, text: "kept", stars: 1, pinned: false))
            let before = try notes.scan()
            expectHoardError(.invalidID, ["outside the scope"]) {
                try notes.synchronize(
                    with: [
                        Note(id: 5, text: "n", stars: 1, pinned: false),
                        Note(id: 99, text: "far", stars: 1, pinned: false),
                    ],
                    scope: .range(from: 0, through: 10))
            }
            #expect(try notes.scan() == before)
        }
    }

    @Test("the async form: one write of the group commit, beside concurrent puts; a refused one writes nothing")
    func asyncForm() async throws {
        try await withTemporaryStore { store in
            let notes = try store.collection(Note.self)
            try await notes.put([1, 5, 9].map { Note(id: $0, text: "old", stars: 1, pinned: false) })
            let fresh = [1, 2, 3].map { Note(id: $0, text: "fresh", stars: 2, pinned: false) }
            let result = try await withThrowingTaskGroup(of: SynchronizeResult<Int64>?.self) { group in
                for id in Int64(100)..<Int64(150) {
                    group.addTask {
                        try await notes.put(Note(id: id, text: "put", stars: 3, pinned: false))
                        return nil
                    }
                }
                group.addTask { try await notes.synchronize(with: fresh, scope: .range(from: 0, through: 10)) }
                var result: SynchronizeResult<Int64>?
                for try await each in group where each != nil { result = each }
                return result
            }
            #expect(result?.added == [2, 3] && result?.updated == [1] && result?.removed == [5, 9])
            #expect(try notes.scan(through: 10) == fresh)
            #expect(try notes.count() == 3 + 50)
            await #expect(throws: HoardError.self) {
                try await notes.synchronize(with: fresh + fresh)
            }
            #expect(try notes.count() == 3 + 50)  // the refused synchronize removed nothing
        }
    }

    @Test("the Sequence form: fresh.synchronize(in: collection)")
    func sequenceForm() throws {
        try withStore { store, _ in
            let notes = try store.collection(Note.self)
            try notes.put(Note(id: 9, text: "stale", stars: 1, pinned: false))
            let result = try [Note(id: 1, text: "a", stars: 1, pinned: false)].synchronize(in: notes)
            #expect(result.added == [1] && result.removed == [9])
            #expect(try notes.scan().map(\.id) == [1])
        }
    }
}

/// A model whose encoding fails for one value, to test that a failure midway writes nothing.
struct Fragile: VariablyCodable, Identifiable {
    struct Boom: Error, CustomStringConvertible { var description: String { "boom" } }
    var id: Int64
    var text: String
    static let keySets = KeySets<Fragile>(local: [1: [\.id: "id", \.text: "text"]])
    init(id: Int64, text: String) { (self.id, self.text) = (id, text) }
    init(from container: DecodingContainer<Fragile>) throws {
        id = try container.decodeValue(for: \.id)
        text = try container.decodeValue(for: \.text)
    }
    func encode(to container: inout EncodingContainer<Fragile>) throws {
        if text == "boom" { throw Boom() }
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(text, for: \.text)
    }
}
