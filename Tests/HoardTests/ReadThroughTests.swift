import Foundation
@_spi(LMDB) import Hoard
import HoardTestSupport
import LMDB
import Synchronization
import Testing

/// A source of truth that counts its calls and holds every fetch at a gate until the test opens
/// it, so that the test decides when fetches end (no sleeps).
actor FakeUpstream {
    struct Failure: Error, Equatable {}

    private(set) var calls: [[Int64]] = []
    private(set) var cancelledFetches = 0
    private(set) var finishedFetches = 0
    private var open = false
    private var waiting: [CheckedContinuation<Void, Never>] = []
    /// What the next fetches return: the text of every note, or nil to fail.
    var text: String? = "v1"
    /// IDs that do not exist upstream.
    var absent: Set<Int64> = []

    init(open: Bool = false) { self.open = open }

    func fetch(_ ids: [Int64]) async throws -> [Note] {
        calls.append(ids)
        while !open { await withCheckedContinuation { waiting.append($0) } }
        defer { finishedFetches += 1 }
        if Task.isCancelled {
            cancelledFetches += 1
            throw CancellationError()
        }
        guard let text else { throw Failure() }
        return ids.filter { !absent.contains($0) }.map { Note(id: $0, text: text, stars: Int($0), pinned: false) }
    }

    func fetchOne(_ id: Int64) async throws -> Note? { try await fetch([id]).first }

    func release() {
        open = true
        for waiter in waiting { waiter.resume() }
        waiting = []
    }

    func close() { open = false }
    func set(text: String?) { self.text = text }
    func set(absent: Set<Int64>) { self.absent = absent }
    var fetchedIDs: [Int64] { calls.flatMap { $0 } }
}

/// Yields until `condition` holds; the condition is state another task changes, not a time.
func eventually(_ what: String, _ condition: () async throws -> Bool) async throws {
    // A million yields, and at least 30 s: some conditions wait for a timer of the store's.
    let start = ContinuousClock.now
    var yields = 0
    while yields < 1_000_000 || ContinuousClock.now - start < .seconds(30) {
        if try await condition() { return }
        await Task.yield()
        yields += 1
    }
    Issue.record("never happened: \(what)")
    throw CancellationError()
}

@Suite("Read-through: single flight, stale-while-revalidate, stale-if-error")
struct ReadThroughTests {
    @Test("1,000 concurrent gets of 10 cold keys make exactly 10 fetches, and every caller gets its key's model")
    func singleFlight() async throws {
        try await withTemporaryStore { store in
            let notes = try store.collection(Note.self, timeToLive: .hours(1))
            let upstream = FakeUpstream()
            let results = try await withThrowingTaskGroup(of: (Int64, Note?).self) { group in
                for caller in 0..<1_000 {
                    let id = Int64(caller % 10)
                    group.addTask { (id, try await notes.get(id, orFetch: { try await upstream.fetchOne($0) })) }
                }
                // Every caller has joined a flight once 10 fetches have started and 990 joined them.
                try await eventually("all callers waiting") {
                    await upstream.calls.count == 10 && notes.statistics().coalesced == 990
                }
                await upstream.release()
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(results.count == 1_000)
            #expect(results.allSatisfy { id, note in note?.id == id && note?.text == "v1" })
            #expect(await upstream.calls.count == 10)
            #expect(Set(await upstream.fetchedIDs) == Set(0..<10))
            let statistics = notes.statistics()
            #expect(statistics.misses == 1_000 && statistics.fetches == 10 && statistics.coalesced == 990)
            // Stored, with the collection's time to live: the next reads are hits without a fetch.
            #expect(try notes.get(3)?.text == "v1")
            #expect(
                try await notes.get(
                    3,
                    orFetch: { _ in
                        Issue.record("fetched a fresh record"); return nil
                    }) != nil)
            // Both reads count: the plain get and the read-through one.
            #expect(notes.statistics().hits == 2)
        }
    }

