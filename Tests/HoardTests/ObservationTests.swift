@_spi(LMDB) @testable import Hoard
import Foundation
import HoardTestSupport
import LMDB
import MetricsTestKit
import TestSupport
import Testing

/// Takes the next batch of `iterator`, failing the test when the sequence ended.
func nextBatch<ID>(_ iterator: inout ChangeSequence<ID>.Iterator) async throws -> ChangeBatch<ID> {
    guard let batch = await iterator.next() else { throw TestSupportError("the change sequence ended") }
    return batch
}

/// Runs `body` as it is: in async code, its calls are the synchronous ones (a store's writes
/// have both kinds).
func synchronously<R>(_ body: () throws -> R) rethrows -> R { try body() }

/// The last transaction a new read transaction sees.
func lastTransaction(_ store: Store) throws -> Int { try store.read { $0.id } }

extension ChangeBatch.Content {
    var isUnknown: Bool { if case .unknown = self { true } else { false } }
    /// What changed after the collection was emptied, or `nil` when it was not emptied.
    var afterClearing: [ID: ChangeKind]? { if case .cleared(then: let records) = self { records } else { nil } }
}

@Suite("Change observation in this process")
struct ObservationTests {
    @Test("each commit that changes a collection is one batch naming its transaction, records and how each changed")
    func batchesPerCommit() async throws {
        try await withTemporaryDirectory { dir in
            let store = try Store(path: dir + "/store", options: testOptions)
            let notes = try store.collection(Note.self)
            let tags = try store.collection(Tag.self)
            var changes = notes.changes().makeAsyncIterator()

            try await notes.put([
                Note(id: 1, text: "a", stars: 1, pinned: false), Note(id: 2, text: "b", stars: 2, pinned: true),
            ])
            let first = try lastTransaction(store)
            let stored = try await nextBatch(&changes)
            #expect(stored.transactions == first...first)
            #expect(stored.origin == .thisProcess)
            #expect(stored.records == [1: .stored, 2: .stored])

            try await tags.put(Tag(id: "unrelated", uses: 0))  // another collection: no batch here
            try await notes.delete(99)  // nothing to delete: no change
            try await notes.delete(1)
            let second = try lastTransaction(store)
            let deleted = try await nextBatch(&changes)
            #expect(deleted.transactions == second...second)
            #expect(deleted.records == [1: .deleted])

            try await notes.deleteAll()
            let third = try lastTransaction(store)
            let cleared = try await nextBatch(&changes)
            #expect(cleared.transactions == third...third)
            #expect(cleared.content.afterClearing == [:], "deleteAll gave \(cleared.content)")
        }
    }

    @Test("the batch is queued before a synchronous write returns and before a group-commit caller resumes")
    func queuedBeforeReturn() async throws {
        try await withTemporaryDirectory { dir in
            let store = try Store(path: dir + "/store", options: testOptions)
            let notes = try store.collection(Note.self)
            let sequence = notes.changes()
            #expect(!sequence.subscription.subscriber.hasPending)
            try synchronously { try notes.put(Note(id: 1, text: "sync", stars: 0, pinned: false)) }
            #expect(sequence.subscription.subscriber.hasPending)
            var iterator = sequence.makeAsyncIterator()
            _ = try await nextBatch(&iterator)
            #expect(!sequence.subscription.subscriber.hasPending)
            try await notes.put(Note(id: 2, text: "async", stars: 0, pinned: false))
            #expect(sequence.subscription.subscriber.hasPending)
            #expect(try await nextBatch(&iterator).records == [2: .stored])
        }
    }

    @Test("nothing of an aborted transaction, or of a group-commit write undone alone, is delivered")
    func onlyCommitted() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir + "/store"
            let store = try Store(path: path, options: testOptions)
            let notes = try store.collection(Note.self)
            var changes = notes.changes().makeAsyncIterator()

