internal import LMDB
internal import Dispatch
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
internal import Synchronization

// Replicas that agree. Hoard's part is engine-neutral: an outbox of the keys to announce, written
// in the same transaction as the local change (nothing is lost while the bus is down; a key
// changed a thousand times is one entry), and remote changes applied together with the bus's
// position (each exactly once, across crashes). A bus (PostgresBus, InMemoryBus) carries the keys.

/// A store's side of replication: its identity, its outbox of announcements, and the changes of
/// other replicas applied with a bus's position. Reached through ``Store/replication``.
///
/// A bus drives it; applications call `HoardCollection.invalidate(_:)` and read as usual.
/// docs/REPLICAS.md in the repository tells the whole story.
public struct Replication: Sendable {
    let store: Store

    /// The store's identity, a random UUID recorded in the meta database the first time it is
    /// asked for; the origin of the changes this store announces, so that it ignores its own.
    ///
    /// - Throws: ``HoardError/storage(_:)`` when the storage fails, or a read-only store has none yet.
    public func identity() throws -> UUID {
        try store.replicationState.identity.withLock { cached in
            if let cached { return cached }
            let key = Array(Store.MetaKey.identity.utf8)
            let made = UUID()
            let found = try store.readLMDB { txn in
                try txn.value(forKey: key, in: try store.requireMeta()).flatMap { UUID(keyBytes: $0) }
            }
            let identity: UUID
            if let found {
                identity = found
            } else {
                identity = try store.writeLMDB { txn in
                    let meta = try store.requireMeta()
                    // Another process may have recorded one meanwhile: the recorded one wins.
                    if let other = try txn.value(forKey: key, in: meta).flatMap({ UUID(keyBytes: $0) }) { return other }
                    try txn.put(made.keyBytes, forKey: key, in: meta)
                    return made
                }
            }
            cached = identity
            return identity
        }
    }

    // MARK: - The outbox

    /// Up to `limit` keys waiting to be announced, grouped by collection, with this store as their origin.
    ///
    /// - Throws: ``HoardError/storage(_:)`` when the storage fails.
    public func pendingAnnouncements(limit: Int = 10_000) throws -> Announcements {
        let origin = try identity()
        guard let outbox = store.outbox else { return Announcements(changes: [], entries: []) }
        // Taken before the snapshot: an entry that a removal committed before it is not in it,
        // and one whose removal commits after it is still in the set.
        let acknowledged = store.replicationState.acknowledged.withLock { $0 }
        return try store.readLMDB { txn in
            var entries: [(key: [UInt8], stamp: [UInt8])] = []
            var changes: [RemoteChange] = []
            try txn.forEach(in: outbox, range: .all) { key, value in
                guard let (collection, announced) = OutboxKey.parse(key) else { return .next }
                let entry = (key: Array(key), stamp: Array(value))
                if let stamp = acknowledged[entry.key], stamp == entry.stamp { return .next }
                if changes.last?.collection != collection {
                    changes.append(RemoteChange(origin: origin, collection: collection, keys: []))
                }
                switch announced {
                case .key(let recordKey): changes[changes.count - 1].keys.append(recordKey)
                case .tag(let tag): changes[changes.count - 1].tags.append(String(decoding: tag, as: UTF8.self))
                case .all: changes[changes.count - 1].clearsAll = true
                }
                entries.append(entry)
                return entries.count < limit ? .next : .stop
            }
            return Announcements(changes: changes, entries: entries)
        }
    }

    /// The number of keys waiting to be announced.
    ///
    /// - Throws: ``HoardError/storage(_:)`` when the storage fails.
    public func pendingCount() throws -> Int {
        guard let outbox = store.outbox else { return 0 }
        let acknowledged = store.replicationState.acknowledged.withLock { $0 }
        return try store.readLMDB { txn in
            var published = 0
            for (key, stamp) in acknowledged where try txn.value(forKey: key, in: outbox) == stamp { published += 1 }
            return try txn.count(in: outbox) - published
        }
    }

    /// Removes the announced keys from the outbox, except those written again since they were read
    /// (a later change of the same key must still be announced).
    ///
    /// The removal rides on the store's next commit, or commits on its own within 10 ms; until then
    /// ``pendingAnnouncements(limit:)`` and ``pendingCount()`` leave the keys out. Should the
    /// process end first, they are announced again, which is harmless.
    ///
    /// - Throws: nothing now; a removal that fails leaves the keys to be announced again.
    public func acknowledge(_ announcements: Announcements) async throws {
        acknowledge(announcements, within: .milliseconds(10))
    }

    /// ``acknowledge(_:)`` with the removal's commit due within `delay`.
    func acknowledge(_ announcements: Announcements, within delay: DispatchTimeInterval) {
        guard let outbox = store.outbox, !announcements.isEmpty else { return }
        let entries = announcements.entries
        let state = store.replicationState
        state.acknowledged.withLock { acknowledged in
            for entry in entries { acknowledged[entry.key] = entry.stamp }
        }
        // Holds the outbox's handle and the state, not the store (Store.submitDeferred).
        store.submitDeferred(within: delay) { txn in
            for entry in entries {
                let current = try txn.value(forKey: entry.key, in: outbox)
                if current == entry.stamp { _ = try txn.delete(entry.key, in: outbox) }
            }
        } finish: { _ in
            // Committed, the entries are gone; failed, they are announced again.
            state.acknowledged.withLock { acknowledged in
                for entry in entries where acknowledged[entry.key] == entry.stamp { acknowledged[entry.key] = nil }
            }
        }
    }

    /// Waits until keys may be waiting in the outbox: returns at once when a change was
    /// recorded since the last call returned (or at the first call), else when the next one is.
    /// For the one task of a bus that publishes; a cancelled task returns.
    public func announcementsAvailable() async {
        await store.replicationState.outboxSignal.wait()
    }
}

extension Store {
    /// The store's side of replication: its identity, the outbox a bus publishes, the changes it
    /// applies (``Replication``).
    public var replication: Replication { Replication(store: self) }

    /// The meta database; a read-only store opened before anything was written has none.
    func requireMeta() throws -> Database {
        guard let meta else {
            throw HoardError.notAHoardStore(path: path, found: [])
        }
        return meta
    }

    /// The keys of the meta database that replication uses (docs/FORMAT.md).
    enum MetaKey {
        static let identity = "identity"
        static let staleBefore = "stale-before"
        static let busPrefix = "bus:"
    }

    static func encodeMilliseconds(_ value: Int64) -> [UInt8] { withUnsafeBytes(of: value.bigEndian, Array.init) }

    static func decodeMilliseconds(_ bytes: [UInt8]) -> Int64? {
        guard bytes.count == 8 else { return nil }
        return bytes.reduce(Int64(0)) { $0 << 8 | Int64($1) }
    }

    /// The `writtenAt` of a record written at `now`: never before the last reset, so that a record
    /// written after a reset in the reset's millisecond (or under a clock that stands still) is
    /// not taken for one written before it.
    @inline(__always)
    func writeStamp(_ now: Int64) -> Int64 {
        max(now, replicationState.staleBefore.load(ordering: .relaxed))
    }
}
