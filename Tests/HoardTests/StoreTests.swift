import CBOR
import Foundation
@_spi(LMDB) import Hoard
import HoardTestSupport
import LMDB
import TestSupport
import Testing
import VariableCoding

@Suite("Store")
struct StoreTests {
    @Test("IDs sort in their natural order as key bytes, for every ID type")
    func keyOrder() throws {
        var rng = SeededGenerator(seed: SeededGenerator.seedFromEnvironment())
        func check<T: HoardKey>(_ values: [T], _ less: (T, T) -> Bool) {
            let byBytes = values.sorted { $0.keyBytes.lexicographicallyPrecedes($1.keyBytes) }
            #expect(byBytes == values.sorted(by: less), "\(T.self)")
            for value in values {
                #expect(T(keyBytes: value.keyBytes) == value, "\(T.self) \(value)")
                // The bytes a get lends from the stack are the same bytes.
                #expect(value.withKeyBytes { Array($0) } == value.keyBytes, "\(T.self) \(value)")
            }
        }
        check([Int64.min, -1, 0, 1, .max] + (0..<500).map { _ in Int64.random(in: .min ... .max, using: &rng) }, <)
        check([Int.min, -2, 0, 7, .max] + (0..<500).map { _ in Int.random(in: .min ... .max, using: &rng) }, <)
        check([0, 1, UInt64.max] + (0..<500).map { _ in UInt64.random(in: 0 ... .max, using: &rng) }, <)
        let pieces = ["", "a", "ab", "b", "é", "水", "🦊", "A", "\u{0}", "zz"]
        check(pieces + (0..<300).map { _ in (0..<3).map { _ in pieces.randomElement(using: &rng)! }.joined() }) {
            $0.utf8.lexicographicallyPrecedes($1.utf8)
        }
        let uuids = (0..<100).map { _ in UUID() }
        check(uuids) { $0.keyBytes.lexicographicallyPrecedes($1.keyBytes) }
    }

