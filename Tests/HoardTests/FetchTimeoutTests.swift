import Foundation
import Hoard
import HoardTestSupport
import Synchronization
import Testing

/// The error an async read-through throws, or a recorded issue when it returns.
func readThroughError(_ body: () async throws -> Note?) async -> (any Error)? {
    do {
        let model = try await body()
        Issue.record("no error; returned \(String(describing: model))")
        return nil
    } catch {
        return error
    }
}

/// Read-through against an upstream that does not answer: FakeUpstream's gate stays closed until
/// the test opens it, so a read that returns before then returned because its timeout passed.
/// The timeouts are real time (tens of milliseconds); the records' ages are the manual clock's.
@Suite("Read-through timeouts and refresh-ahead")
struct FetchTimeoutTests {
    @Test("soft timeout: a stale record is returned when it passes, and the fetch goes on to store its result")
    func softTimeout() async throws {
        let clock = ManualClock()
        try await withTemporaryStore(options: .testing(clock: clock)) { store in
            let notes = try store.collection(
                Note.self, timeToLive: .seconds(60),
                freshness: Freshness(staleIfError: .seconds(120), timeouts: FetchTimeouts(soft: .milliseconds(50))))
            try await notes.put(Note(id: 1, text: "old", stars: 1, pinned: false))
            clock.advance(by: .seconds(100))  // expired 40 s ago: within stale-if-error
            let upstream = FakeUpstream()
            await upstream.set(text: "new")
            let started = ContinuousClock.now
            #expect(try await notes.get(1, orFetch: { try await upstream.fetchOne($0) })?.text == "old")
            #expect(ContinuousClock.now - started >= .milliseconds(50))
            var statistics = notes.statistics()
            #expect(statistics.softTimeouts == 1 && statistics.staleServed == 1 && statistics.hardTimeouts == 0)
            #expect(statistics.fetchesInFlight == 1)  // the gate is closed: the fetch still waits

            // A second read meanwhile joins the fetch under way rather than starting another.
            #expect(try await notes.get(1, orFetch: { try await upstream.fetchOne($0) })?.text == "old")
            #expect(await upstream.calls.count == 1)

            await upstream.release()
            try await eventually("the fetch stored its result") { notes.statistics().fetchesInFlight == 0 }
            #expect(try notes.get(1)?.text == "new")
            #expect(await upstream.cancelledFetches == 0)
            statistics = notes.statistics()
            #expect(statistics.softTimeouts == 2 && statistics.fetches == 1)
        }
    }

    @Test("hard timeout: without a stale record the read throws fetchTimedOut; the fetch completes in the background")
    func hardTimeout() async throws {
        try await withTemporaryStore { store in
            let notes = try store.collection(
                Note.self, timeToLive: .seconds(60),
                freshness: Freshness(timeouts: FetchTimeouts(soft: .milliseconds(10), hard: .milliseconds(60))))
            let upstream = FakeUpstream()
            let started = ContinuousClock.now
            let error = await readThroughError { try await notes.get(7, orFetch: { try await upstream.fetchOne($0) }) }
            #expect(ContinuousClock.now - started >= .milliseconds(60))  // the soft timeout has no record to serve
            let timedOut = try #require(error as? HoardError)
            #expect(timedOut.kind == .fetchTimedOut && timedOut.key?.description == "7")
            #expect("\(timedOut)".contains("Note[7]") && "\(timedOut)".contains("0.06 seconds"))
            #expect(notes.statistics().hardTimeouts == 1 && notes.statistics().softTimeouts == 0)

            await upstream.release()
            try await eventually("the fetch stored its result") { notes.statistics().fetchesInFlight == 0 }
            #expect(try notes.get(7)?.text == "v1")
            #expect(await upstream.cancelledFetches == 0)
            #expect(await upstream.calls.count == 1)
        }
    }

