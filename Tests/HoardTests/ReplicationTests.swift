import Foundation
@_spi(LMDB) @testable import Hoard
import HoardTestSupport
import LMDB
import Synchronization
import TestSupport
import Testing

/// Replicas that agree, without a database: stores sharing an InMemoryLog through their buses.
@Suite struct ReplicationTests {
    static func note(_ id: Int64, _ text: String) -> Note { Note(id: id, text: text, stars: 1, pinned: false) }

    /// Two stores in temporary directories and the log between them.
    static func withReplicas<R>(
        clock: ManualClock? = nil, _ body: (Store, Store, InMemoryLog) async throws -> R
    ) async throws -> R {
        try await withTemporaryStore(options: .testing(clock: clock)) { a in
            try await withTemporaryStore(options: .testing(clock: clock)) { b in
                try await body(a, b, InMemoryLog())
            }
        }
    }

    @Test func invalidationTravelsAndOneEntryPerKey() async throws {
        try await Self.withReplicas { a, b, log in
            let (notesA, notesB) = (try a.collection(Note.self), try b.collection(Note.self))
            let (busA, busB) = (InMemoryBus(store: a, log: log), InMemoryBus(store: b, log: log))
            // Following a bus for the first time resets a store (it may hold records of any age).
            try await busA.catchUp()
            try await busB.catchUp()
            try await notesA.put([Self.note(1, "a"), Self.note(2, "a")])
            try await notesB.put([Self.note(1, "b"), Self.note(2, "b"), Self.note(3, "b")])

            // Invalidated three times, one outbox entry.
            for _ in 0..<3 { try await notesA.invalidate(1) }
            #expect(try notesA.get(1) == nil)
            #expect(try a.replication.pendingCount() == 1)
            #expect(try await busA.publish() == 1)
            #expect(try a.replication.pendingCount() == 0)

            let applied = try await busB.catchUp()
            #expect(applied.removed == 1)
            #expect(try notesB.get(1) == nil)
            #expect(try notesB.get(2)?.text == "b")
            #expect(try notesB.get(3)?.text == "b")
            #expect(log.applied(by: try b.replication.identity()) == log.head)

            // A ignores its own announcement, and its position still advances.
            let own = try await busA.catchUp()
            #expect(own.ownSkipped == 1 && own.removed == 0)
            #expect(try notesA.get(2)?.text == "a")
            #expect(try a.replication.position(of: busA.name)?.sequence == log.head)
        }
    }

    /// A write's flush and the wait for every replica, as code written for any bus makes them.
    static func flushAndWait(_ bus: some ChangeBus, timeout: Duration) async throws -> Bool {
        let position = try await bus.flush()
        return try await bus.waitUntilApplied(through: position, timeout: timeout)
    }

    @Test("the calls production makes on PostgresBus (ChangeBus): the wait ends when every replica applied the flush")
    func changeBusCalls() async throws {
        try await Self.withReplicas { a, b, log in
            let (notesA, notesB) = (try a.collection(Note.self), try b.collection(Note.self))
            let (busA, busB) = (InMemoryBus(store: a, log: log), InMemoryBus(store: b, log: log))
            try await busA.catchUp()
            try await busB.catchUp()
            try await notesB.put(Self.note(1, "b"))
            try await notesA.invalidate(1)
            // B has not caught up: the wait runs out, and says so.
            #expect(try await Self.flushAndWait(busA, timeout: .milliseconds(20)) == false)
            #expect(try notesB.get(1)?.text == "b")
            let position = log.head
            async let everywhere = busA.waitUntilApplied(through: position, timeout: .seconds(60))
            try await busB.catchUp()
            #expect(try await everywhere)
            #expect(try notesB.get(1) == nil)
            // Nothing left to publish: the wait is over at once.
            #expect(try await Self.flushAndWait(busB, timeout: .seconds(60)))
        }
    }

    @Test func announcedPutKeepsTheLocalRecord() async throws {
        try await Self.withReplicas { a, b, log in
            let (notesA, notesB) = (try a.collection(Note.self), try b.collection(Note.self))
            let busB = InMemoryBus(store: b, log: log)
            try await busB.catchUp()
            try await notesB.put(Self.note(5, "old"))
            try await notesA.put(Self.note(5, "new"), announce: true)
            try await notesA.put(Self.note(6, "quiet"), announce: false)
            #expect(try notesA.get(5)?.text == "new")
            #expect(try a.replication.pendingCount() == 1)
            try await InMemoryBus(store: a, log: log).publish()
            try await busB.catchUp()
            #expect(try notesB.get(5) == nil)
        }
    }