    @Test("put, get, contains, delete, count and scans against an in-memory model (10,000 seeded operations)")
    func operationsAgainstModel() throws {
        let seed = SeededGenerator.seedFromEnvironment()
        var rng = SeededGenerator(seed: seed)
        try withStore { store, _ in
            let notes = try store.collection(Note.self)
            var model: [Int64: Note] = [:]
            for step in 0..<10_000 {
                let id = Int64.random(in: -300...300, using: &rng)
                switch Int.random(in: 0..<10, using: &rng) {
                case 0..<4:
                    let note = Note(
                        id: id, text: "n\(step)", stars: Int.random(in: 0...5, using: &rng),
                        pinned: Bool.random(using: &rng))
                    try notes.put(note)
                    model[id] = note
                case 4..<6:
                    #expect(try notes.delete(id) == (model.removeValue(forKey: id) != nil), "seed \(seed) step \(step)")
                case 6..<8:
                    #expect(try notes.get(id) == model[id], "seed \(seed) step \(step)")
                    #expect(try notes.contains(id) == (model[id] != nil), "seed \(seed) step \(step)")
                case 8:
                    let batch = (0..<Int.random(in: 1...20, using: &rng)).map { _ in
                        Note(id: Int64.random(in: -300...300, using: &rng), text: "b\(step)", stars: 1, pinned: false)
                    }
                    try notes.put(batch)
                    for note in batch { model[note.id] = note }
                default:
                    let a = Int64.random(in: -300...300, using: &rng), b = Int64.random(in: -300...300, using: &rng)
                    let (low, high) = (min(a, b), max(a, b))
                    let reverse = Bool.random(using: &rng)
                    let limit = Int.random(in: 1...50, using: &rng)
                    let expected = model.keys.filter { $0 >= low && $0 <= high }.sorted(by: reverse ? (>) : (<)).prefix(
                        limit
                    ).map { model[$0]! }
                    #expect(
                        try notes.scan(from: low, through: high, reverse: reverse, limit: limit) == Array(expected),
                        "seed \(seed) step \(step)")
                }
            }
            #expect(try notes.count() == model.count, "seed \(seed)")
            #expect(try notes.scan() == model.keys.sorted().map { model[$0]! }, "seed \(seed)")
        }
    }

    @Test("a key set the caller chose with withKeySet does not leak into the store's own coding")
    func callerKeySetDoesNotLeak() throws {
        try withStore { store, _ in
            let notes = try store.collection(Note.self)
            let note = Note(id: 7, text: "hello", stars: 4, pinned: true)
            // An app decoding server JSON with a remote key set, writing and reading inside that call.
            try withKeySet(.remote("v1")) { try notes.put(note) }
            #expect(try withKeySet(.remote("v1")) { try notes.get(7) } == note)
            #expect(try withKeySet(.local(1)) { try notes.get(7) } == note)
            // The stored payload uses the current local key names, whatever the caller chose.
            let db = try store.environment.openDatabase("c:Note")
            let record = try store.environment.read { txn in try txn.value(forKey: Int64(7).keyBytes, in: db) }
            let stored = try CBORValue(
                decoding: try namedPayload(of: try #require(record), collection: "Note", in: store))
            #expect("\(stored)".contains("PINNED") && "\(stored)".contains("TEXT"), "stored: \(stored)")
        }
    }

    @Test("string IDs: prefix scans, the empty string, non-ASCII")
    func stringKeys() throws {
        try withStore { store, _ in
            let tags = try store.collection(Tag.self)
            let ids = ["", "swift", "swiftui", "swim", "sw", "水", "🦊", "Swift"]
            try tags.put(ids.enumerated().map { Tag(id: $1, uses: $0) })
            #expect(try tags.get("")?.uses == 0)
            #expect(try tags.scan().map(\.id) == ids.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
            #expect(try tags.scan(keys: .prefix("swi".keyBytes)).map(\.id) == ["swift", "swiftui", "swim"])
            #expect(
                try tags.scan(keys: .prefix("swi".keyBytes), reverse: true, limit: 2).map(\.id) == ["swim", "swiftui"])
            // The lazy form visits the same models without building an array, and can stop early.
            var visited: [String] = []
            try tags.forEach(keys: .prefix("swi".keyBytes)) { tag in
                visited.append(tag.id)
                return visited.count < 2 ? .next : .stop
            }
            #expect(visited == ["swift", "swiftui"])
        }
    }

    @Test("records persist across close and reopen, with their header")
    func reopen() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/store"
            let note = Note(id: 7, text: "kept", stars: 3, pinned: true)
            do {
                let store = try Store(path: path, options: testOptions)
                try store.collection(Note.self).put(note, expiry: .at(Date(timeIntervalSince1970: 1_800_000_000)))
            }
            let store = try Store(path: path, options: Store.Options(readOnly: true))
            let notes = try store.collection(Note.self)
            #expect(try notes.get(7) == note)
            #expect(
                try notes.header(of: 7)
                    == RecordHeader(version: 3, writtenAt: 1_700_000_000_000, expiresAt: 1_800_000_000_000))
        }
    }

    @Test("records written by every earlier version read under the current code")
    func migrationOnRead() throws {
        try withStore { store, _ in
            let notes = try store.collection(Note.self)
            for version in 1...3 {
                try writeRecord(
                    Note(id: Int64(version), text: "from v\(version)", stars: version, pinned: true), version: version,
                    in: store)
            }
            #expect(try notes.get(1) == Note(id: 1, text: "from v1", stars: 1, pinned: false))
            #expect(try notes.get(2) == Note(id: 2, text: "from v2", stars: 2, pinned: false))
            #expect(try notes.get(3) == Note(id: 3, text: "from v3", stars: 3, pinned: true))
            #expect(try notes.header(of: 1)?.version == 1)
            // Rewriting stores the current version.
            try notes.put(try #require(try notes.get(1)))
            #expect(try notes.header(of: 1)?.version == 3)
        }
    }

    @Test("a record from a newer version is reported, never misread")
    func newerRecord() throws {
        try withStore { store, _ in
            let notes = try store.collection(Note.self)
            // Version 4, which this code does not know (its payload here is version 3's shape).
            try writeRecord(Note(id: 9, text: "future", stars: 1, pinned: false), version: 4, in: store)
            expectHoardError(.newerRecord, ["Note[9]", "version 4", "current version 3"]) { _ = try notes.get(9) }
        }
    }

    @Test("damaged records give typed errors naming collection, key and cause")
    func corruption() throws {
        try withStore { store, _ in
            let notes = try store.collection(Note.self)
            let note = Note(id: 5, text: "fine", stars: 2, pinned: false)
            try writeRecord(note, version: 3, in: store) { $0[$0.count - 1] ^= 0xFF }
            expectHoardError(.corruptRecord, ["Note[5]", "damaged", "checksum mismatch"]) { _ = try notes.get(5) }
            try writeRecord(note, version: 3, in: store) { $0[0] = 0x00 }
            expectHoardError(.corruptRecord, ["Note[5]", "does not start with \"H\""]) { _ = try notes.get(5) }
            let db = try store.environment.openDatabase("c:Note")
            try store.environment.write { txn in try txn.put([0x48, 0x52, 1], forKey: Int64(5).keyBytes, in: db) }
            expectHoardError(.corruptRecord, ["Note[5]", "fewer than the 28-byte header of format 1"]) {
                _ = try notes.get(5)
            }
            try store.environment.write { txn in try txn.put([0x48, 0x02, 0], forKey: Int64(5).keyBytes, in: db) }
            expectHoardError(.corruptRecord, ["Note[5]", "fewer than the 14-byte header"]) { _ = try notes.get(5) }
            try store.environment.write { txn in try txn.put([0x48, 0x04, 0], forKey: Int64(5).keyBytes, in: db) }
            expectHoardError(.corruptRecord, ["Note[5]", "record format 4 is not one of the formats 1 to 3"]) {
                _ = try notes.get(5)
            }
            // A payload that is valid CBOR with a valid checksum but not a Note.
            let record = RecordHeader(version: 3, writtenAt: 0, expiresAt: nil).record(with: [0x01])
            try store.environment.write { txn in try txn.put(record, forKey: Int64(5).keyBytes, in: db) }
            expectHoardError(.decoding, ["Note[5]", "version 3", "does not decode"]) { _ = try notes.get(5) }
            // Nothing else is affected.
            try notes.put(Note(id: 6, text: "other", stars: 1, pinned: true))
            #expect(try notes.get(6)?.text == "other")
        }
    }

    @Test("a shipped key set that changed is refused when the collection opens")
    func frozenKeySets() throws {
        try withStore { store, _ in
            _ = try store.collection(Note.self)
            expectHoardError(
                .keySetChanged,
                ["TamperedNote", "collection Note", "local key set 1", "'text': key 'BODY' recorded, 'CONTENT' now"]
            ) {
                _ = try store.collection(TamperedNote.self, named: "Note")
            }
            // The same declarations open again without complaint.
            _ = try store.collection(Note.self)
        }
    }

    @Test("a collection recorded with Int IDs refuses code that uses String IDs")
    func keyKindChanged() throws {
        try withStore { store, _ in
            _ = try store.collection(Note.self, named: "things")
            expectHoardError(.keyKindChanged, ["Tag (collection things)", "recorded int IDs", "uses string IDs"]) {
                _ = try store.collection(Tag.self, named: "things")
            }
            #expect(try store.schema(of: "things")?.keyKind == .int)
        }
    }

    @Test("an LMDB environment that is not a Hoard store, and a store of a newer format, are refused untouched")
    func foreignStores() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/plain"
            do {
                let env = try Environment(path: path)
                let db = try env.openDatabase("someone-elses", create: true)
                try env.write { txn in try txn.put([1], forKey: [1], in: db) }
            }
            let before = try fileSize(path + "/data.mdb")
            expectHoardError(.notAHoardStore, ["not a Hoard store", "someone-elses"]) { _ = try Store(path: path) }
            #expect(try fileSize(path + "/data.mdb") == before)
            let env = try Environment(path: path, options: .init(readOnly: true))
            #expect(throws: LMDBError.self) { try env.openDatabase("hoard.meta") }
        }
        try withTemporaryDirectory { dir in
            let path = dir + "/future"
            do {
                let store = try Store(path: path, options: testOptions)
                let meta = try store.environment.openDatabase("hoard.meta")
                try store.environment.write { txn in
                    try txn.put(Array(String(Store.formatVersion + 1).utf8), forKey: Array("format".utf8), in: meta)
                }
            }
            expectHoardError(
                .newerFormat, ["format \(Store.formatVersion + 1)", "reads format \(Store.formatVersion)"]
            ) {
                _ = try Store(path: path)
            }
        }
    }

    @Test("a store whose creation was cut short (an empty meta database, nothing else) opens and is finished")
    func interruptedCreation() throws {
        try withTemporaryDirectory { dir in
            // What code that created the meta database and wrote the format in two transactions
            // left when killed between them.
            let path = dir + "/store"
            do { _ = try Environment(path: path).openDatabase("hoard.meta", create: true) }
            do {
                let readOnly = try Store(path: path, options: .init(readOnly: true))
                #expect(try readOnly.collectionNames().isEmpty)
            }
            let store = try Store(path: path, options: testOptions)
            try store.collection(Note.self).put(Note(id: 1, text: "after all", stars: 1, pinned: false))
            let meta = try store.environment.openDatabase("hoard.meta")
            let format = try store.environment.read { try $0.value(forKey: Array("format".utf8), in: meta) }
            #expect(format == Array("\(Store.formatVersion)".utf8))
        }
        // A meta database with other content but no format is not taken for one.
        try withTemporaryDirectory { dir in
            let path = dir + "/foreign"
            do {
                let env = try Environment(path: path)
                let meta = try env.openDatabase("hoard.meta", create: true)
                try env.write { txn in try txn.put([1], forKey: [1], in: meta) }
            }
            expectHoardError(.notAHoardStore, ["not a Hoard store"]) { _ = try Store(path: path) }
        }
    }

    @Test("what LMDB reports reaches the caller as HoardError.storage, from opening as from reads and writes")
    func storageFailures() throws {
        try withTemporaryDirectory { dir in
            let file = dir + "/a-file"
            #expect(FileManager.default.createFile(atPath: file, contents: Data([1, 2, 3])))
            do {
                _ = try Store(path: file)
                Issue.record("a file opened as a store")
            } catch {
                #expect((error as? HoardError)?.storageKind == .notADirectory, "\(error)")
                #expect("\(error)".contains(file), "\(error)")
            }

            let path = dir + "/store"
            do {
                let store = try Store(path: path, options: testOptions)
                try store.collection(Note.self).put(Note(id: 1, text: "one", stars: 1, pinned: false))
            }
            let readOnly = try Store(path: path, options: .init(readOnly: true))
            let notes = try readOnly.collection(Note.self)
            #expect(try notes.get(1)?.text == "one")
            do {
                try notes.put(Note(id: 2, text: "two", stars: 2, pinned: false))
                Issue.record("a put into a read-only store succeeded")
            } catch {
                #expect((error as? HoardError)?.storageKind == .permissionDenied, "\(error)")
            }
            // A collection the read-only store has never held: LMDB has no such database.
            do {
                _ = try readOnly.collection(Tag.self)
                Issue.record("a read-only store opened a collection it does not hold")
            } catch {
                #expect((error as? HoardError)?.storageKind == .notFound, "\(error)")
                #expect("\(error)".contains("c:Tag"), "\(error)")
            }
        }
    }
}

