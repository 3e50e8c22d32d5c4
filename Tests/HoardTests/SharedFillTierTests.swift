import Foundation
@testable import Hoard
import HoardTestSupport
import Synchronization
import TestSupport
import Testing

/// A shared fill tier in memory: a record shared once is answered to every later fill of its key.
final class MemoryTier: SharedFillTier {
    let held = Mutex<[[UInt8]: SharedRecord]>([:])
    let fills = Mutex(0)

    func fill<Fetched: Sendable>(
        collection: String, keys: [[UInt8]],
        upstream: @escaping @Sendable ([[UInt8]]) async throws -> (fetched: Fetched, records: [[UInt8]: SharedRecord])
    ) async throws -> SharedFill<Fetched> {
        fills.withLock { $0 += 1 }
        let shared = held.withLock { held in held.filter { keys.contains($0.key) } }
        let missing = keys.filter { shared[$0] == nil }
        guard !missing.isEmpty else { return SharedFill(shared: shared, fetched: [], waited: false) }
        let answer = try await upstream(missing)
        held.withLock { $0.merge(answer.records) { _, new in new } }
        return SharedFill(shared: shared, fetched: [answer.fetched], waited: false)
    }
}

/// What read-through hands a shared fill tier, and what it takes from one.
@Suite struct SharedFillTierTests {
    static func note(_ id: Int64, _ text: String) -> Note { Note(id: id, text: text, stars: 1, pinned: false) }

    @Test func aRecordSharedByOneStoreIsReadByAnother() async throws {
        let tier = MemoryTier()
        try await withTemporaryStore { a in
            try await withTemporaryStore { b in
                let (notesA, notesB) = (try a.collection(Note.self), try b.collection(Note.self))
                let sharing = (
                    a.replication.shareFills(of: [notesA.name], through: tier),
                    b.replication.shareFills(of: [notesB.name], through: tier)
                )
                let calls = Mutex(0)
                let fetch: @Sendable (Int64) async throws -> Note? = { id in
                    calls.withLock { $0 += 1 }
                    return Self.note(id, "fetched")
                }
                #expect(try await notesA.get(1, orFetch: fetch)?.text == "fetched")
                #expect(try await notesB.get(1, orFetch: fetch)?.text == "fetched")
                #expect(calls.withLock { $0 } == 1, "the second store took the first one's record")
                #expect(try notesB.get(1)?.text == "fetched", "and stored it")
                #expect(try notesB.header(of: 1)?.expiresAt == nil)
                a.replication.stopSharingFills(sharing.0)
                b.replication.stopSharingFills(sharing.1)
                #expect(try await notesA.get(2, orFetch: fetch) != nil)
                #expect(tier.fills.withLock { $0 } == 2, "a store that stopped sharing does not ask the tier")
            }
        }
    }

    /// A key this store invalidated, and whose announcement the outbox still holds, is fetched
    /// without the tier: the others have not heard of the change, and the tier may hold what it
    /// made obsolete. So is any key of a collection with a tag or a clear not yet announced.
    @Test func anUnannouncedInvalidationBypassesTheTier() async throws {
        let tier = MemoryTier()
        try await withTemporaryStore { store in
            let notes = try store.collection(Note.self)
            _ = store.replication.shareFills(of: [notes.name], through: tier)
            let text = Mutex("v1")
            let fetch: @Sendable (Int64) async throws -> Note? = { id in Self.note(id, text.withLock { $0 }) }
            #expect(try await notes.get(1, orFetch: fetch)?.text == "v1")
            text.withLock { $0 = "v2" }
            try await notes.invalidate(1)
            #expect(try await notes.get(1, orFetch: fetch)?.text == "v2", "not the tier's v1")
            #expect(tier.fills.withLock { $0 } == 1)

            // Announced (as a bus acknowledges what it published), the key goes through the tier again.
            try await store.replication.acknowledge(try store.replication.pendingAnnouncements())
            #expect(try await notes.get(2, orFetch: fetch) != nil)
            #expect(tier.fills.withLock { $0 } == 2)

            _ = try await notes.invalidate(tag: "any")
            #expect(try await notes.get(3, orFetch: fetch) != nil)
            #expect(tier.fills.withLock { $0 } == 2, "a tag not yet announced bypasses it for every key")
        }
    }

    /// An invalidation written but not yet committed counts as unannounced already: a fetch that
    /// begins in between takes its ticket after the race guard's note, so the bypass alone keeps
    /// the tier's record, which the invalidation made obsolete, out of the store.
    @Test func anInvalidationNotYetCommittedBypassesTheTier() async throws {
        try await withTemporaryStore { store in
            let notes = try store.collection(Note.self)
            let (key, name) = (Int64(1).keyBytes, notes.name)
            let seen = Mutex<Bool?>(nil)
            try await store.submit { txn in
                try notes.invalidate([key], in: txn)
                // Checked from another thread while this transaction is still open.
                let checked = DispatchSemaphore(value: 0)
                Thread {
                    seen.withLock { $0 = try? store.replication.hasUnannounced(collection: name, key: key) }
                    checked.signal()
                }.start()
                checked.wait()
            }
            #expect(seen.withLock { $0 } == true, "pending before its transaction commits")
            #expect(try store.replication.hasUnannounced(collection: name, key: key), "and after")
            #expect(try !store.replication.hasUnannounced(collection: name, key: Int64(2).keyBytes))
        }
    }

    /// A shared record that does not decode here (damaged, or another key's) is fetched instead.
    @Test func aSharedRecordThatDoesNotDecodeIsFetched() async throws {
        let tier = MemoryTier()
        try await withTemporaryStore { store in
            let notes = try store.collection(Note.self)
            _ = store.replication.shareFills(of: [notes.name], through: tier)
            let fetch: @Sendable (Int64) async throws -> Note? = { id in Self.note(id, "fetched") }
            #expect(try await notes.get(1, orFetch: fetch) != nil)
            let key = Int64(1).keyBytes
            let record = try #require(tier.held.withLock { $0[key] })
            tier.held.withLock { held in
                var damaged = record
                damaged.bytes[damaged.bytes.count - 1] ^= 0xFF
                held[Int64(2).keyBytes] = record  // key 1's record under key 2
                held[Int64(3).keyBytes] = damaged
            }
            #expect(try await notes.get(2, orFetch: fetch)?.id == 2)
            #expect(try await notes.get(3, orFetch: fetch)?.text == "fetched")
        }
    }
}
