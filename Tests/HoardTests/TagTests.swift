import Foundation
@_spi(LMDB) @testable import Hoard
import HoardTestSupport
import LMDB
import TestSupport
import Testing

/// Tags: the index beside the records, invalidation by tag and of a whole collection, locally and
/// across replicas.
@Suite struct TagTests {
    static func note(_ id: Int64, _ text: String = "t") -> Note { Note(id: id, text: text, stars: 1, pinned: false) }

    /// What the index says that the records do not (empty: they agree).
    static func indexProblems(_ notes: HoardCollection<Note>) throws -> [String] {
        let store = notes.store
        let tags = try #require(store.tags)
        return try store.environment.read { txn in
            try TagIndex(database: tags, collection: notes.name, maxKeySize: store.environment.maxKeySize).problems(
                records: notes.database, keyKind: .int, in: txn)
        }
    }

    static func format(_ store: Store) throws -> String? {
        let meta = try #require(store.meta)
        return try store.environment.read { txn in
            try txn.value(forKey: Array("format".utf8), in: meta).map { String(decoding: $0, as: UTF8.self) }
        }
    }

    @Test("a put with tags records them; a put without leaves them; tags: [] removes them")
    func putsKeepTags() async throws {
        try await withTemporaryStore { store in
            let notes = try store.collection(Note.self)
            try await notes.put(Self.note(1), tags: ["team:7", "catalog", "team:7"])
            try await notes.put(Self.note(2), tags: ["team:7"])
            try await notes.put(Self.note(3))
            #expect(try notes.tags(of: 1) == ["catalog", "team:7"])
            #expect(try notes.ids(taggedWith: "team:7") == [1, 2])
            #expect(try notes.ids(taggedWith: "catalog") == [1])
            #expect(try notes.tags(of: 3).isEmpty)

            try await notes.put(Self.note(1, "changed"))
            #expect(try notes.tags(of: 1) == ["catalog", "team:7"], "a put without tags keeps them")
            try await notes.put(Self.note(1), tags: ["catalog"])
            #expect(try notes.ids(taggedWith: "team:7") == [2])
            try await notes.put(Self.note(1), tags: [])
            #expect(try notes.tags(of: 1).isEmpty)
            #expect(try notes.ids(taggedWith: "catalog").isEmpty)
            #expect(try Self.indexProblems(notes).isEmpty)
        }
    }

    @Test("tags compare in NFC, as Swift's strings do: a precomposed é and e + U+0301 are one tag")
    func tagsCompareInNFC() throws {
        try withTemporaryStore { store in
            let notes = try store.collection(Note.self)
            let (composed, decomposed) = ("caf\u{E9}", "cafe\u{301}")
            #expect(composed == decomposed && Array(composed.utf8) != Array(decomposed.utf8))
            try notes.put(Self.note(1), tags: [composed, decomposed])
            try notes.put(Self.note(2), tags: [decomposed])
            #expect(try notes.tags(of: 1).map { Array($0.utf8) } == [Array(composed.utf8)], "one tag, in NFC's bytes")
            #expect(try notes.ids(taggedWith: composed) == [1, 2])
            #expect(try notes.ids(taggedWith: decomposed) == [1, 2])
            #expect(try notes.invalidate(tag: decomposed) == 2)
            #expect(try notes.count() == 0)
            #expect(try Self.indexProblems(notes).isEmpty)
        }
    }