    @Test("a fetch error reaches all 100 waiters of the key and is not remembered: the next miss fetches again")
    func errorsReachEveryWaiter() async throws {
        try await withTemporaryStore { store in
            let notes = try store.collection(Note.self)
            let upstream = FakeUpstream()
            await upstream.set(text: nil)
            let outcomes = try await withThrowingTaskGroup(of: Bool.self) { group in
                for _ in 0..<100 {
                    group.addTask {
                        do {
                            _ = try await notes.get(7, orFetch: { try await upstream.fetchOne($0) })
                            return false
                        } catch is FakeUpstream.Failure {
                            return true
                        }
                    }
                }
                try await eventually("all waiters joined") {
                    await upstream.calls.count == 1 && notes.statistics().coalesced == 99
                }
                await upstream.release()
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(outcomes.count == 100 && outcomes.allSatisfy { $0 })
            #expect(notes.statistics().fetchErrors == 1)
            #expect(try notes.get(7) == nil)  // nothing stored
            await upstream.set(text: "back")
            #expect(try await notes.get(7, orFetch: { try await upstream.fetchOne($0) })?.text == "back")
            #expect(await upstream.calls.count == 2)
        }
    }

    @Test("stale-while-revalidate returns the old model at once, and exactly one refresh runs")
    func staleWhileRevalidate() async throws {
        let clock = ManualClock()
        try await withTemporaryStore(options: .testing(clock: clock)) { store in
            let notes = try store.collection(
                Note.self, timeToLive: .seconds(60), freshness: Freshness(staleWhileRevalidate: .seconds(30)))
            try await notes.put(Note(id: 1, text: "old", stars: 1, pinned: false))
            clock.advance(by: .seconds(70))  // expired 10 s ago, within the 30 s window
            let upstream = FakeUpstream()
            await upstream.set(text: "new")
            // The gate is closed: the refresh cannot end, yet every read returns at once.
            for _ in 0..<20 {
                #expect(try await notes.get(1, orFetch: { try await upstream.fetchOne($0) })?.text == "old")
            }
            try await eventually("the refresh started") { await upstream.calls.count == 1 }
            await upstream.release()
            try await eventually("the refresh ended") { notes.statistics().fetchesInFlight == 0 }
            #expect(try notes.get(1)?.text == "new")
            #expect(await upstream.calls.count == 1)
            let statistics = notes.statistics()
            #expect(statistics.refreshes == 1 && statistics.staleServed == 20 && statistics.fetches == 1)
            #expect(try notes.header(of: 1)?.expiresAt == clock.nowMilliseconds + 60_000)

            // Past the window, a read waits for the fetch.
            clock.advance(by: .seconds(100))
            await upstream.set(text: "newest")
            #expect(try await notes.get(1, orFetch: { try await upstream.fetchOne($0) })?.text == "newest")
        }
    }

    @Test("stale-if-error returns the old model when the upstream fails, reports the error, and throws past the window")
    func staleIfError() async throws {
        let clock = ManualClock()
        let reported = Mutex<[FetchFailure.Stage]>([])
        try await withTemporaryStore(options: .testing(clock: clock)) { store in
            let notes = try store.collection(
                Note.self, timeToLive: .seconds(60),
                freshness: Freshness(
                    staleIfError: .seconds(120),
                    onFetchError: { failure in reported.withLock { $0.append(failure.stage) } }
                ))
            try await notes.put(Note(id: 1, text: "old", stars: 1, pinned: false))
            let upstream = FakeUpstream(open: true)
            await upstream.set(text: nil)
            clock.advance(by: .seconds(100))  // expired 40 s ago: within 120 s
            #expect(try await notes.get(1, orFetch: { try await upstream.fetchOne($0) })?.text == "old")
            #expect(reported.withLock { $0 } == [.fetchServedStale])
            clock.advance(by: .seconds(100))  // expired 140 s ago
            await #expect(throws: FakeUpstream.Failure.self) {
                try await notes.get(1, orFetch: { try await upstream.fetchOne($0) })
            }
            #expect(await upstream.calls.count == 2)
            #expect(notes.statistics().staleServed == 1 && notes.statistics().fetchErrors == 2)
        }
    }