    @Test func anEntryWrittenAgainAfterItWasReadIsNotAcknowledged() async throws {
        try await withTemporaryStore { store in
            let notes = try store.collection(Note.self)
            try await notes.invalidate([1, 2])
            let read = try store.replication.pendingAnnouncements()
            #expect(read.count == 2)
            #expect(read.changes.map(\.collection) == ["Note"])
            try await notes.invalidate(2)
            try await store.replication.acknowledge(read)
            let left = try store.replication.pendingAnnouncements()
            #expect(left.changes.flatMap(\.keys) == [Int64(2).keyBytes])
        }
    }

    @Test("a published entry's removal rides on the store's next commit, and commits alone when none comes")
    func acknowledgementsRideOnTheNextCommit() async throws {
        try await withTemporaryStore { store in
            let notes = try store.collection(Note.self)
            let outbox = try #require(store.outbox)
            let stored = { try store.environment.read { txn in try txn.count(in: outbox) } }
            try await notes.invalidate([1, 2])
            let commits = store.writeStatistics.commits
            // A delay no test waits out: only another write can carry it.
            store.replication.acknowledge(try store.replication.pendingAnnouncements(), within: .seconds(3_600))
            #expect(try store.replication.pendingAnnouncements().isEmpty)
            #expect(try store.replication.pendingCount() == 0)
            #expect(try stored() == 2, "the removal waits for a commit")
            #expect(store.writeStatistics.queued == 1 && store.writeStatistics.commits == commits)
            try await notes.put(Self.note(7, "carrier"))
            #expect(try stored() == 0)
            #expect(store.writeStatistics.commits == commits + 1, "one commit carried the put and the removal")
            #expect(store.writeStatistics.queued == 0)

            // Alone, it commits after its delay.
            try await notes.invalidate(3)
            store.replication.acknowledge(try store.replication.pendingAnnouncements(), within: .milliseconds(1))
            #expect(try store.replication.pendingCount() == 0)
            try await eventually("the removal committed on its own") { try stored() == 0 }
            #expect(store.writeStatistics.commits == commits + 3)
        }
    }

