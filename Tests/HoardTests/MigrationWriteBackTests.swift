import CBOR
import Foundation
@_spi(LMDB) import Hoard
import HoardTestSupport
import LMDB
import TestSupport
import Testing
import VariableCoding

/// The bytes a current-version record of `note` holds after its header.
func currentPayload(_ note: Note) throws -> [UInt8] {
    try CBOREncoder(deterministic: true, userInfo: [.keySet: KeySetID.currentLocal]).encode(note)
}

func storedRecord(_ id: Int64, in store: Store) throws -> [UInt8]? {
    let db = try store.environment.openDatabase("c:Note")
    return try store.environment.read { txn in try txn.value(forKey: id.keyBytes, in: db) }
}

@Suite("Writing migrated records back")
struct MigrationWriteBackTests {
    static let old = [
        Note(id: 1, text: "one", stars: 1, pinned: false),
        Note(id: 2, text: "two", stars: 2, pinned: false),
    ]

    @Test("never: records stay in their version however often they are read")
    func never() throws {
        try withStore { store, _ in
            let notes = try store.collection(Note.self, migration: .never)
            for note in Self.old { try writeRecord(note, version: 1, in: store) }
            _ = try notes.scan()
            try notes.put(Note(id: 3, text: "three", stars: 3, pinned: true))
            #expect(try notes.flushMigrations() == 0)
            #expect(try notes.header(of: 1)?.version == 1)
        }
    }

    @Test("lazy: records read in an older version are rewritten by the next write, bytes checked")
    func lazy() throws {
        try withStore { store, _ in
            let notes = try store.collection(Note.self, migration: .lazy)
            for note in Self.old { try writeRecord(note, version: 1, in: store) }
            let before = try #require(try storedRecord(1, in: store))
            #expect(try notes.get(1) == Self.old[0])
            #expect(try notes.header(of: 1)?.version == 1)  // reading does not write
            #expect(try storedRecord(1, in: store) == before)

            try notes.put(Note(id: 3, text: "three", stars: 3, pinned: true))  // the next write
            let after = try #require(try storedRecord(1, in: store))
            let header = try #require(try notes.header(of: 1))
            #expect(header.version == 3)
            #expect(header.writtenAt == 42)  // the write time of the content is kept
            #expect(try namedPayload(of: after, collection: "Note", in: store) == (try currentPayload(Self.old[0])))
            #expect(try notes.get(1) == Self.old[0])
            // Record 2 was never read: still version 1 until read and flushed.
            #expect(try notes.header(of: 2)?.version == 1)
            _ = try notes.get(2)
            #expect(try notes.flushMigrations() == 1)
            #expect(try notes.header(of: 2)?.version == 3)
        }
    }

    @Test("lazy: handles of one collection share what a read remembered; another handle's write rewrites it")
    func lazySharedBetweenHandles() throws {
        try withStore { store, _ in
            let reader = try store.collection(Note.self, migration: .lazy)
            let writer = try store.collection(Note.self)
            for note in Self.old { try writeRecord(note, version: 1, in: store) }
            #expect(try reader.get(1) == Self.old[0])
            #expect(try writer.header(of: 1)?.version == 1)
            try writer.put(Note(id: 3, text: "three", stars: 3, pinned: true))
            #expect(try writer.header(of: 1)?.version == 3)
            #expect(try writer.header(of: 2)?.version == 1)  // never read: not remembered
            // Remembered once, rewritten once: a later flush by either handle finds nothing.
            #expect(try reader.flushMigrations() == 0)
        }
    }

    @Test("eager migrate() in batches, stopped after the first and resumed from its checkpoint")
    func eager() throws {
        try withStore { store, _ in
            let notes = try store.collection(Note.self)
            let all = (1...2_500).map { Note(id: Int64($0), text: "n\($0)", stars: $0 % 6, pinned: false) }
            let db = try store.environment.openDatabase("c:Note")
            try store.environment.write { txn in
                for note in all {
                    let version = note.id % 3 == 0 ? 3 : Int(note.id % 2) + 1  // a mix of versions 1, 2, 3
                    let payload = try CBOREncoder(deterministic: true, userInfo: [.keySet: KeySetID.local(version)])
                        .encode(note)
                    // Some in format 2, as code before numbered keys wrote them.
                    try txn.put(
                        makeRecord(
                            RecordHeader(version: version, writtenAt: 7, expiresAt: nil), payload: payload,
                            of: Note.self, numbered: note.id % 5 != 0 || version == 3),
                        forKey: note.id.keyBytes, in: db)
                }
            }
            try writeRecord(Note(id: 3_000, text: "future", stars: 1, pinned: false), version: 9, in: store)
            let oldCount = all.filter { $0.id % 3 != 0 }.count

            var calls = 0
            let first = try notes.migrate(batchSize: 1_000) { _ in
                calls += 1
                return false  // stop after the first batch, as a killed process would
            }
            #expect(calls == 1 && first.scanned == 1_000 && !first.finished)
            let second = try notes.migrate(batchSize: 1_000)
            #expect(second.finished)
            #expect(second.scanned == 1_501)  // resumed after the checkpoint, not from the start
            #expect(first.migrated + second.migrated == oldCount)
            #expect(second.failed == 1)  // the record from version 9 is left alone
            for note in all {
                #expect(try notes.header(of: note.id)?.version == 3)
                #expect(
                    try namedPayload(
                        of: try #require(try storedRecord(note.id, in: store)), collection: "Note", in: store)
                        == (try currentPayload(note)))
            }
            #expect(try notes.header(of: 3_000)?.version == 9)
            // Nothing left to do; a new run starts from the beginning and migrates nothing.
            let third = try notes.migrate(batchSize: 1_000)
            #expect(third.migrated == 0 && third.scanned == 2_501 && third.finished)
        }
    }
}
