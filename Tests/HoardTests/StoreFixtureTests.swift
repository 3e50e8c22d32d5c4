import Foundation
@_spi(LMDB) import Hoard
import HoardTestSupport
import LMDB
import TestSupport
import Testing

/// Whole stores written by earlier versions of Hoard, kept under Tests/Fixtures (see the README
/// there; never regenerated), each with the same contents: notes in local versions 1 and 3, one
/// expired, one tagged, and a second collection with string IDs. Whatever the format becomes,
/// today's code must open each, read it, migrate it both ways, verify, dump and load it.
@Suite("A store written by an earlier version")
struct StoreFixtureTests {
    /// A fixture: its folder under Tests/Fixtures, and the formats it was written in.
    struct Fixture: Sendable, CustomTestStringConvertible {
        var folder: String
        var storeFormat: Int
        var recordFormat: UInt8
        var testDescription: String { "record format \(recordFormat), store format \(storeFormat)" }
    }
    static let fixtures = [
        Fixture(folder: "record-format-1-store", storeFormat: 2, recordFormat: 1),
        Fixture(folder: "record-format-2-store", storeFormat: 3, recordFormat: 2),
    ]

    static let notes = [
        Note(id: 1, text: "first, in version 1", stars: 2, pinned: false),
        Note(id: 2, text: "second, in version 1", stars: 5, pinned: false),
        Note(id: 3, text: "third", stars: 1, pinned: true),
        Note(id: 4, text: "fourth", stars: 4, pinned: false),
        Note(id: 6, text: "tagged", stars: 3, pinned: true),
    ]
    static let tags = [Tag(id: "lmdb", uses: 7), Tag(id: "swift", uses: 3), Tag(id: "swiftui", uses: 1)]

    /// Runs `body` with a copy of the fixture at `DIR/store` (opening a store writes to it).
    func withFixture<R>(_ fixture: Fixture, _ body: (_ dir: String, _ path: String) throws -> R) throws -> R {
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/\(fixture.folder)/data.mdb")
        let bytes = try [UInt8](Data(contentsOf: fixture))
        return try withTemporaryDirectory { dir in
            try FileManager.default.createDirectory(atPath: dir + "/store", withIntermediateDirectories: false)
            try writeFile(dir + "/store/data.mdb", bytes)
            return try body(dir, dir + "/store")
        }
    }

    @Test("opens and reads every record, its versions, expiry and tags", arguments: fixtures)
    func reads(_ fixture: Fixture) throws {
        try withFixture(fixture) { _, path in
            let store = try Store(path: path, options: testOptions)
            let notes = try store.collection(Note.self, migration: .never)
            for note in Self.notes { #expect(try notes.get(note.id) == note, "note \(note.id)") }
            #expect(try notes.get(-5) == nil, "expired")
            #expect(try notes.header(of: 1)?.version == 1)
            #expect(try notes.header(of: 3)?.version == 3)
            #expect(try notes.header(of: 3)?.recordFormat == fixture.recordFormat)
            #expect(try notes.scan().map(\.id) == Self.notes.map(\.id))
            #expect(try notes.ids(taggedWith: "starred") == [6])
            #expect(try store.collection(Tag.self).scan() == Self.tags)
        }
    }

    @Test("read-only, it keeps its store format; opened to write, it becomes the current one", arguments: fixtures)
    func storeFormat(_ fixture: Fixture) throws {
        try withFixture(fixture) { _, path in
            func format(_ store: Store) throws -> String? {
                let meta = try #require(store.meta)
                return try store.environment.read { txn in
                    try txn.value(forKey: Array("format".utf8), in: meta).map { String(decoding: $0, as: UTF8.self) }
                }
            }
            do {
                let reader = try Store(path: path, options: Store.Options(readOnly: true))
                #expect(try format(reader) == "\(fixture.storeFormat)")
                #expect(try reader.collection(Note.self).get(3) == Self.notes[2])
            }
            let writer = try Store(path: path, options: testOptions)
            #expect(try format(writer) == "\(Store.formatVersion)")
            let header = try writer.collection(Note.self).header(of: 3)
            #expect(header?.recordFormat == fixture.recordFormat, "records are rewritten only by a migration")
        }
    }

    @Test("migrates lazily, at the next write, and eagerly, record by record", arguments: fixtures)
    func migrates(_ fixture: Fixture) throws {
        let old = fixture.recordFormat != RecordHeader.format
        try withFixture(fixture) { _, path in
            let store = try Store(path: path, options: testOptions)
            let notes = try store.collection(Note.self, migration: .lazy)
            #expect(try notes.get(1) == Self.notes[0])
            try notes.put(Note(id: 7, text: "new", stars: 0, pinned: false))
            #expect(try notes.header(of: 1)?.version == 3)
            #expect(try notes.header(of: 1)?.recordFormat == RecordHeader.format)
            #expect(try notes.header(of: 2)?.version == 1, "not read, so not rewritten")
            #expect(try notes.header(of: 2)?.recordFormat == fixture.recordFormat)
            // A record of the current version is read and rewritten too when its record format
            // is old; of the current record format, it is left as it is.
            let current = Self.notes[2]
            #expect(try notes.header(of: current.id)?.version == 3)
            #expect(try notes.header(of: current.id)?.recordFormat == fixture.recordFormat)
            #expect(try notes.get(current.id) == current)
            try notes.put(Note(id: 8, text: "newer", stars: 0, pinned: false))
            #expect(try notes.header(of: current.id)?.recordFormat == RecordHeader.format)
        }
        try withFixture(fixture) { _, path in
            let store = try Store(path: path, options: testOptions)
            let notes = try store.collection(Note.self, migration: .never)
            // Of an old record format, every record is rewritten, of whichever key-set version
            // (the expired one too); of the current one, the two records of version 1 only.
            let stale = old ? try notes.count() : 2
            let progress = try notes.migrate()
            #expect(progress.migrated == stale && progress.failed == 0 && progress.finished, "\(progress)")
            for note in Self.notes {
                #expect(try notes.header(of: note.id)?.version == 3)
                #expect(try notes.header(of: note.id)?.recordFormat == RecordHeader.format)
                #expect(try notes.get(note.id) == note)
            }
        }
    }

    @Test("hoard verify, dump and load handle it, and the loaded store reads the same", arguments: fixtures)
    func cli(_ fixture: Fixture) throws {
        try withFixture(fixture) { dir, path in
            let verify = try hoard("verify", path)
            #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
            let dump = try hoard("dump", path)
            #expect(dump.status == 0, "\(dump.stderr)")
            let load = try hoard("load", dir + "/loaded", input: Array(dump.stdout.utf8))
            #expect(load.status == 0, "\(load.stderr)")
            #expect(try hoard("verify", dir + "/loaded").status == 0)
            #expect(try hoard("dump", dir + "/loaded").stdout == dump.stdout)
            let loaded = try Store(path: dir + "/loaded", options: testOptions)
            let notes = try loaded.collection(Note.self, migration: .never)
            for note in Self.notes { #expect(try notes.get(note.id) == note, "note \(note.id)") }
            #expect(try notes.header(of: 2)?.version == 1)
        }
    }
}