    @Test("hard timeout without background completion: the fetch nobody waits for is cancelled, nothing is stored")
    func hardTimeoutCancels() async throws {
        try await withTemporaryStore { store in
            let notes = try store.collection(Note.self, timeToLive: .seconds(60))
            let upstream = FakeUpstream()
            let timeouts = FetchTimeouts(hard: .milliseconds(30), completesInBackground: false)
            let error = await readThroughError {
                try await notes.get(3, timeouts: timeouts, orFetch: { try await upstream.fetchOne($0) })
            }
            #expect((error as? HoardError)?.kind == .fetchTimedOut)
            await upstream.release()
            try await eventually("the cancelled fetch ended") { await upstream.finishedFetches == 1 }
            #expect(await upstream.cancelledFetches == 1)
            try await eventually("its flight is gone") { notes.statistics().fetchesInFlight == 0 }
            #expect(try notes.get(3) == nil)
        }
    }

    @Test("a timeout bounds the upstream, not the write of its answer: a read waits for a slow commit")
    func slowCommit() async throws {
        // The upstream answers at once, but its task must start well before the hard timeout for
        // the round to test anything (an answer after the deadline is rightly a timeout). On a
        // machine too loaded for that, the round is repeated with a longer timeout.
        for hard in [250, 1_000, 4_000] {
            if try await slowCommitRound(hard: .milliseconds(hard)) { return }
        }
        Issue.record("the upstream's task never started within half its hard timeout, 4 s the longest")
    }

    /// One round of ``slowCommit()``: `false` when the upstream answered too late to test anything.
    private func slowCommitRound(hard: Duration) async throws -> Bool {
        try await withTemporaryStore { store in
            let notes = try store.collection(Note.self, freshness: Freshness(timeouts: FetchTimeouts(hard: hard)))
            // Another writer holds LMDB's write lock, so the answer's commit waits for it.
            let holding = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            Thread {
                _ = try? store.write { _ in
                    holding.signal()
                    release.wait()
                }
            }.start()
            holding.wait()
            let answeredAt = Mutex<ContinuousClock.Instant?>(nil)
            let started = ContinuousClock.now
            let read = Task {
                try await notes.get(5) { id in
                    answeredAt.withLock { $0 = .now }
                    return Note(id: id, text: "answered", stars: 0, pinned: false)
                }
            }
            try await eventually("the upstream answered") { answeredAt.withLock { $0 } != nil }
            let answered = try #require(answeredAt.withLock { $0 })
            guard answered - started < hard / 2 else {
                release.signal()
                _ = try? await read.value  // a timeout or the answer: this round tells nothing
                return false
            }
            // Not synchronization: the hard timeout, which began after `started` and before the
            // upstream was called, passes while the answer's commit is held.
            try await Task.sleep(until: answered + hard + .milliseconds(150), clock: .continuous)
            #expect(notes.statistics().fetchesInFlight == 1)
            release.signal()
            #expect(try await read.value?.text == "answered")
            #expect(notes.statistics().hardTimeouts == 0)
            #expect(try notes.get(5)?.text == "answered")
            return true
        }
    }

    @Test("a call's timeouts replace the collection's: none waits as long as the fetch takes")
    func perCall() async throws {
        try await withTemporaryStore { store in
            let notes = try store.collection(
                Note.self, freshness: Freshness(timeouts: FetchTimeouts(hard: .milliseconds(20))))
            let upstream = FakeUpstream()
            let waiting = Task {
                try await notes.get(4, timeouts: FetchTimeouts(), orFetch: { try await upstream.fetchOne($0) })
            }
            // The collection's 20 ms would have ended the read; it still waits once the fetch has
            // started and a read with the collection's timeout has timed out on the same flight.
            try await eventually("the fetch started") { await upstream.calls.count == 1 }
            let error = await readThroughError { try await notes.get(4, orFetch: { try await upstream.fetchOne($0) }) }
            #expect((error as? HoardError)?.kind == .fetchTimedOut)
            await upstream.release()
            #expect(try await waiting.value?.text == "v1")
            #expect(await upstream.calls.count == 1)
        }
    }