    @Test(
        "the bulk form fetches each missing key once, even with overlapping concurrent calls; absent IDs are left out")
    func bulk() async throws {
        try await withTemporaryStore { store in
            let notes = try store.collection(Note.self)
            try await notes.put(Note(id: 5, text: "stored", stars: 5, pinned: false))
            let upstream = FakeUpstream()
            await upstream.set(absent: [9])
            async let first = notes.get([1, 2, 3, 5], orFetchMissing: { try await upstream.fetch($0) })
            try await eventually("the first call's fetch started") { await upstream.calls.count == 1 }
            async let second = notes.get([3, 2, 4, 9], orFetchMissing: { try await upstream.fetch($0) })
            try await eventually("the second call's fetch started") { await upstream.calls.count == 2 }
            await upstream.release()
            let (one, two) = try await (first, second)
            #expect(one.map(\.id) == [1, 2, 3, 5] && one.last?.text == "stored")
            #expect(two.map(\.id) == [3, 2, 4])  // 9 does not exist
            #expect(await upstream.calls == [[1, 2, 3], [4, 9]])
            #expect(notes.statistics().coalesced == 2)
            #expect(try notes.scan().map(\.id) == [1, 2, 3, 4, 5])
        }
    }

    @Test(
        "a cancelled waiter stops waiting while the fetch goes on for the others; with no waiter left it is cancelled")
    func cancellation() async throws {
        try await withTemporaryStore { store in
            let notes = try store.collection(Note.self)
            let upstream = FakeUpstream()
            let leaving = Task { try await notes.get(1, orFetch: { try await upstream.fetchOne($0) }) }
            let staying = Task { try await notes.get(1, orFetch: { try await upstream.fetchOne($0) }) }
            try await eventually("both wait") { await upstream.calls.count == 1 && notes.statistics().coalesced == 1 }
            leaving.cancel()
            await #expect(throws: CancellationError.self) { try await leaving.value }  // the gate is still closed
            await upstream.release()
            #expect(try await staying.value?.text == "v1")
            #expect(await upstream.cancelledFetches == 0)

            // A fetch whose only waiter leaves is cancelled, and the next miss starts a new one.
            await upstream.close()
            let alone = Task { try await notes.get(2, orFetch: { try await upstream.fetchOne($0) }) }
            try await eventually("it waits") { await upstream.calls.count == 2 }
            alone.cancel()
            await #expect(throws: CancellationError.self) { try await alone.value }
            let again = Task { try await notes.get(2, orFetch: { try await upstream.fetchOne($0) }) }
            try await eventually("a new fetch started") { await upstream.calls.count == 3 }
            await upstream.release()
            #expect(try await again.value?.text == "v1")
            try await eventually("the abandoned fetch ended") { await upstream.finishedFetches == 3 }
            #expect(await upstream.cancelledFetches == 1)
        }
    }

    @Test("a nil fetch deletes the stored record; with a negative time to live the answer is remembered that long")
    func absentIDs() async throws {
        let clock = ManualClock()
        try await withTemporaryStore(options: .testing(clock: clock)) { store in
            let notes = try store.collection(
                Note.self, timeToLive: .seconds(10), freshness: Freshness(negativeTimeToLive: .seconds(30)))
            try await notes.put(Note(id: 1, text: "gone upstream", stars: 1, pinned: false))
            clock.advance(by: .seconds(11))
            let upstream = FakeUpstream(open: true)
            await upstream.set(absent: [1])
            #expect(try await notes.get(1, orFetch: { try await upstream.fetchOne($0) }) == nil)
            #expect(try notes.count() == 0)
            #expect(try await notes.get(1, orFetch: { try await upstream.fetchOne($0) }) == nil)
            #expect(await upstream.calls.count == 1 && notes.statistics().absentServed == 1)
            clock.advance(by: .seconds(31))
            #expect(try await notes.get(1, orFetch: { try await upstream.fetchOne($0) }) == nil)
            #expect(await upstream.calls.count == 2)
        }
    }

