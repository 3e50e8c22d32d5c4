import Foundation
@_spi(LMDB) import Hoard
import HoardTestSupport
import LMDB
import Testing

/// Records written by earlier versions, kept as bytes under Tests/Fixtures (made once by
/// tools/interop/make_fixtures.py from docs/FORMAT.md, never regenerated): today's code must
/// read them. This is how "readable forever" survives changes of the format and of the code.
@Suite("Golden fixtures")
struct FixtureTests {
    struct Fixture: Decodable {
        struct Expected: Decodable { var id: Int64; var text: String; var stars: Int; var pinned: Bool }
        var version: Int
        var id: Int64
        var record: String
        var expected: Expected
    }

    @Test("records written by versions 1, 2 and 3 read under today's code")
    func readsEveryVersion() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/note-records.json")
        let fixtures = try JSONDecoder().decode([Fixture].self, from: Data(contentsOf: url))
        #expect(Set(fixtures.map(\.version)) == [1, 2, 3])
        for fixture in fixtures {
            try withStore { store, _ in
                let notes = try store.collection(Note.self)
                let bytes = stride(from: 0, to: fixture.record.count, by: 2).map { i -> UInt8 in
                    let start = fixture.record.index(fixture.record.startIndex, offsetBy: i)
                    return UInt8(fixture.record[start..<fixture.record.index(start, offsetBy: 2)], radix: 16)!
                }
                let db = try store.environment.openDatabase("c:Note")
                try store.environment.write { txn in try txn.put(bytes, forKey: fixture.id.keyBytes, in: db) }
                let expected = Note(
                    id: fixture.expected.id, text: fixture.expected.text, stars: fixture.expected.stars,
                    pinned: fixture.expected.pinned)
                #expect(try notes.get(fixture.id) == expected, "version \(fixture.version), id \(fixture.id)")
                #expect(try notes.header(of: fixture.id)?.version == fixture.version)
                #expect(try notes.header(of: fixture.id)?.writtenAt == 1_600_000_000_000 + Int64(fixture.version))
            }
        }
    }
}
