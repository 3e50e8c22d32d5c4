@_spi(LMDB) import Hoard
import HoardTestSupport
import LMDB
import TestSupport
import Testing

@Suite("Closing a store")
struct StoreCloseTests {
    @Test("open, write, close and open the same path again: 100 times in a row, every write kept")
    func reopen() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/store"
            for round in 0..<100 {
                let store = try Store(path: path, options: testOptions)
                let notes = try store.collection(Note.self)
                #expect(try notes.count() == round)
                try notes.put(Note(id: Int64(round), text: "round \(round)", stars: round, pinned: false))
                store.close()
                // The handles outlive the close; the path is free all the same.
                _ = notes
            }
            let store = try Store(path: path, options: testOptions)
            #expect(try store.collection(Note.self).count() == 100)
            store.close()
        }
    }

    @Test("a use after close throws the storage failure closed, naming the path; a second close does nothing")
    func useAfterClose() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/store"
            let store = try Store(path: path, options: testOptions)
            let notes = try store.collection(Note.self)
            try await notes.put(Note(id: 1, text: "one", stars: 1, pinned: false))
            store.close()
            store.close()
            func expectClosed(_ what: String, _ body: () throws -> Void) {
                do {
                    try body()
                    Issue.record("\(what) after close did not throw")
                } catch let error as HoardError {
                    #expect(error.storageKind == .closed && error.description.contains(path), "\(what): \(error)")
                } catch {
                    Issue.record("\(what) after close threw \(error), not HoardError.storage closed")
                }
            }
            expectClosed("a get") { _ = try notes.get(1) }
            expectClosed("a put") {
                try synchronously { try notes.put(Note(id: 2, text: "two", stars: 2, pinned: false)) }
            }
            expectClosed("a scan") { _ = try notes.scan() }
            expectClosed("a read transaction") { try store.read { _ in } }
            do {
                try await notes.put(Note(id: 3, text: "three", stars: 3, pinned: false))
                Issue.record("an async put after close did not throw")
            } catch let error as HoardError {
                #expect(error.storageKind == .closed)
            }
            let reopened = try Store(path: path, options: testOptions)
            #expect(try reopened.collection(Note.self).get(1)?.text == "one")
            reopened.close()
        }
    }

    @Test("async writes racing a close: each committed write is kept, each other fails with closed")
    func writesRacingClose() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/store"
            let store = try Store(path: path, options: testOptions)
            let notes = try store.collection(Note.self)
            let outcomes = await withTaskGroup(of: (Int64, Bool).self) { group in
                for id in Int64(0)..<200 {
                    group.addTask {
                        do {
                            try await notes.put(Note(id: id, text: "\(id)", stars: 0, pinned: false))
                            return (id, true)
                        } catch let error as HoardError where error.storageKind == .closed {
                            return (id, false)
                        } catch {
                            Issue.record("put \(id) threw \(error)")
                            return (id, false)
                        }
                    }
                    if id == 100 {
                        group.addTask {
                            store.close(); return (-1, true)
                        }
                    }
                }
                var outcomes: [Int64: Bool] = [:]
                for await (id, committed) in group where id >= 0 { outcomes[id] = committed }
                return outcomes
            }
            store.close()
            let reopened = try Store(path: path, options: testOptions)
            let kept = try reopened.collection(Note.self)
            for (id, committed) in outcomes {
                #expect((try kept.get(id) != nil) == committed, "note \(id): committed \(committed)")
            }
            reopened.close()
        }
    }

    @Test("a subscriber's sequence of changes ends when the store closes")
    func subscribersEnd() async throws {
        try await withTemporaryDirectory { directory in
            let store = try Store(path: directory + "/store", options: testOptions)
            let notes = try store.collection(Note.self)
            var changes = notes.changes().makeAsyncIterator()
            try await notes.put(Note(id: 1, text: "one", stars: 1, pinned: false))
            #expect(try await nextBatch(&changes).records == [1: .stored])
            store.close()
            #expect(await changes.next() == nil)
        }
    }
}