    @Test("an empty tag or one over 128 bytes is refused by name, and nothing of the put is stored")
    func invalidTags() throws {
        try withTemporaryStore { store in
            let notes = try store.collection(Note.self)
            for bad in ["", String(repeating: "x", count: 129)] {
                let error = #expect(throws: HoardError.self) { try notes.put(Self.note(1), tags: ["ok", bad]) }
                #expect(error?.kind == .invalidTag)
                #expect(error?.description.contains("Note: invalid tag") == true, "\(String(describing: error))")
            }
            #expect(try notes.get(1) == nil)
            // A long key and a long tag that do not fit in one index entry together.
            let tagged = try store.collection(Tag.self)
            let long = String(repeating: "k", count: 450)
            let error = #expect(throws: HoardError.self) {
                try tagged.put(Tag(id: long, uses: 1), tags: [String(repeating: "t", count: 100)])
            }
            #expect(error?.kind == .invalidTag, "\(String(describing: error))")
            #expect(error?.description.contains("more than the 511 LMDB allows") == true)
            #expect(try tagged.get(long) == nil)
        }
    }

    @Test("a store of an older format stays so when read, and becomes the current format when opened to write")
    func olderFormatsOpen() async throws {
        for older in 1..<Store.formatVersion {
            try await withTemporaryDirectory { directory in
                let path = directory + "/store"
                do {
                    let store = try Store(path: path, options: .testing())
                    #expect(try Self.format(store) == "\(Store.formatVersion)", "a new store")
                    try await store.collection(Note.self).put(Self.note(2), tags: ["a"])
                    let meta = try #require(store.meta)
                    try store.environment.write { txn in
                        try txn.put(Array("\(older)".utf8), forKey: Array("format".utf8), in: meta)
                    }
                }
                do {
                    let reader = try Store(path: path, options: Store.Options(readOnly: true))
                    #expect(try reader.collection(Note.self).ids(taggedWith: "a") == [2])
                    #expect(try Self.format(reader) == "\(older)", "a read-only open changes nothing")
                }
                let writer = try Store(path: path, options: .testing())
                #expect(try Self.format(writer) == "\(Store.formatVersion)", "from format \(older)")
                #expect(try writer.collection(Note.self).ids(taggedWith: "a") == [2])
            }
        }
    }

    @Test("invalidate(tag:) removes exactly the records that carry the tag, and their other tags' entries")
    func invalidateByTag() async throws {
        try await withTemporaryStore { store in
            let notes = try store.collection(Note.self)
            for id in Int64(0)..<100 {
                try await notes.put(Self.note(id), tags: id % 2 == 0 ? ["even", "all"] : ["all"])
            }
            #expect(try await notes.invalidate(tag: "even") == 50)
            #expect(try notes.count() == 50)
            #expect(try notes.ids(taggedWith: "even").isEmpty)
            #expect(try notes.ids(taggedWith: "all") == (0..<50).map { Int64($0 * 2 + 1) })
            #expect(try Self.indexProblems(notes).isEmpty)
            #expect(notes.statistics().tagInvalidations == 1)
            #expect(notes.statistics().removed.invalidated == 50)
            #expect(try await notes.invalidate(tag: "nothing has it") == 0)
            // A tag no record can carry is refused, and nothing enters the outbox for it.
            let pending = try store.replication.pendingCount()
            await #expect(throws: HoardError.self) { try await notes.invalidate(tag: "") }
            #expect(try store.replication.pendingCount() == pending)
        }
    }

    @Test(
        "every path that removes records removes their tags: delete, eviction, purge, synchronize, a replica's change, deleteAll"
    )
    func removalsKeepTheIndex() async throws {
        let clock = ManualClock()
        try await withTemporaryStore(options: .testing(clock: clock)) { store in
            let notes = try store.collection(Note.self)
            for id in Int64(0)..<20 { try await notes.put(Self.note(id), tags: ["t"]) }
            try await notes.delete(0)
            try await notes.delete(1)
            // Expired, then purged.
            try await notes.put(Self.note(2), expiry: .after(.seconds(1)))
            clock.advance(by: .seconds(2))
            #expect(try await notes.purgeExpired() == 1)
            // Synchronize with records 3 to 9 gone from the server.
            try await notes.synchronize(with: (10..<20).map { Self.note($0) }, scope: .all)
            #expect(try notes.ids(taggedWith: "t") == Array(10..<20))
            // A replica's change.
            let change = RemoteChange(origin: UUID(), collection: "Note", keys: [Int64(10).keyBytes])
            try await store.replication.apply([change], through: BusPosition(log: "l", sequence: 1), bus: "b")
            #expect(try notes.ids(taggedWith: "t") == Array(11..<20))
            #expect(try Self.indexProblems(notes).isEmpty)

            // Eviction: a bound of 5 records.
            let bounded = try store.collection(Note.self, named: "bounded", capacity: .records(5))
            for id in Int64(0)..<20 { try await bounded.put(Self.note(id), tags: ["t"]) }
            #expect(try bounded.count() == 5)
            #expect(try bounded.ids(taggedWith: "t").count == 5)
            #expect(try Self.indexProblems(bounded).isEmpty)
            let bytes = try store.collection(Note.self, named: "bytes", capacity: .bytes(400))
            for id in Int64(0)..<20 { try await bytes.put(Self.note(id), tags: ["t", "u"]) }
            #expect(try bytes.ids(taggedWith: "u").count == bytes.count())
            #expect(try Self.indexProblems(bytes).isEmpty)

            try await notes.deleteAll()
            #expect(try notes.ids(taggedWith: "t").isEmpty)
            #expect(try Self.indexProblems(notes).isEmpty)
            #expect(try bounded.ids(taggedWith: "t").count == 5, "another collection's tags stay")
        }
    }

    @Test("the index check finds a tag entry without its record, and a record entry without its tag entries")
    func theCheckFindsDamage() async throws {
        try await withTemporaryStore { store in
            let notes = try store.collection(Note.self)
            try await notes.put(Self.note(1), tags: ["a", "b"])
            try await notes.put(Self.note(2), tags: ["a"])
            let index = TagIndex(
                database: try #require(store.tags), collection: "Note", maxKeySize: store.environment.maxKeySize)
            try store.environment.write { txn in
                // Record 2 removed behind the index's back, and record 1's entry under tag b.
                _ = try txn.delete(Int64(2).keyBytes, in: notes.database)
                _ = try txn.delete(index.entries(of: Array("b".utf8)) + Int64(1).keyBytes, in: index.database)
            }
            let problems = try Self.indexProblems(notes)
            #expect(problems.count == 2, "\(problems)")
            #expect(problems.contains { $0.contains("has tags but no record") })
            #expect(problems.contains { $0.contains("lists tag b") })
        }
    }

    @Test("a tag and a clear travel to the other replica, which removes its own records of them")
    func tagsAcrossReplicas() async throws {
        try await ReplicationTests.withReplicas { a, b, log in
            let (notesA, notesB) = (try a.collection(Note.self), try b.collection(Note.self))
            let (busA, busB) = (InMemoryBus(store: a, log: log), InMemoryBus(store: b, log: log))
            try await busA.catchUp()
            try await busB.catchUp()
            for id in Int64(0)..<10 {
                try await notesB.put(Self.note(id), tags: id < 4 ? ["team:1"] : ["team:2"])
            }
            let other = try b.collection(Note.self, named: "other")
            try await other.put(Self.note(1))
            #expect(try await notesA.invalidate(tag: "team:1") == 0, "A holds none of them")
            let pending = try a.replication.pendingAnnouncements()
            #expect(
                pending.changes == [
                    RemoteChange(origin: try a.replication.identity(), collection: "Note", keys: [], tags: ["team:1"])
                ])
            try await busA.publish()
            #expect(try await busB.catchUp().removed == 4)
            #expect(try notesB.ids(taggedWith: "team:1").isEmpty)
            #expect(try notesB.count() == 6)

            try await a.collection(Note.self, named: "other").put(Self.note(5))
            #expect(try await a.collection(Note.self, named: "other").invalidateAll() == 1)
            try await busA.publish()
            #expect(try await busB.catchUp().removed == 1)
            #expect(try other.count() == 0)
            #expect(try notesB.count() == 6, "a clear removes one collection")
            #expect(try Self.indexProblems(notesB).isEmpty)
        }
    }

    @Test(
        "a fetch under way for a record of an invalidated tag, or of a cleared collection, does not store its result",
        arguments: [false, true])
    func fetchOverlappingATagInvalidation(clearing: Bool) async throws {
        try await withTemporaryStore { store in
            let notes = try store.collection(Note.self)
            try await notes.put(Self.note(9, "v0"), tags: ["t"])
            try await notes.put(Self.note(9, "v0"), expiry: .at(Date(timeIntervalSince1970: 1)))
            let upstream = FakeUpstream()
            let read = Task { try await notes.get(9, orFetch: { try await upstream.fetchOne($0) }) }
            try await eventually("the fetch has started") { await upstream.calls.count == 1 }
            if clearing {
                #expect(try await notes.invalidateAll() == 1)
            } else {
                #expect(try await notes.invalidate(tag: "t") == 1)
            }
            await upstream.release()
            #expect(try await read.value?.text == "v1", "the waiter gets what was fetched")
            try await eventually("the fetch has ended") { notes.statistics().fetchesInFlight == 0 }
            #expect(try notes.get(9) == nil, "a fill that began before the invalidation was stored")
            #expect(store.replication.discardedFills == 1)
        }
    }

    @Test("a get that begins after a tag invalidation does not join a fetch that began before it")
    func noJoinAcrossATagInvalidation() async throws {
        try await withTemporaryStore { store in
            let notes = try store.collection(Note.self)
            let upstream = FakeUpstream()
            let tagged: @Sendable (Int64, Note?) async throws -> Revalidation<Note> = { id, _ in
                guard let note = try await upstream.fetchOne(id) else { return .absent }
                return .model(note, tags: ["team:\(id % 2)"])
            }
            let before = Task { try await notes.get(3, orRevalidate: tagged) }
            try await eventually("the first fetch has started") { await upstream.calls.count == 1 }
            // Nothing carries the tag yet; the fetch under way may still answer with it.
            #expect(try await notes.invalidate(tag: "team:1") == 0)
            let after = Task { try await notes.get(3, orRevalidate: tagged) }
            try await eventually("the later get fetches on its own") { await upstream.calls.count == 2 }
            await upstream.release()
            #expect(try await before.value?.text == "v1")
            #expect(try await after.value?.text == "v1")
            try await eventually("the fetches have ended") { notes.statistics().fetchesInFlight == 0 }
            #expect(store.replication.discardedFills == 1, "the first fill predates the invalidation")
            #expect(try notes.tags(of: 3) == ["team:1"], "the later one is stored")
        }
    }

    @Test(
        "a revalidating fetch names its record's tags; one under way when a tag it names is invalidated stores nothing")
    func fillsNameTags() async throws {
        try await withTemporaryStore { store in
            let notes = try store.collection(Note.self)
            let upstream = FakeUpstream(open: true)
            let tagged: @Sendable (Int64, Note?) async throws -> Revalidation<Note> = { id, _ in
                guard let note = try await upstream.fetchOne(id) else { return .absent }
                return .model(note, tags: ["team:\(id % 2)"])
            }
            #expect(try await notes.get(1, orRevalidate: tagged)?.text == "v1")
            #expect(try notes.tags(of: 1) == ["team:1"])

            // A fetch for 3, not stored before, is under way when its answer's tag is invalidated.
            await upstream.close()
            let read = Task { try await notes.get(3, orRevalidate: tagged) }
            try await eventually("the fetch has started") { await upstream.calls.count == 2 }
            #expect(try await notes.invalidate(tag: "team:1") == 1)
            await upstream.release()
            #expect(try await read.value?.text == "v1", "the waiter gets what was fetched")
            try await eventually("the fetch has ended") { notes.statistics().fetchesInFlight == 0 }
            #expect(try notes.get(3) == nil)
            #expect(store.replication.discardedFills == 1)
            // A fetch that begins after it stores its answer, tags and all.
            #expect(try await notes.get(3, orRevalidate: tagged) != nil)
            #expect(try notes.ids(taggedWith: "team:1") == [3])
            #expect(try Self.indexProblems(notes).isEmpty)
        }
    }

    @Test("hoard: get shows a record's tags, tags counts records by tag, verify finds a damaged index")
    func theCLIShowsTags() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/store"
            do {
                let store = try Store(path: path, options: .testing())
                let notes = try store.collection(Note.self)
                for id in Int64(1)...3 { try notes.put(Self.note(id), tags: id == 1 ? ["a", "b"] : ["b"]) }
            }
            let get = try hoard("get", path, "Note", "1")
            #expect(get.status == 0 && get.stdout.contains("tags      a, b"), "\(get.stdout)\(get.stderr)")
            let json = try jsonObject(try hoard("get", path, "Note", "2", "--json").stdout)
            #expect(json["tags"] as? [String] == ["b"])
            let counts = try hoard("tags", path, "Note", "--json")
            #expect(counts.status == 0, "\(counts.stderr)")
            let rows = try JSONSerialization.jsonObject(with: Data(counts.stdout.utf8)) as? [[String: Any]]
            #expect(rows?.map { "\($0["tag"] ?? "")=\($0["records"] ?? "")" } == ["a=1", "b=3"])
            #expect(try hoard("stat", path).stdout.contains("(format \(Store.formatVersion))"))
            #expect(try hoard("verify", path).status == 0)

            do {
                let store = try Store(path: path, options: .testing())
                let notes = try store.collection(Note.self)
                try store.environment.write { txn in _ = try txn.delete(Int64(3).keyBytes, in: notes.database) }
            }
            let verify = try hoard("verify", path)
            #expect(verify.status == 1)
            #expect(verify.stdout.contains("Note[-]: tag index: key 3 has tags but no record"), "\(verify.stdout)")
        }
    }

    @Test("hoard rm and hoard purge-expired remove the records' tags with them: verify finds the index whole")
    func theCLIKeepsTheIndex() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/store"
            let clock = ManualClock()
            do {
                let store = try Store(path: path, options: .testing(clock: clock))
                let notes = try store.collection(Note.self)
                try notes.put(Self.note(1), tags: ["a"])
                // Expired long ago by the system clock the tool reads.
                try notes.put(Self.note(2), expiry: .at(Date(timeIntervalSince1970: 1)), tags: ["b"])
                try notes.put(Self.note(3), tags: ["b"])
            }
            let removed = try hoard("rm", path, "Note", "1")
            #expect(removed.status == 0, "\(removed.stderr)")
            let purged = try hoard("purge-expired", path)
            #expect(purged.status == 0 && purged.stdout.contains("purged 1"), "\(purged.stdout)\(purged.stderr)")
            let verify = try hoard("verify", path)
            #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
            let store = try Store(path: path, options: .testing(clock: clock))
            let notes = try store.collection(Note.self)
            #expect(try notes.tags(of: 1).isEmpty && notes.tags(of: 2).isEmpty)
            #expect(try notes.ids(taggedWith: "b") == [3])
        }
    }
}