    @Test("many IDs: each stale ID is served at the soft timeout, and an ID without one times out by name")
    func bulk() async throws {
        let clock = ManualClock()
        try await withTemporaryStore(options: .testing(clock: clock)) { store in
            let notes = try store.collection(
                Note.self, timeToLive: .seconds(60),
                freshness: Freshness(
                    staleIfError: .seconds(120),
                    timeouts: FetchTimeouts(soft: .milliseconds(20), hard: .milliseconds(80))))
            try await notes.put([1, 2].map { Note(id: $0, text: "old", stars: 1, pinned: false) })
            clock.advance(by: .seconds(100))
            let upstream = FakeUpstream()
            let stale = try await notes.get([1, 2], orFetchMissing: { try await upstream.fetch($0) })
            #expect(stale.map(\.text) == ["old", "old"])
            #expect(notes.statistics().softTimeouts == 2)

            let started = ContinuousClock.now
            do {
                _ = try await notes.get([5, 1], orFetchMissing: { try await upstream.fetch($0) })
                Issue.record("no error")
            } catch let error as HoardError {
                #expect(error.kind == .fetchTimedOut && error.key?.description == "5")
            }
            #expect(ContinuousClock.now - started >= .milliseconds(80))
            await upstream.release()
            try await eventually("the fetches stored their results") { notes.statistics().fetchesInFlight == 0 }
            #expect(try [1, 2, 5].map { try notes.get($0)?.text } == ["v1", "v1", "v1"])
        }
    }