/// Note as the previous app version declared it: only versions 1 and 2.
struct NoteBeforeVersion3: VariablyCodable, Identifiable {
    var id: Int64
    var text: String
    var stars: String
    static let keySets = KeySets<NoteBeforeVersion3>(local: [
        1: [\.id: "ID", \.text: "BODY", \.stars: "STARS"],
        2: [\.id: "ID", \.text: "TEXT", \.stars: "STARS"],
    ])
    init(from container: DecodingContainer<NoteBeforeVersion3>) throws {
        id = try container.decodeValue(for: \.id)
        text = try container.decodeValue(for: \.text)
        stars = try container.decodeValue(for: \.stars)
    }
    func encode(to container: inout EncodingContainer<NoteBeforeVersion3>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(text, for: \.text)
        try container.encodeValue(stars, for: \.stars)
    }
}

@Suite("Rollback")
struct RollbackTests {
    @Test("older code opens a collection newer code wrote: allowed, newer records reported one by one")
    func olderCodeOpensNewerCollection() throws {
        try withStore { store, _ in
            try store.collection(Note.self).put(Note(id: 1, text: "v3", stars: 1, pinned: true))
            try writeRecord(Note(id: 2, text: "v2", stars: 2, pinned: false), version: 2, in: store)
            let old = try store.collection(NoteBeforeVersion3.self, named: "Note")
            #expect(try old.get(2)?.text == "v2")
            expectHoardError(.newerRecord, ["Note[1]", "version 3", "current version 2"]) { _ = try old.get(1) }
        }
    }
}
