import Foundation
@_spi(LMDB) @testable import Hoard
import HoardTestSupport
import LMDB
import Testing

/// The lease as the store keeps it, without a bus: what each read path serves with a lease, past
/// its deadline, without one, and on a snapshot older than the lease's start. (The bus's side,
/// grants and renewals over PostgreSQL, is HoardPostgresTests' LeaseTests.)
@Suite struct StoreLeaseTests {
    static func note(_ id: Int64) -> Note { Note(id: id, text: "note \(id)", stars: 1, pinned: false) }

    /// A store holding notes 1 and 2, held to a lease it does not have yet.
    static func withStoreHeldToALease(_ body: (Store, HoardCollection<Note>) async throws -> Void) async throws {
        try await withTemporaryStore { store in
            let notes = try store.collection(Note.self)
            try await notes.put([note(1), note(2)])
            #expect(try notes.get(1) != nil, "a store no bus holds to a lease serves its records")
            store.replication.requireLease()
            try await body(store, notes)
        }
    }

    @Test func withoutALeaseEveryReadPathAnswersAsForAnExpiredRecord() async throws {
        try await Self.withStoreHeldToALease { store, notes in
            #expect(!store.replication.holdsLease)
            #expect(store.replication.leaseDeadline == nil)
            #expect(try notes.get(1) == nil)
            #expect(try store.read { txn in try notes.get(1, in: txn) } == nil)
            #expect(try !notes.contains(1))
            #expect(try notes.scan().isEmpty)
            var visited = 0
            try notes.forEach { _ in
                visited += 1
                return .next
            }
            #expect(visited == 0)
            #expect(store.replication.readsWithoutLease == 5)
            #expect(try notes.count() == 2, "nothing is deleted")

            try store.replication.beginLease(until: LeaseInstant.now().advanced(by: .seconds(3_600)))
            #expect(store.replication.holdsLease)
            #expect(try notes.get(1)?.text == "note 1")
            #expect(try store.read { txn in try notes.get(2, in: txn) }?.text == "note 2")
            #expect(try notes.contains(2))
            #expect(try notes.scan().map(\.id) == [1, 2])
        }
    }

    /// A get judges the lease at the clock reading it began with (the precise clock, never behind
    /// the lease's coarse one): a deadline of the coarse clock's now has passed for it.
    @Test func aDeadlineThatHasPassedServesNothing() async throws {
        try await Self.withStoreHeldToALease { store, notes in
            for deadline in [LeaseInstant.now().advanced(by: .seconds(-1)), LeaseInstant.now()] {
                try store.replication.beginLease(until: deadline)
                let without = store.replication.readsWithoutLease
                #expect(try notes.get(1) == nil, "deadline \(deadline)")
                #expect(try store.read { txn in try notes.get(1, in: txn) } == nil)
                #expect(try !notes.contains(1))
                #expect(store.replication.readsWithoutLease == without + 3)
            }
        }
    }

    @Test func aRunningLeaseIsExtendedAndEnded() async throws {
        try await Self.withStoreHeldToALease { store, notes in
            let first = LeaseInstant.now().advanced(by: .seconds(60))
            try store.replication.beginLease(until: first)
            store.replication.extendLease(until: first.advanced(by: .seconds(60)))
            #expect(store.replication.leaseDeadline == first.advanced(by: .seconds(60)))
            store.replication.extendLease(until: first)
            #expect(store.replication.leaseDeadline == first.advanced(by: .seconds(60)), "a deadline never moves back")
            #expect(try notes.get(1) != nil)
            store.replication.endLease()
            #expect(try notes.get(1) == nil)
            #expect(!store.replication.holdsLease)
            // An ended lease is not brought back by a renewal: only a new one, after a catch-up.
            store.replication.extendLease(until: first.advanced(by: .seconds(120)))
            #expect(try notes.get(1) == nil)
        }
    }

    /// A read transaction opened before the lease began may lack what the catch-up before it
    /// applied: it is not vouched for, while the lease runs, as a transaction opened after is.
    @Test func aSnapshotOlderThanTheLeaseIsNotVouchedFor() async throws {
        try await Self.withStoreHeldToALease { store, notes in
            try store.read { old in
                // The catch-up a lease waits for: a commit after the old snapshot.
                try notes.put(Self.note(3))
                try store.replication.beginLease(until: LeaseInstant.now().advanced(by: .seconds(3_600)))
                #expect(try notes.get(1, in: old) == nil)
                #expect(try notes.get(1) != nil)
            }
            #expect(try store.read { txn in try notes.get(3, in: txn) } != nil)
        }
    }

    /// Without a lease the store may have missed an invalidation: a failed fetch throws rather than
    /// serve the record stale-if-error, which the same collection does under a lease.
    @Test func withoutALeaseAFailedFetchServesNothingStale() async throws {
        let clock = ManualClock()
        try await withTemporaryStore(options: .testing(clock: clock)) { store in
            let notes = try store.collection(
                Note.self, timeToLive: .seconds(10), freshness: Freshness(staleIfError: .seconds(600)))
            try await notes.put(Self.note(1))
            clock.advance(by: .seconds(11))
            let upstream = FakeUpstream(open: true)
            await upstream.set(text: nil)
            let fetch: @Sendable (Int64) async throws -> Note? = { try await upstream.fetchOne($0) }
            #expect(try await notes.get(1, orFetch: fetch)?.text == "note 1", "held to no lease: stale-if-error")
            clock.advance(by: .seconds(1))  // past the failed fetch's retry period
            store.replication.requireLease()
            await #expect(throws: FakeUpstream.Failure.self) { try await notes.get(1, orFetch: fetch) }
            #expect(await upstream.calls.count == 2)
            #expect(try notes.count() == 1, "nothing is deleted")
        }
    }

    /// A fetch begun while the store held its lease may have read the upstream before a change the
    /// store has not seen since: a read without the lease does not join it, and its result is not
    /// stored.
    @Test func withoutALeaseAReadJoinsNoEarlierFetch() async throws {
        try await withTemporaryStore { store in
            let notes = try store.collection(Note.self)
            let upstream = FakeUpstream()
            await upstream.set(text: "before")
            try await withThrowingTaskGroup(of: String?.self) { group in
                group.addTask { try await notes.get(7, orFetch: { try await upstream.fetchOne($0) })?.text }
                try await eventually("the first fetch called the upstream") { await upstream.calls.count == 1 }
                store.replication.requireLease()
                group.addTask { try await notes.get(7, orFetch: { try await upstream.fetchOne($0) })?.text }
                try await eventually("the second read fetched on its own") { await upstream.calls.count == 2 }
                #expect(notes.statistics().coalesced == 0)
                await upstream.release()
                var texts: [String?] = []
                for try await text in group { texts.append(text) }
                #expect(texts == ["before", "before"])
            }
            #expect(store.replication.discardedFills == 1, "the first fetch's result, which may be old")
            try store.replication.beginLease(until: LeaseInstant.now().advanced(by: .seconds(3_600)))
            #expect(try notes.get(7)?.text == "before", "the second read's own fetch is stored")
        }
    }
}
