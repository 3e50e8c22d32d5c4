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
}