    @Test(
        "a failing upstream sees one call per key per retry period: refresh-ahead, stale-while-revalidate, stale-if-error"
    )
    func failedFetchBacksOff() async throws {
        let clock = ManualClock()
        try await withTemporaryStore(options: .testing(clock: clock)) { store in
            let notes = try store.collection(
                Note.self, timeToLive: .seconds(10),
                freshness: Freshness(
                    staleWhileRevalidate: .seconds(20), staleIfError: .hours(1), refreshAhead: 0.5,
                    retryFailedFetchAfter: .seconds(1)))
            try await notes.put(Note(id: 1, text: "old", stars: 1, pinned: false))
            let upstream = FakeUpstream(open: true)
            await upstream.set(text: nil)
            let fetch: @Sendable (Int64) async throws -> Note? = { try await upstream.fetchOne($0) }
            /// `count` reads of note 1, each served the stored "old", then the failed fetches ended.
            func reads(_ count: Int, failing fetches: Int) async throws {
                for _ in 0..<count { #expect(try await notes.get(1, orFetch: fetch)?.text == "old") }
                try await eventually("\(fetches) fetches failed") { notes.statistics().fetchErrors == fetches }
                try await eventually("no fetch under way") { notes.statistics().fetchesInFlight == 0 }
            }

            clock.advance(by: .seconds(5))  // refresh-ahead: the first hit's refresh fails
            try await reads(1, failing: 1)
            try await reads(50, failing: 1)
            #expect(await upstream.calls.count == 1)
            #expect(notes.statistics().throttledRefreshes == 50)
            clock.advance(by: .milliseconds(999))
            try await reads(10, failing: 1)
            clock.advance(by: .milliseconds(1))  // the period is over: one more call, then none
            try await reads(1, failing: 2)
            try await reads(9, failing: 2)
            #expect(await upstream.calls.count == 2)

            clock.advance(by: .seconds(6))  // expired, within stale-while-revalidate
            try await reads(1, failing: 3)
            try await reads(50, failing: 3)
            #expect(await upstream.calls.count == 3)

            clock.advance(by: .seconds(30))  // past it, within stale-if-error: reads wait for a fetch
            try await reads(1, failing: 4)
            try await reads(50, failing: 4)
            #expect(await upstream.calls.count == 4)
            #expect(notes.statistics().throttledRefreshes == 50 + 10 + 9 + 50 + 50)

            // An upstream that answers again is called once the period is over, and clears it.
            await upstream.set(text: "new")
            clock.advance(by: .seconds(1))
            #expect(try await notes.get(1, orFetch: fetch)?.text == "new")
            #expect(await upstream.calls.count == 5)
        }
    }

    @Test("an invalidation ends a key's retry period: the next read fetches at once, and is not served stale")
    func invalidationEndsTheRetryPeriod() async throws {
        let clock = ManualClock()
        try await withTemporaryStore(options: .testing(clock: clock)) { store in
            let notes = try store.collection(
                Note.self, timeToLive: .seconds(10),
                freshness: Freshness(staleWhileRevalidate: .seconds(5), staleIfError: .hours(1)))
            try await notes.put(Note(id: 1, text: "old", stars: 1, pinned: false))
            let upstream = FakeUpstream(open: true)
            await upstream.set(text: nil)
            let fetch: @Sendable (Int64) async throws -> Note? = { try await upstream.fetchOne($0) }
            clock.advance(by: .seconds(60))  // past stale-while-revalidate: a read fetches, and fails
            #expect(try await notes.get(1, orFetch: fetch)?.text == "old")
            #expect(try await notes.get(1, orFetch: fetch)?.text == "old")
            #expect(await upstream.calls.count == 1, "the second read is within the retry period")
            try await notes.invalidate(1)  // the record is removed
            await upstream.set(text: "new")
            #expect(try await notes.get(1, orFetch: fetch)?.text == "new", "fetched at once, not served stale")
            #expect(await upstream.calls.count == 2)
        }
    }

    @Test("refresh-ahead: a hit past the fraction refreshes once in the background; a failed refresh keeps the record")
    func refreshAhead() async throws {
        let clock = ManualClock()
        try await withTemporaryStore(options: .testing(clock: clock)) { store in
            let notes = try store.collection(
                Note.self, timeToLive: .seconds(10), freshness: Freshness(refreshAhead: 0.8))
            try await notes.put(Note(id: 1, text: "old", stars: 1, pinned: false))
            let upstream = FakeUpstream()
            await upstream.set(text: "new")
            let fetch: @Sendable (Int64) async throws -> Note? = { try await upstream.fetchOne($0) }

            clock.advance(by: .milliseconds(7_999))  // before 80% of its life: a plain hit
            #expect(try await notes.get(1, orFetch: fetch)?.text == "old")
            #expect(await upstream.calls.isEmpty)
            #expect(notes.statistics().refreshesAhead == 0)

            clock.advance(by: .milliseconds(1))  // at 80%: every hit returns at once, one refresh starts
            for _ in 0..<20 { #expect(try await notes.get(1, orFetch: fetch)?.text == "old") }
            try await eventually("the refresh started") { await upstream.calls.count == 1 }
            #expect(notes.statistics().refreshesAhead == 1 && notes.statistics().refreshes == 1)
            await upstream.release()
            try await eventually("the refresh ended") { notes.statistics().fetchesInFlight == 0 }
            #expect(try notes.get(1)?.text == "new")
            #expect(try notes.header(of: 1)?.expiresAt == clock.nowMilliseconds + 10_000)
            #expect(try await notes.get(1, orFetch: fetch)?.text == "new")
            #expect(await upstream.calls.count == 1)  // renewed: not due again

            // A refresh that fails leaves the record as it was, and counts the error.
            await upstream.set(text: nil)
            clock.advance(by: .seconds(9))
            #expect(try await notes.get(1, orFetch: fetch)?.text == "new")
            try await eventually("the failed refresh ended") { notes.statistics().fetchErrors == 1 }
            try await eventually("its flight is gone") { notes.statistics().fetchesInFlight == 0 }
            #expect(try notes.get(1)?.text == "new")
            #expect(notes.statistics().refreshesAhead == 2)

            // Outside (0, 1) the fraction turns refreshing ahead off.
            let off = try store.collection(
                Note.self, named: "off", timeToLive: .seconds(10), freshness: Freshness(refreshAhead: 1.5))
            try await off.put(Note(id: 1, text: "kept", stars: 1, pinned: false))
            clock.advance(by: .milliseconds(9_999))
            #expect(try await off.get(1, orFetch: fetch)?.text == "kept")
            #expect(off.statistics().refreshesAhead == 0 && off.statistics().fetches == 0)
        }
    }
}

/// What a revalidating fetch receives (the stored model), as the test saw it.
actor Revalidations {
    private(set) var received: [Note?] = []
    func record(_ stored: Note?) { received.append(stored) }
}

@Suite("Read-through revalidation: the fetch's own expiry, and \"not modified\"")
struct RevalidationTests {
    @Test("touch gives a record a new expiry and write time, its version and payload kept; a missing one is false")
    func touch() async throws {
        let clock = ManualClock()
        try await withTemporaryStore(options: .testing(clock: clock)) { store in
            let notes = try store.collection(Note.self, timeToLive: .seconds(60))
            try await notes.put(Note(id: 1, text: "kept", stars: 3, pinned: true))
            let before = try #require(try notes.header(of: 1))
            clock.advance(by: .seconds(70))
            #expect(try notes.get(1) == nil, "expired")
            #expect(try await notes.touch(1, expiry: .after(.seconds(30))))
            let after = try #require(try notes.header(of: 1))
            #expect(after.version == before.version)
            #expect(after.writtenAt == clock.nowMilliseconds && after.expiresAt == clock.nowMilliseconds + 30_000)
            #expect(try notes.get(1)?.text == "kept")
            #expect(try await notes.touch(2) == false)
        }
    }

    @Test("a fetched model is stored with the expiry its fetch gives")
    func ownExpiry() async throws {
        let clock = ManualClock()
        try await withTemporaryStore(options: .testing(clock: clock)) { store in
            let notes = try store.collection(Note.self, timeToLive: .seconds(60))
            let note = try await notes.get(1) { id, stored in
                #expect(stored == nil)
                return .model(Note(id: id, text: "max-age 30", stars: 0, pinned: false), expiry: .after(.seconds(30)))
            }
            #expect(note?.text == "max-age 30")
            #expect(try notes.header(of: 1)?.expiresAt == clock.nowMilliseconds + 30_000)
        }
    }

    @Test("\"not modified\" renews the stored record's expiry and write time, keeps its payload, and returns it")
    func notModified() async throws {
        let clock = ManualClock()
        try await withTemporaryStore(options: .testing(clock: clock)) { store in
            let notes = try store.collection(Note.self, timeToLive: .seconds(60))
            let stored = Note(id: 1, text: "etag 7", stars: 3, pinned: true)
            try await notes.put(stored)
            clock.advance(by: .seconds(70))  // expired
            let seen = Revalidations()
            let note = try await notes.get(1) { _, stored in
                await seen.record(stored)
                return .notModified(expiry: .after(.seconds(120)))
            }
            #expect(note == stored)
            #expect(await seen.received == [stored])
            let header = try #require(try notes.header(of: 1))
            #expect(header.expiresAt == clock.nowMilliseconds + 120_000 && header.writtenAt == clock.nowMilliseconds)
            #expect(try notes.get(1) == stored)
            #expect(notes.statistics().notModified == 1 && notes.statistics().puts == 1)

            // Nothing stored: "not modified" is taken as absent.
            let none = try await notes.get(2) { _, _ in .notModified() }
            #expect(none == nil)
            #expect(try notes.get(2) == nil)
            #expect(notes.statistics().notModified == 1)

            // Absent: the stored record is deleted.
            clock.advance(by: .seconds(200))
            #expect(try await notes.get(1) { _, _ in .absent } == nil)
            #expect(try notes.header(of: 1) == nil)
        }
    }

    @Test("refresh-ahead revalidates: the background fetch receives the stored model and renews it")
    func refreshAheadRevalidates() async throws {
        let clock = ManualClock()
        try await withTemporaryStore(options: .testing(clock: clock)) { store in
            let notes = try store.collection(
                Note.self, timeToLive: .seconds(10), freshness: Freshness(refreshAhead: 0.5))
            let stored = Note(id: 1, text: "current", stars: 1, pinned: false)
            try await notes.put(stored)
            clock.advance(by: .seconds(6))
            let seen = Revalidations()
            let fetch: @Sendable (Int64, Note?) async throws -> Revalidation<Note> = { _, stored in
                await seen.record(stored)
                return .notModified()
            }
            #expect(try await notes.get(1, orRevalidate: fetch) == stored)
            try await eventually("the refresh renewed the record") { notes.statistics().notModified == 1 }
            try await eventually("its flight is gone") { notes.statistics().fetchesInFlight == 0 }
            #expect(await seen.received == [stored])
            #expect(try notes.header(of: 1)?.expiresAt == clock.nowMilliseconds + 10_000)
            #expect(notes.statistics().refreshesAhead == 1 && notes.statistics().puts == 1)
        }
    }
}