    @Test("a store let go while a removal waits closes at once; the entry is announced again")
    func aWaitingAcknowledgementDoesNotHoldTheStore() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/store"
            do {
                let store = try Store(path: path, options: .testing())
                try await store.collection(Note.self).invalidate(1)
                store.replication.acknowledge(try store.replication.pendingAnnouncements(), within: .seconds(3_600))
                #expect(try store.replication.pendingCount() == 0)
            }
            let again = try Store(path: path, options: .testing())
            #expect(try again.replication.pendingAnnouncements().changes.flatMap(\.keys) == [Int64(1).keyBytes])
        }
    }

    @Test func aBatchAppliesOnceAcrossReopening() async throws {
        let clock = ManualClock()
        try await withTemporaryDirectory { directory in
            let path = directory + "/store"
            let change = RemoteChange(origin: UUID(), collection: "Note", keys: [Int64(1).keyBytes])
            let position = BusPosition(log: "log-1", sequence: 10)
            do {
                let store = try Store(path: path, options: .testing(clock: clock))
                let notes = try store.collection(Note.self)
                // The store has followed the log from before this batch.
                try await store.replication.reset(bus: "b", to: BusPosition(log: "log-1", sequence: 9))
                try await notes.put(Self.note(1, "x"))
                let first = try await store.replication.apply([change], through: position, bus: "b")
                #expect(first.removed == 1 && !first.alreadyApplied)
                try await notes.put(Self.note(1, "written after"))
            }
            let store = try Store(path: path, options: .testing(clock: clock))
            let notes = try store.collection(Note.self)
            let again = try await store.replication.apply([change], through: position, bus: "b")
            #expect(again.alreadyApplied && again.removed == 0)
            #expect(try store.replication.position(of: "b") == position)
            #expect(try notes.get(1)?.text == "written after")
            // The reset is remembered across opening.
            #expect(store.replication.staleBefore == clock.nowMilliseconds + 1)

            do {
                _ = try await store.replication.apply(
                    [change], through: BusPosition(log: "log-2", sequence: 11), bus: "b")
                Issue.record("a position of another log was applied")
            } catch let error as HoardError {
                #expect(error.kind == .busPosition)
                #expect("\(error)".contains("log-1") && "\(error)".contains("log-2"))
            }
            #expect(try store.replication.position(of: "b") == position)
        }
    }

    /// A bus that applies what notifications carried names the position it last recorded: a store
    /// whose position moved elsewhere (another process) is left as it is, and the bus reads the log.
    @Test func aBatchForAnotherPositionThanExpectedIsNotApplied() async throws {
        try await withTemporaryDirectory { directory in
            let store = try Store(path: directory + "/store", options: .testing())
            let notes = try store.collection(Note.self)
            try await store.replication.reset(bus: "b", to: BusPosition(log: "log-1", sequence: 9))
            try await notes.put([Self.note(1, "x"), Self.note(2, "y")])
            let change = RemoteChange(origin: UUID(), collection: "Note", keys: [Int64(1).keyBytes])
            let refused = try await store.replication.apply(
                [change], through: BusPosition(log: "log-1", sequence: 12), bus: "b", expecting: 11)
            #expect(refused.unexpectedPosition && refused.removed == 0 && !refused.alreadyApplied)
            #expect(try notes.get(1)?.text == "x")
            #expect(try store.replication.position(of: "b")?.sequence == 9)
            let applied = try await store.replication.apply(
                [change], through: BusPosition(log: "log-1", sequence: 12), bus: "b", expecting: 9)
            #expect(!applied.unexpectedPosition && applied.removed == 1)
            #expect(try notes.get(1) == nil && notes.get(2)?.text == "y")
            #expect(try store.replication.position(of: "b")?.sequence == 12)
        }
    }

    /// The clock stands still: a record written before the reset in its millisecond is not served
    /// as fresh, one written after it in the same millisecond is, and a fetch that began before
    /// the reset does not store its result (it may have read the upstream before a missed change).
    @Test func aResetSeparatesRecordsOfOneMillisecond() async throws {
        let clock = ManualClock()
        try await withTemporaryStore(options: .testing(clock: clock)) { store in
            let notes = try store.collection(Note.self)
            try await notes.put(Self.note(1, "before"))
            let upstream = FakeUpstream()
            let read = Task { try await notes.get(2, orFetch: { try await upstream.fetchOne($0) }) }
            try await eventually("the fetch has started") { await upstream.calls.count == 1 }
            try await store.replication.reset(bus: "b", to: BusPosition(log: "log-1", sequence: 1))
            try await notes.put(Self.note(3, "after"))
            await upstream.release()
            #expect(try await read.value?.text == "v1", "the waiter gets what was fetched")
            try await eventually("the fetch has ended") { notes.statistics().fetchesInFlight == 0 }
            #expect(try notes.get(1) == nil, "written before the reset, served as fresh")
            #expect(try notes.get(3)?.text == "after", "written after the reset, not served")
            #expect(try notes.get(2) == nil, "a fetch that began before the reset stored its result")
            #expect(store.replication.discardedFills == 1)
        }
    }

    @Test func unknownCollectionsAreSkippedAndThePositionAdvances() async throws {
        try await Self.withReplicas { a, b, log in
            _ = try b.collection(Note.self)
            log.append([RemoteChange(origin: nil, collection: "Nowhere", keys: [[1, 2, 3]])])
            let busB = InMemoryBus(store: b, log: log)
            try await busB.catchUp()
            log.append([RemoteChange(origin: nil, collection: "Nowhere", keys: [[1, 2, 3]])])
            let result = try await busB.catchUp()
            #expect(result.unknownSkipped == 1)
            #expect(try b.replication.position(of: busB.name)?.sequence == 2)
        }
    }

    /// A log recreated, or trimmed past a replica's position: the replica resets, and no record
    /// written before is served afterwards, as fresh or stale-if-error (it may hold a value a
    /// change the replica missed replaced): a failed fetch throws.
    @Test(arguments: ["recreated", "trimmed"])
    func aReplicaThatCannotCatchUpResets(_ how: String) async throws {
        let clock = ManualClock()
        try await Self.withReplicas(clock: clock) { a, b, log in
            let failing = FakeUpstream(open: true)
            await failing.set(text: nil)
            let notesB = try b.collection(Note.self, freshness: Freshness(staleIfError: .seconds(600)))
            let busB = InMemoryBus(store: b, log: log)
            try await busB.catchUp()
            clock.advance(by: .milliseconds(5))
            try await notesB.put((1...100).map { Self.note($0, "before") })
            log.append([RemoteChange(origin: nil, collection: "Note", keys: [Int64(1).keyBytes])])
            try await busB.catchUp()
            #expect(try notesB.get(1) == nil)
            #expect(try notesB.get(3)?.text == "before")
            #expect(try notesB.count() == 99)
            // Changes B never sees: the log forgets them.
            log.append([RemoteChange(origin: nil, collection: "Note", keys: [Int64(2).keyBytes])])
            if how == "recreated" { log.recreate() } else { log.trim(through: log.head) }
            clock.advance(by: .milliseconds(5))
            try await busB.catchUp()
            #expect(b.replication.resets == 2)  // the first catch-up, then this one

            let fresh = try (2...100).filter { try notesB.get($0) != nil }
            #expect(fresh.isEmpty, "served as fresh after the reset: \(fresh)")
            #expect(try notesB.contains(50) == false)
            #expect(try notesB.scan().isEmpty)
            #expect(try notesB.count() == 99, "the reset deletes nothing")
            await #expect(throws: FakeUpstream.Failure.self) {
                try await notesB.get(50, orFetch: { try await failing.fetchOne($0) })
            }
            clock.advance(by: .milliseconds(5))
            try await notesB.put(Self.note(7, "after"))
            #expect(try notesB.get(7)?.text == "after")
        }
    }

    /// An invalidation removes a record even where stale-if-error would serve it: it says the
    /// value is wrong, so a failed fetch throws rather than serve it; a successful one stores the
    /// new value.
    @Test func staleIfErrorDoesNotKeepAnInvalidatedRecord() async throws {
        let clock = ManualClock()
        try await Self.withReplicas(clock: clock) { a, b, log in
            let notesA = try a.collection(Note.self)
            let notesB = try b.collection(
                Note.self, freshness: Freshness(staleWhileRevalidate: .seconds(5), staleIfError: .seconds(600)))
            let busB = InMemoryBus(store: b, log: log)
            try await busB.catchUp()
            try await notesB.put(Self.note(1, "old"))
            try await notesA.invalidate(1)
            try await InMemoryBus(store: a, log: log).publish()
            clock.advance(by: .milliseconds(5))
            let result = try await busB.catchUp()
            #expect(result.removed == 1)
            #expect(try notesB.count() == 0)

            let upstream = FakeUpstream(open: true)
            await upstream.set(text: nil)
            await #expect(throws: (any Error).self) {
                try await notesB.get(1, orFetch: { try await upstream.fetchOne($0) })
            }
            await upstream.set(text: "new")
            clock.advance(by: .seconds(1))  // past the failed fetch's retry period
            let fetched = try await notesB.get(1, orFetch: { try await upstream.fetchOne($0) })
            #expect(fetched?.text == "new")
        }
    }

    @Test(
        "an invalidation leaves the same on the writer and on the others: by ID, by tag, and a clear",
        arguments: ["id", "tag", "all"], [true, false])
    func invalidationsAgreeAcrossReplicas(kind: String, withStaleIfError: Bool) async throws {
        let clock = ManualClock()
        try await Self.withReplicas(clock: clock) { a, b, log in
            let freshness =
                withStaleIfError
                ? Freshness(staleWhileRevalidate: .seconds(5), staleIfError: .seconds(600))
                : Freshness(staleWhileRevalidate: .seconds(5))
            let (notesA, notesB) = (
                try a.collection(Note.self, freshness: freshness), try b.collection(Note.self, freshness: freshness)
            )
            let (busA, busB) = (InMemoryBus(store: a, log: log), InMemoryBus(store: b, log: log))
            try await busA.catchUp()
            try await busB.catchUp()
            for notes in [notesA, notesB] {
                try await notes.put((1...3).map { Self.note($0, "old") }, tags: ["team"])
            }
            switch kind {
            case "id": try await notesA.invalidate([1, 2, 3])
            case "tag": try await notesA.invalidate(tag: "team")
            default: try await notesA.invalidateAll()
            }
            try await busA.publish()
            try await busB.catchUp()
            let kept = (try notesA.count(), try notesB.count())
            #expect(kept.0 == 0 && kept.1 == 0, "records kept: \(kept)")

            let upstream = FakeUpstream(open: true)
            let fetch: @Sendable (Int64) async throws -> Note? = { try await upstream.fetchOne($0) }
            func answers(_ notes: HoardCollection<Note>) async -> [String] {
                var texts: [String] = []
                for id in Int64(1)...3 {
                    do {
                        texts.append(try await notes.get(id, orFetch: fetch)?.text ?? "nil")
                    } catch {
                        texts.append("error")
                    }
                }
                return texts
            }
            await upstream.set(text: nil)  // down
            let down = (await answers(notesA), await answers(notesB))
            #expect(down.0 == down.1)
            #expect(down.0 == ["error", "error", "error"], "never the invalidated value")
            await upstream.set(text: "new")  // up again, once the failed fetches' retry period is over
            clock.advance(by: .seconds(1))
            let up = (await answers(notesA), await answers(notesB))
            #expect(up.0 == up.1 && up.0 == ["new", "new", "new"])
        }
    }

    @Test func remoteRemovalsKeepACollectionsByteCount() async throws {
        try await withTemporaryStore { store in
            let notes = try store.collection(Note.self, capacity: Capacity(bytes: 1 << 20))
            try await notes.put((1...10).map { Self.note($0, String(repeating: "x", count: 100)) })
            let before = try #require(try store.capacityUsage(of: "Note")?.bytes)
            let log = InMemoryLog()
            let bus = InMemoryBus(store: store, log: log)
            try await bus.catchUp()
            log.append([RemoteChange(origin: nil, collection: "Note", keys: [1, 2, 3].map { Int64($0).keyBytes })])
            try await bus.catchUp()
            let after = try #require(try store.capacityUsage(of: "Note")?.bytes)
            let recounted = try store.readLMDB { txn in
                var bytes = 0
                try txn.forEach(in: try #require(try store.recordDatabase(of: "Note")), range: .all) { key, value in
                    bytes += key.count + value.count
                    return .next
                }
                return bytes
            }
            #expect(after < before)
            #expect(after == recounted)
        }
    }

    // MARK: - The read-through race

    /// Replica B's fetch of note 9 from a closed upstream (it answers "v1" when released), and
    /// replica A's invalidation of 9 announced while the fetch is out; then `body` with B's notes,
    /// B's bus (not yet caught up), the upstream and the fetch.
    static func withFetchOverlappingAnInvalidation(
        guardOn: Bool,
        _ body: (HoardCollection<Note>, InMemoryBus, FakeUpstream, Task<Note?, any Error>) async throws -> Void
    ) async throws {
        try await withReplicas { a, b, log in
            b.replicationState.invalidations.enabled.store(guardOn, ordering: .relaxed)
            let notesB = try b.collection(Note.self)
            let busB = InMemoryBus(store: b, log: log)
            try await busB.catchUp()
            let upstream = FakeUpstream()
            let read = Task { try await notesB.get(9, orFetch: { try await upstream.fetchOne($0) }) }
            try await eventually("the fetch has started") { await upstream.calls.count == 1 }
            try await a.collection(Note.self).invalidate(9)
            try await InMemoryBus(store: a, log: log).publish()
            try await body(notesB, busB, upstream, read)
        }
    }

    /// A get that starts after an invalidation does not join a fetch that began before it (it would
    /// receive the old value): it fetches anew. With the guard off, it joins and gets the old value.
    @Test(arguments: [true, false])
    func aGetAfterAnInvalidationDoesNotJoinAFetchFromBefore(guardOn: Bool) async throws {
        try await Self.withFetchOverlappingAnInvalidation(guardOn: guardOn) { notesB, busB, before, first in
            try await busB.catchUp()
            let after = FakeUpstream(open: true)
            await after.set(text: "v2")
            let second = Task { try await notesB.get(9, orFetch: { try await after.fetchOne($0) }) }
            try await eventually("the second get has joined or fetched") {
                let fetched = await after.calls.count
                return notesB.statistics().coalesced == 1 || fetched == 1
            }
            await before.release()
            #expect(try await first.value?.text == "v1")
            #expect(try await second.value?.text == (guardOn ? "v2" : "v1"))
        }
    }

    /// A fetch that began before an invalidation of its key returns what it fetched to its caller
    /// but does not store it; with the guard off, the same sequence stores the stale value.
    @Test(arguments: [true, false])
    func aFetchOverlappingAnInvalidationStoresNothing(guardOn: Bool) async throws {
        try await Self.withFetchOverlappingAnInvalidation(guardOn: guardOn) { notesB, busB, upstream, read in
            let b = notesB.store
            #expect(try await busB.catchUp().removed == 0)
            await upstream.release()
            #expect(try await read.value?.text == "v1", "the waiter gets what was fetched")
            try await eventually("the fetch has ended") { notesB.statistics().fetchesInFlight == 0 }
            if guardOn {
                #expect(try notesB.get(9) == nil, "a fill that began before the invalidation was stored")
                #expect(b.replication.discardedFills == 1)
            } else {
                #expect(try notesB.get(9)?.text == "v1", "without the guard the stale fill is stored")
                #expect(b.replication.discardedFills == 0)
            }
            // A fetch that begins after the invalidation stores its result.
            await upstream.set(text: "v2")
            #expect(
                try await notesB.get(9, orFetch: { try await upstream.fetchOne($0) })?.text == (guardOn ? "v2" : "v1"))
            if guardOn { #expect(try notesB.get(9)?.text == "v2") }
        }
    }
}
