import Foundation
import Hoard
import HoardTestSupport
import TestSupport
import Testing

@Suite("hoard watch")
struct CLIWatchTests {
    @Test(
        "prints each change another process commits, with IDs when the writer keeps a change log; SIGTERM ends it with status 0"
    )
    func watchLines() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/store"
            let store = try Store(path: path, options: testOptions(changeLog: 100))
            let notes = try store.collection(Note.self)
            let tags = try store.collection(Tag.self)
            let watch = try ChildProcess(try builtExecutable("hoard"), ["watch", path])
            #expect(try watch.readLine()?.hasPrefix("watching Note, Tag in \(path)") == true)

            try notes.put(Note(id: 7, text: "seven", stars: 1, pinned: false))
            let stored = try store.read { $0.id }
            #expect(try watch.readLine() == "\(stored)  Note  stored  7")
            try tags.put(Tag(id: "swift", uses: 1))
            try notes.delete(7)
            let deleted = try store.read { $0.id }
            // Two collections: their lines may come in either order.
            let lines: Set<String?> = [try watch.readLine(), try watch.readLine()]
            #expect(lines == ["\(deleted - 1)  Tag  stored  swift", "\(deleted)  Note  deleted  7"])
            try notes.deleteAll()
            #expect(try watch.readLine() == "\(try store.read { $0.id })  Note  cleared")

            watch.kill(SIGTERM)
            #expect(try watch.readLine() == nil)
            #expect(watch.wait() == 0)
        }
    }

    @Test("--json: one object a change; a writer without a change log gives unknown")
    func watchJSON() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/store"
            let store = try Store(path: path, options: testOptions)
            let notes = try store.collection(Note.self)
            let watch = try ChildProcess(try builtExecutable("hoard"), ["watch", path, "Note", "--json"])
            let ready = try jsonObject(try #require(try watch.readLine()))
            #expect(ready["watching"] as? [String] == ["Note"])

            try notes.put(Note(id: 1, text: "one", stars: 1, pinned: false))
            let transaction = try store.read { $0.id }
            let line = try jsonObject(try #require(try watch.readLine()))
            #expect(line["collection"] as? String == "Note")
            #expect(line["change"] as? String == "unknown")
            #expect(line["origin"] as? String == "other")
            #expect(line["transactions"] as? [Int] == [transaction, transaction])
            watch.kill(SIGTERM)
            #expect(watch.wait() == 0)
        }
    }

    @Test("an unknown collection is a usage error naming the ones there are")
    func unknownCollection() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/store"
            _ = try Store(path: path, options: testOptions).collection(Note.self)
            let result = try hoard("watch", path, "Nope")
            #expect(result.status == 2)
            #expect(result.stderr.contains("no collection 'Nope'"))
            #expect(result.stderr.contains("Note"))
        }
    }
}