            // A transaction whose body throws after writing.
            await #expect(throws: Refused.self) {
                try await store.write { txn in
                    try notes.put(Note(id: 1, text: "aborted", stars: 0, pinned: false), in: txn)
                    throw Refused(index: 1)
                }
            }
            // A nested transaction undone inside one that commits.
            try await store.write { txn in
                try notes.put(Note(id: 2, text: "kept", stars: 0, pinned: false), in: txn)
                _ = try? txn.nested { inner in
                    try notes.put(Note(id: 3, text: "undone", stars: 0, pinned: false), in: inner)
                    throw Refused(index: 3)
                }
            }
            #expect(try await nextBatch(&changes).records == [2: .stored])

            // Group commit: queued writes, one of which throws after writing.
            let outcomes = try await queuedWrites(8, store: store, path: path) { i in
                if i == 5 {
                    try await store.write { txn in
                        try notes.put(Note(id: 100 + Int64(i), text: "undone", stars: 0, pinned: false), in: txn)
                        throw Refused(index: i)
                    }
                } else {
                    try await notes.put(Note(id: 100 + Int64(i), text: "kept", stars: 0, pinned: false))
                }
            }
            #expect(outcomes.filter { if case .failure = $0 { true } else { false } }.count == 1)
            var seen: [Int64: ChangeKind] = [:]
            while seen.count < 7 {
                let batch = try await nextBatch(&changes)
                for (id, kind) in batch.records {
                    #expect(seen[id] == nil, "note \(id) delivered twice")
                    seen[id] = kind
                }
            }
            let kept: Set<Int64> = [100, 101, 102, 103, 104, 106, 107]
            #expect(Set(seen.keys) == kept)
            // A sentinel: anything left of the undone write would come before it.
            try await notes.put(Note(id: 999, text: "sentinel", stars: 0, pinned: false))
            #expect(try await nextBatch(&changes).records == [999: .stored])
        }
    }

    @Test("a write that LMDB runs again after growing the map is delivered once, with what the last attempt wrote")
    func mapGrowthDeliversOnce() async throws {
        try await withTemporaryDirectory { dir in
            let store = try Store(path: dir + "/store", options: testOptions)
            let notes = try store.collection(Note.self)
            var changes = notes.changes().makeAsyncIterator()
            let mapBefore = try store.environment.info().mapSize
            // More than the initial map holds, in one transaction.
            let text = String(repeating: "x", count: 4_000)
            let models = (0..<Int64(6_000)).map { Note(id: $0, text: text, stars: 0, pinned: false) }
            try await notes.put(models)
            #expect(try store.environment.info().mapSize > mapBefore)
            let batch = try await nextBatch(&changes)
            #expect(batch.records.count == 6_000)
            #expect(batch.records.values.allSatisfy { $0 == .stored })
            try await notes.put(Note(id: -1, text: "sentinel", stars: 0, pinned: false))
            #expect(try await nextBatch(&changes).records == [-1: .stored])
        }
    }

    @Test("evictions and purges are reported as such")
    func evictionsAndPurges() async throws {
        try await withTemporaryDirectory { dir in
            let clock = ManualClock()
            let store = try Store(path: dir + "/store", options: .testing(clock: clock))
            let bounded = try store.collection(Note.self, capacity: Capacity(records: 4))
            let expiring = try store.collection(Tag.self)
            var evicted = bounded.changes().makeAsyncIterator()
            var purged = expiring.changes().makeAsyncIterator()

            var kinds: [ChangeKind: Int] = [:]
            for id in 0..<Int64(10) {
                try await bounded.put(Note(id: id, text: "n", stars: 0, pinned: false))
                for kind in try await nextBatch(&evicted).records.values { kinds[kind, default: 0] += 1 }
            }
            #expect(kinds == [.stored: 10, .evicted: 6])
            #expect(try bounded.count() == 4)

            try await expiring.put(Tag(id: "soon", uses: 1), expiry: .after(.seconds(1)))
            _ = try await nextBatch(&purged)
            clock.advance(by: .seconds(2))
            #expect(try await expiring.purgeExpired() == 1)
            #expect(try await nextBatch(&purged).records == ["soon": .purged])
        }
    }

    @Test("a lagging subscriber gets one merged batch, each ID with its last change; past its limit, unknown")
    func laggingMerges() async throws {
        try await withTemporaryDirectory { dir in
            let store = try Store(path: dir + "/store", options: testOptions)
            let notes = try store.collection(Note.self)
            var roomy = notes.changes(limit: 1_000).makeAsyncIterator()
            var tight = notes.changes(limit: 10).makeAsyncIterator()
            let before = try lastTransaction(store)
            for i in 0..<Int64(50) {
                try await notes.put(Note(id: i % 20, text: "v\(i)", stars: 0, pinned: false))
            }
            try await notes.delete(3)
            let after = try lastTransaction(store)

            let merged = try await nextBatch(&roomy)
            #expect(merged.transactions == (before + 1)...after)
            #expect(merged.records.count == 20)
            #expect(merged.records[3] == .deleted)
            #expect(merged.records.filter { $0.key != 3 }.values.allSatisfy { $0 == .stored })

            let unknown = try await nextBatch(&tight)
            #expect(unknown.transactions == (before + 1)...after)
            #expect(unknown.content.isUnknown)
        }
    }

    @Test("a journal undoes its last entries in whichever collections they went to, and numbers new ones on")
    func journalUndoAcrossCollections() throws {
        try withTemporaryDirectory { dir in
            let store = try Store(path: dir + "/store", options: testOptions)
            _ = try store.collection(Note.self, named: "A")
            _ = try store.collection(Note.self, named: "B")
            let a = try #require(store.existingState(of: "A"))
            let b = try #require(store.existingState(of: "B"))
            let journal = ChangeJournal()
            func record(_ state: CollectionState, _ key: UInt8) {
                [key].withUnsafeBytes { journal.record(state, key: $0, .stored) }
            }
            // What each collection's batch holds, by key.
            func held() -> [String: [UInt8]] {
                var result: [String: [UInt8]] = [:]
                journal.forEachBatch { state, batch in
                    result[state.name] = batch.entries.indices.map { index in
                        batch.keys.withBytes(in: batch.keyRange(index)) { $0[0] }
                    }
                }
                return result
            }
            record(a, 1)
            record(a, 2)
            let beforeB = journal.mark
            record(b, 3)
            record(a, 4)
            let middle = journal.mark
            record(b, 5)
            record(a, 6)
            #expect(held() == ["A": [1, 2, 4, 6], "B": [3, 5]])
            journal.undo(to: middle)
            #expect(held() == ["A": [1, 2, 4], "B": [3]])
            journal.undo(to: 1)
            #expect(held() == ["A": [1], "B": []])
            record(b, 7)
            record(a, 8)
            #expect(held() == ["A": [1, 8], "B": [7]])
            journal.undo(to: 2)
            #expect(held() == ["A": [1], "B": [7]])
            #expect(journal.mark == 2 && beforeB == 2)
            journal.undo(to: 0)
            #expect(held() == ["A": [], "B": []])
        }
    }

    @Test("a batch handed on keeps its keys while the journal that made it is emptied and used again")
    func reusedJournal() throws {
        try withTemporaryDirectory { dir in
            let store = try Store(path: dir + "/store", options: testOptions)
            _ = try store.collection(Note.self, named: "A")
            let a = try #require(store.existingState(of: "A"))
            // Keys of every length the appending treats apart: empty, under a word, one or two
            // words, longer.
            let keys = [0, 1, 7, 8, 9, 15, 16, 17, 100].map { length in
                (0..<length).map { UInt8(truncatingIfNeeded: length &* 31 &+ $0) }
            }
            func contents(_ batch: RawChanges) -> [[UInt8]] {
                batch.entries.indices.map { index in batch.keys.withBytes(in: batch.keyRange(index)) { Array($0) } }
            }
            let journal = ChangeJournal()
            for key in keys { key.withUnsafeBytes { journal.record(a, key: $0, .stored) } }
            var published: [RawChanges] = []
            journal.forEachBatch { _, batch in published.append(batch) }
            #expect(published.count == 1 && contents(published[0]) == keys)

            // Emptied while the published batch still holds its buffers, then filled again.
            journal.reset()
            for key in keys.reversed() { key.withUnsafeBytes { journal.record(a, key: $0, .deleted) } }
            #expect(contents(published[0]) == keys)
            var again: [RawChanges] = []
            journal.forEachBatch { _, batch in again.append(batch) }
            #expect(contents(again[0]) == keys.reversed())

            // Undoing in a copy, and merging one batch into another, change neither source.
            var copy = again[0]
            copy.removeLast()
            copy.merge(published[0], limit: 100)
            #expect(contents(copy) == Array(keys.reversed().dropLast()) + keys)
            #expect(contents(again[0]) == keys.reversed() && contents(published[0]) == keys)
        }
    }

    @Test(
        "a consumer whose looks before parking find nothing parks at once, looking now and then, and again once a batch waits"
    )
    func looksBeforeParkingFollowTheCommits() async {
        // The policy: three fruitless looks in a row, then one in 32.
        #expect((0..<70).filter { ChangeSubscriber.looks(after: $0) } == [0, 1, 2, 32, 64])
        // Looks that end at once find nothing when the batch comes only once the consumer parked.
        let subscriber = ChangeSubscriber(interest: .all(limit: 10), lookLength: 0)
        var batch = RawChanges(first: 1, last: 1, origin: .thisProcess)
        [UInt8]([1, 2, 3]).withUnsafeBytes { batch.append(.stored, key: $0) }
        let delivered = batch
        func takeOneDeliveredOnceParked() async {
            async let next = subscriber.next()
            while !subscriber.hasWaiter { await Task.yield() }
            subscriber.deliver(delivered)
            #expect(await next?.last == 1)
        }
        for _ in 0..<5 { await takeOneDeliveredOnceParked() }
        #expect(subscriber.looksMade.load(ordering: .relaxed) == 3)
        // A batch that waits already when the consumer asks: commits come close together again.
        subscriber.deliver(delivered)
        #expect(await subscriber.next()?.last == 1)
        await takeOneDeliveredOnceParked()
        #expect(subscriber.looksMade.load(ordering: .relaxed) == 4)
    }

    @Test(
        "consumers parked at a commit all get its batch and then the next, whether one (resumed by the writer) or several (by one job)",
        .timeLimit(.minutes(1)))
    func parkedConsumersAreResumed() async throws {
        try await withTemporaryDirectory { dir in
            let store = try Store(path: dir + "/store", options: testOptions)
            let notes = try store.collection(Note.self)
            for (round, count) in [1, 4].enumerated() {
                let sequences = (0..<count).map { _ in notes.changes() }
                let consumers = sequences.map { sequence in
                    Task {
                        var iterator = sequence.makeAsyncIterator()
                        var taken: [[Int64: ChangeKind]] = []
                        while taken.count < 2, let batch = await iterator.next() { taken.append(batch.records) }
                        return taken
                    }
                }
                for sequence in sequences {
                    while !sequence.subscription.subscriber.hasWaiter { await Task.yield() }
                }
                let ids = [Int64(round * 10 + 1), Int64(round * 10 + 2)]
                for id in ids { try await notes.put(Note(id: id, text: "n", stars: 0, pinned: false)) }
                for consumer in consumers {
                    #expect(await consumer.value == [[ids[0]: .stored], [ids[1]: .stored]])
                }
            }
        }
    }

    @Test("commits of this process are published in the order they committed, whichever thread gets there first")
    func publicationOrder() async throws {
        try await withTemporaryDirectory { dir in
            let store = try Store(path: dir + "/store", options: testOptions)
            let notes = try store.collection(Note.self)
            let state = try #require(store.existingState(of: notes.name))
            var changes = notes.changes().makeAsyncIterator()
            // Two transactions of this process about to commit, in this order: the first stores
            // note 7, the second deletes it.
            func journal(_ kind: RecordedKind) -> ChangeJournal {
                let journal = ChangeJournal()
                Int64(7).keyBytes.withUnsafeBytes { journal.record(state, key: $0, kind) }
                store.observation.announce(journal)
                return journal
            }
            let (first, second) = (journal(.stored), journal(.deleted))

            // The second's thread reaches its publication first. It must wait for the first: a
            // moment is given for it to publish out of order, which it must not take.
            let secondDone = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                store.observation.didCommit(transaction: 102, local: { _ in second })
                secondDone.signal()
            }
            let finishedAlone = secondDone.wait(timeout: .now() + .milliseconds(200)) == .success
            store.observation.didCommit(transaction: 101, local: { _ in first })
            if !finishedAlone { secondDone.wait() }
            #expect(!finishedAlone, "the later commit was published before the earlier one")

            // One batch waits, both merged: note 7 ends deleted, as the store has it.
            let batch = try await nextBatch(&changes)
            #expect(batch.transactions == 101...102)
            #expect(batch.records == [7: .deleted])
        }
    }

    @Test("the observed keys a writer looks up: every key observed is found, of any length, and no other")
    func observedKeysLookUp() {
        var generator = SystemRandomNumberGenerator()
        func key(_ length: Int) -> [UInt8] { (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) } }
        let observed = (0..<40).map { key($0) } + (0..<8).map { _ in key(8) }
        var keys = ObservedKeys()
        for key in observed { key.withUnsafeBytes { keys.insert($0) } }
        for key in observed { #expect(key.withUnsafeBytes { keys.contains($0) }, "\(key)") }
        let others = (0..<20_000).map { key($0 % 40 + 1) }.filter { !observed.contains($0) }
        let found = others.filter { key in key.withUnsafeBytes { keys.contains($0) } }
        #expect(found.isEmpty, "keys not observed reported as observed: \(found)")
    }

    @Test("with 8 keys observed, fewer than 1 in 100 keys nobody observes gets past the bitmap to the hash")
    func observedKeysBitmapIsSparse() {
        var generator = SeededGenerator(seed: 7)
        var keys = ObservedKeys()
        for id in 0..<Int64(8) { (id * 100).withKeyBytes { keys.insert($0) } }
        let words = UnsafeMutablePointer<UInt64>.allocate(capacity: ObservedKeys.bitmapWords)
        defer { words.deallocate() }
        keys.copyBitmap(to: words)
        var passed = 0
        func look(_ key: UnsafeRawBufferPointer) {
            if ObservedKeys.isSet(ObservedKeys.bitIndex(key), in: words) { passed += 1 }
        }
        // Integer IDs as a collection stores them, and strings of a few lengths.
        for id in Int64(1_000)..<21_000 {
            id.withKeyBytes(look)
            Array("user-\(generator.next() % 1_000_000)".utf8).withUnsafeBytes(look)
        }
        // 8 bits of 4,096 are set, so about one key in 500 passes (a one-word summary let far more).
        #expect(passed < 400, "\(passed) of 40,000 keys passed")
    }

    @Test("a write records only the keys observed, and a key observed since the last write at once")
    func writerFollowsTheObservedKeys() throws {
        try withTemporaryDirectory { dir in
            let store = try Store(path: dir + "/store", options: testOptions)
            let notes = try store.collection(Note.self)
            let state = try #require(store.existingState(of: "Note"))
            // The entries the transaction's journal holds after `body` (a journal made only for
            // this look holds none).
            func recorded(_ body: (borrowing Hoard.WriteTransaction) throws -> Void) throws -> Int {
                try synchronously {
                    try store.writeLMDB { txn in
                        try body(Hoard.WriteTransaction(txn))
                        let journal = txn.local(ObjectIdentifier(ChangeJournal.self), make: ChangeJournal.init)
                        var entries = 0
                        journal.forEachBatch { entries += $1.entries.count }
                        return entries
                    }
                }
            }
            let first = try notes.observe(1)
            #expect(try recorded { try notes.put(Note(id: 2, text: "two", stars: 0, pinned: false), in: $0) } == 0)
            #expect(try recorded { try notes.put(Note(id: 1, text: "one", stars: 0, pinned: false), in: $0) } == 1)
            // The writer took the observed keys {1} above; a second observer adds 2.
            let second = try notes.observe(2)
            #expect(try recorded { try notes.put(Note(id: 2, text: "two'", stars: 1, pinned: false), in: $0) } == 1)
            #expect(try recorded { try notes.put(Note(id: 3, text: "three", stars: 0, pinned: false), in: $0) } == 0)
            // A subscriber to every change: every key again.
            let all = notes.changes()
            #expect(try recorded { try notes.put(Note(id: 3, text: "three'", stars: 1, pinned: false), in: $0) } == 1)
            withExtendedLifetime((first, second, all)) {
                #expect(state.observerCount.load(ordering: .relaxed) == 3)
            }
        }
    }

    @Test(
        "a write of many records with only observe(id) subscribers records 'unknown' rather than its keys, and an undone nested transaction takes it away"
    )
    func largeWriteRecordsUnknown() throws {
        try withTemporaryDirectory { dir in
            let store = try Store(path: dir + "/store", options: testOptions)
            let notes = try store.collection(Note.self)
            // What the collection's batch says once the transaction's journal is stamped after
            // `body`, as its commit would: "none", "unknown" or "N keys".
            func published(_ body: (borrowing Hoard.WriteTransaction) throws -> Void) throws -> String {
                try synchronously {
                    try store.writeLMDB { txn in
                        try body(Hoard.WriteTransaction(txn))
                        guard let journal = txn.local(ObjectIdentifier(ChangeJournal.self), as: ChangeJournal.self)
                        else { return "none" }
                        journal.stamp(transaction: txn.id)
                        var said = "none"
                        journal.forEachBatch { _, batch in
                            if batch.unknown {
                                said = "unknown"
                            } else if !batch.entries.isEmpty {
                                said = "\(batch.entries.count) keys"
                            }
                        }
                        return said
                    }
                }
            }
            func many(from first: Int64, count: Int, _ text: String) -> [Note] {
                (first..<first + Int64(count)).map { Note(id: $0, text: text, stars: 0, pinned: false) }
            }
            let fewest = ChangeRecorder.fewestRecordsUnrecorded
            var observers = [try notes.observe(1)]
            // None of these keys is observed: each is checked one record short of the fewest.
            #expect(try published { try notes.put(many(from: 1_000, count: fewest - 1, "a"), in: $0) } == "none")
            #expect(try published { try notes.put(many(from: 1_000, count: fewest, "b"), in: $0) } == "unknown")
            #expect(
                try published { txn in
                    try notes.put(Note(id: 1, text: "kept", stars: 0, pinned: false), in: txn)
                    _ = try? txn.nested { inner in
                        try notes.put(many(from: 1_000, count: fewest, "undone"), in: inner)
                        throw Refused(index: 0)
                    }
                } == "1 keys")
            // Nine keys observed: 128 records a key, 1,152, before a write leaves its keys unrecorded.
            for id in Int64(2)...9 { observers.append(try notes.observe(id)) }
            #expect(try published { try notes.put(many(from: 1, count: 1_151, "c"), in: $0) } == "9 keys")
            #expect(try published { try notes.put(many(from: 1, count: 1_152, "d"), in: $0) } == "unknown")
            // A subscriber to every change gets every key, however many.
            let all = notes.changes()
            #expect(try published { try notes.put(many(from: 1, count: 2_000, "f"), in: $0) } == "2000 keys")
            withExtendedLifetime((observers, all)) {}
        }
    }

    @Test(
        "an observer of a record a large put or synchronize left unrecorded yields its new value, and nothing for an equal one"
    )
    func observerAfterLargeWrite() async throws {
        try await withTemporaryDirectory { dir in
            let store = try Store(path: dir + "/store", options: testOptions)
            let notes = try store.collection(Note.self)
            let count = ChangeRecorder.fewestRecordsUnrecorded
            func many(_ text: String) -> [Note] {
                (Int64(0)..<Int64(count)).map { Note(id: $0, text: text, stars: 0, pinned: false) }
            }
            var values = try notes.observe(7).makeAsyncIterator()
            #expect(try await values.next() == .some(nil))
            try await notes.put(many("first"))
            #expect(try await values.next() == Note(id: 7, text: "first", stars: 0, pinned: false))
            // Rewritten with the same value by a large write: not yielded; the next change is.
            try await notes.put(many("first"))
            try await notes.put(Note(id: 7, text: "second", stars: 1, pinned: false))
            #expect(try await values.next() == Note(id: 7, text: "second", stars: 1, pinned: false))
            // A synchronize as large, which removes it.
            try await notes.synchronize(with: many("third").filter { $0.id != 7 })
            #expect(try await values.next() == .some(nil))
        }
    }

    @Test("cancelling the consuming task or dropping the sequence ends the subscription")
    func endsOnCancelAndDrop() async throws {
        try await withTemporaryDirectory { dir in
            let store = try Store(path: dir + "/store", options: testOptions)
            let notes = try store.collection(Note.self)
            let state = try #require(store.existingState(of: "Note"))
            do {
                let sequence = notes.changes()
                #expect(state.observerCount.load(ordering: .relaxed) == 1)
                _ = sequence
            }
            #expect(state.observerCount.load(ordering: .relaxed) == 0)

            let consumer = Task { () -> Int in
                var count = 0
                for await _ in notes.changes() { count += 1 }
                return count
            }
            while state.observerCount.load(ordering: .relaxed) == 0 { await Task.yield() }
            try await notes.put(Note(id: 1, text: "one", stars: 0, pinned: false))
            consumer.cancel()
            let delivered = await consumer.value
            #expect(delivered <= 1)
            #expect(state.observerCount.load(ordering: .relaxed) == 0)
            // Writes after the end cost no recording: no subscriber, no change log, no listener.
            #expect(store.environment.currentCommitListener == nil)
            try synchronously {
                try store.write { txn in
                    try notes.put(Note(id: 2, text: "two", stars: 0, pinned: false), in: txn)
                    #expect(store.changeRecorder(for: state, in: txn.writing) == nil)
                }
            }
        }
    }

    @Test(
        "observe gives the current value once, then each new one; an equal rewrite or a lazy migration is not a change")
    func observeValues() async throws {
        try await withTemporaryDirectory { dir in
            let store = try Store(path: dir + "/store", options: testOptions)
            let notes = try store.collection(Note.self, migration: .lazy)
            // Written by version 2 of the app: the first read migrates it lazily.
            try writeRecord(Note(id: 7, text: "old", stars: 3, pinned: false), version: 2, in: store)
            let observation = try notes.observe(7)
            // Committed after the subscription, before the first read: in the first value, and not again.
            let v1 = Note(id: 7, text: "one", stars: 1, pinned: false)
            var iterator = observation.makeAsyncIterator()
            #expect(try await iterator.next() == .some(Note(id: 7, text: "old", stars: 3, pinned: false)))
            try await notes.put(v1)
            #expect(try await iterator.next() == .some(v1))
            try await notes.put(v1)  // the same value again
            try await notes.put(Note(id: 8, text: "other", stars: 0, pinned: false))
            let v2 = Note(id: 7, text: "two", stars: 2, pinned: true)
            try await notes.put(v2)
            #expect(try await iterator.next() == .some(v2))
            try await notes.delete(7)
            #expect(try await iterator.next() == .some(nil))

            // A record read in an older version and rewritten by the next write: not a change.
            try writeRecord(Note(id: 9, text: "nine", stars: 9, pinned: false), version: 1, in: store)
            var nine = try notes.observe(9).makeAsyncIterator()
            let original = try await nine.next()
            #expect(original == .some(Note(id: 9, text: "nine", stars: 9, pinned: false)))
            #expect(try notes.get(9) != nil)  // remembered for the lazy migration
            try await notes.put(Note(id: 10, text: "ten", stars: 0, pinned: false))  // rewrites 9
            #expect(try store.read { txn in try notes.header(of: 9, in: txn)?.version } == 3)
            let next = Note(id: 9, text: "changed", stars: 9, pinned: false)
            try await notes.put(next)
            #expect(try await nine.next() == .some(next))
        }
    }

    @Test("observe reports a record's first value once even when a commit lands between subscribing and reading")
    func observeInitialOnce() async throws {
        try await withTemporaryDirectory { dir in
            let store = try Store(path: dir + "/store", options: testOptions)
            let notes = try store.collection(Note.self)
            try await notes.put(Note(id: 1, text: "before", stars: 0, pinned: false))
            let observation = try notes.observe(1)
            let during = Note(id: 1, text: "during", stars: 0, pinned: false)
            try await notes.put(during)  // its batch waits in the subscription
            var iterator = observation.makeAsyncIterator()
            #expect(try await iterator.next() == .some(during))
            let after = Note(id: 1, text: "after", stars: 0, pinned: false)
            try await notes.put(after)
            // Had the batch of `during` been taken as new, `during` would come again here.
            #expect(try await iterator.next() == .some(after))
        }
    }

    @Test("observe yields nil when the record expires, at the time of the store's clock, though expiry commits nothing")
    func observeExpiry() async throws {
        try await withTemporaryDirectory { dir in
            let clock = ManualClock()
            let store = try Store(path: dir + "/store", options: .testing(clock: clock))
            let tags = try store.collection(Tag.self)
            try await tags.put(Tag(id: "t", uses: 1), expiry: .after(.seconds(10)))
            var iterator = try tags.observe("t").makeAsyncIterator()
            #expect(try await iterator.next() == .some(Tag(id: "t", uses: 1)))
            let transaction = try lastTransaction(store)
            clock.advance(by: .seconds(11))
            #expect(try await iterator.next() == .some(nil))
            #expect(try lastTransaction(store) == transaction)
            // Stored again, and its expiry moved later by a put of the same value: the later one counts.
            try await tags.put(Tag(id: "t", uses: 2), expiry: .after(.seconds(5)))
            #expect(try await iterator.next() == .some(Tag(id: "t", uses: 2)))
            try await tags.put(Tag(id: "t", uses: 2), expiry: .after(.seconds(20)))
            clock.advance(by: .seconds(6))
            try await tags.put(Tag(id: "t", uses: 3), expiry: .never)
            #expect(try await iterator.next() == .some(Tag(id: "t", uses: 3)))
        }
    }

    @Test("the hoard_observers gauge counts a collection's live subscribers")
    func observersGauge() throws {
        let metrics = TestMetrics()
        var options = testOptions
        options.metricsFactory = metrics
        try withTemporaryDirectory { dir in
            let store = try Store(path: dir + "/store", options: options)
            let notes = try store.collection(Note.self)
            func gauge() throws -> Double? {
                try metrics.expectGauge("hoard_observers", [("collection", "Note")]).lastValue
            }
            do {
                let changes = notes.changes()
                let values = try notes.observe(1)
                #expect(try gauge() == 2)
                _ = (changes, values)
            }
            #expect(try gauge() == 0)
        }
    }

    @Test(
        "the change log: an entry a committed write transaction, written in it, in the bytes FORMAT.md gives; none for an aborted one; the last N kept; a damaged entry is an error naming its transaction"
    )
    func changeLogEntries() throws {
        try withTemporaryDirectory { dir in
            let store = try Store(path: dir + "/store", options: testOptions(changeLog: 3))
            let tags = try store.collection(Tag.self)
            try store.write { txn in
                try tags.put(Tag(id: "a", uses: 1), in: txn)
                _ = try tags.delete("absent", in: txn)  // nothing deleted: no change
            }
            let first = try lastTransaction(store)
            let log = try store.environment.openDatabase("hoard.changes")
            func entry(_ transaction: Int) throws -> [UInt8]? {
                try store.readLMDB { try $0.value(forKey: ChangeLogFormat.key(transaction), in: log) }
            }
            // Format 1; stored (1); the collection "Tag"; the key: 0x01 then "a" (docs/FORMAT.md).
            #expect(try entry(first) == [1, 1, 0, 3] + Array("Tag".utf8) + [0, 2, 1] + Array("a".utf8))
            #expect(ChangeLogFormat.key(first) == withUnsafeBytes(of: UInt64(first).bigEndian, Array.init))

            #expect(throws: Refused.self) {
                try store.write { txn in
                    try tags.put(Tag(id: "x", uses: 0), in: txn)
                    throw Refused(index: 0)
                }
            }
            #expect(try entry(first + 1) == nil)

            for index in 0..<5 { try tags.put(Tag(id: "t\(index)", uses: index)) }
            let last = try lastTransaction(store)
            let kept = try store.readLMDB { txn in try txn.entries(in: log, limit: 100).map(\.key) }
            #expect(kept == ((last - 2)...last).map { ChangeLogFormat.key($0) })

            let whole = try #require(try entry(last))
            #expect {
                try whole.dropLast().withUnsafeBytes { try ChangeLogFormat.batches($0, transaction: last) }
            } throws: { error in
                (error as? HoardError)?.kind == .observation && "\(error)".contains("transaction \(last)")
            }
            // A kind no log is written with: the journal's "unknown" (0xFE), and a kind never defined.
            for kind: UInt8 in [0xFE, 0x77] {
                var damaged = whole
                damaged[1] = kind
                #expect {
                    try damaged.withUnsafeBytes { try ChangeLogFormat.batches($0, transaction: last) }
                } throws: { error in
                    (error as? HoardError)?.kind == .observation && "\(error)".contains("unknown change kind \(kind)")
                }
            }
            // Kind 5, a record marked expired, which only earlier versions wrote: read all the same.
            var older = whole
            older[1] = 5
            let read = try older.withUnsafeBytes { try ChangeLogFormat.batches($0, transaction: last) }
            #expect(read.count == 1 && read[0].0 == "Tag" && read[0].1.entries.map(\.kind) == [.expired])
        }
    }
}