    @Test("a bulk read-through counts as one get each would: a stale record served and a remembered absence are misses")
    func bulkCountsAsSingleGets() async throws {
        let clock = ManualClock()
        try await withTemporaryStore(options: .testing(clock: clock)) { store in
            let notes = try store.collection(
                Note.self, timeToLive: .seconds(60),
                freshness: Freshness(staleWhileRevalidate: .seconds(30), negativeTimeToLive: .seconds(30)))
            try await notes.put(Note(id: 1, text: "old", stars: 1, pinned: false))
            clock.advance(by: .seconds(70))  // 1: expired 10 s ago, within its stale window
            try await notes.put(Note(id: 3, text: "fresh", stars: 3, pinned: false))
            let absent = FakeUpstream(open: true)
            await absent.set(absent: [4])
            // 4: remembered absent.
            #expect(try await notes.get(4, orFetch: { try await absent.fetchOne($0) }) == nil)
            // The gate stays closed, so the stale record's refresh cannot end and make it fresh.
            let upstream = FakeUpstream()
            func counts() -> (hits: Int, misses: Int) { (notes.statistics().hits, notes.statistics().misses) }

            let beforeSingle = counts()
            for id: Int64 in [1, 3, 4] { _ = try await notes.get(id, orFetch: { try await upstream.fetchOne($0) }) }
            let afterSingle = counts()
            let served = try await notes.get([1, 3, 4], orFetchMissing: { try await upstream.fetch($0) })
            let afterBulk = counts()

            #expect(served.map(\.text) == ["old", "fresh"])
            #expect(afterSingle.hits - beforeSingle.hits == 1 && afterSingle.misses - beforeSingle.misses == 2)
            #expect(afterBulk.hits - afterSingle.hits == 1 && afterBulk.misses - afterSingle.misses == 2)
            await upstream.release()
            try await eventually("the refresh ended") { notes.statistics().fetchesInFlight == 0 }
        }
    }

    @Test("a damaged record is fetched again and replaced; a stale one is refreshed by the read's fetcher")
    func damagedAndRefreshed() async throws {
        let clock = ManualClock()
        try await withTemporaryStore(options: .testing(clock: clock)) { store in
            let upstream = FakeUpstream(open: true)
            let notes = try store.collection(
                Note.self, timeToLive: .seconds(60), freshness: Freshness(staleWhileRevalidate: .seconds(60)))
            let fetch: @Sendable (Int64) async throws -> Note? = { id in try await upstream.fetchOne(id) }
            let database = try #require(try store.recordDatabase(of: "Note"))
            try store.writeLMDB { txn in try txn.put([0xDE, 0xAD], forKey: 3.keyBytes, in: database) }
            #expect(try await notes.get(3, orFetch: fetch)?.text == "v1")
            #expect(try notes.get(3)?.text == "v1")

            clock.advance(by: .seconds(70))
            await upstream.set(text: "v2")
            #expect(try await notes.get(3, orFetch: fetch)?.text == "v1")  // stale, refreshed by `fetch`
            try await eventually("the fetcher refreshed it") { notes.statistics().fetchesInFlight == 0 }
            #expect(try notes.get(3)?.text == "v2")
            let both = try await notes.get([3, 4]) { ids in try await upstream.fetch(ids) }
            #expect(both.map(\.text) == ["v2", "v2"])
            #expect(await upstream.calls.count == 3)
        }
    }
}
