internal import LMDB
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
internal import Synchronization

// Replicas that agree. A service runs as several replicas, each with its own store; when a record
// changes, the others must drop their copy. Hoard's part is engine-neutral: an outbox of the keys
// to announce, written in the same LMDB transaction as the local change (so nothing is lost while
// the bus is down, and a key changed a thousand times is one entry), and the application of
// remote changes together with the bus's position (so each change applies exactly once, across
// crashes). A bus (HoardPostgres's PostgresBus, HoardTesting's InMemoryBus) carries the keys
// between stores through this API; nothing here knows the engine.

/// A position in a change bus's log: the log's identity (a log recreated from scratch has a new
/// one) and the sequence number of the last change applied from it.
public struct BusPosition: Sendable, Hashable, CustomStringConvertible {
    /// The identity of the log (for example a UUID the log was created with).
    public var log: String
    /// The sequence number of the last change applied; 0 before the first.
    public var sequence: Int64

    /// A position in log `log` after change `sequence`.
    public init(log: String, sequence: Int64) {
        self.log = log
        self.sequence = sequence
    }

    /// `log@sequence`.
    public var description: String { "\(log)@\(sequence)" }

    /// The position as the meta database keeps it: the sequence, 8 bytes big-endian, then the log's UTF-8.
    var stored: [UInt8] { withUnsafeBytes(of: sequence.bigEndian, Array.init) + Array(log.utf8) }

    init?(stored bytes: some Collection<UInt8>) {
        guard bytes.count >= 8, let log = String(validating: bytes.dropFirst(8), as: UTF8.self) else { return nil }
        sequence = bytes.prefix(8).reduce(Int64(0)) { $0 << 8 | Int64($1) }
        self.log = log
    }
}

/// Keys of one collection that changed elsewhere, as a bus delivers them: the records under them
/// are no longer current.
public struct RemoteChange: Sendable, Hashable {
    /// The identity of the store that announced the change (``Replication/identity()``), or `nil`
    /// when it came from elsewhere (a database trigger): a store ignores the changes it announced.
    public var origin: UUID?
    /// The collection's name in the store.
    public var collection: String
    /// The records' keys: the key bytes of their IDs (docs/FORMAT.md, "Keys").
    public var keys: [[UInt8]]

    /// A change of `keys` in `collection`, announced by `origin`.
    public init(origin: UUID?, collection: String, keys: [[UInt8]]) {
        self.origin = origin
        self.collection = collection
        self.keys = keys
    }
}

/// What ``Replication/apply(_:through:bus:)`` did.
public struct ApplyResult: Sendable, Hashable {
    /// Records removed.
    public var removed = 0
    /// Records kept but marked expired, for a collection that serves stale records when a fetch
    /// fails (its ``Freshness/staleIfError`` window longer than its `staleWhileRevalidate`).
    public var markedExpired = 0
    /// Changes this store announced itself, skipped.
    public var ownSkipped = 0
    /// Changes of collections this store does not have, skipped.
    public var unknownSkipped = 0
    /// Whether the batch had been applied already (its position is not after the store's): nothing was done.
    public var alreadyApplied = false
}

/// Keys waiting in the store's outbox to be announced to the other replicas, read by a bus
/// (``Replication/pendingAnnouncements(limit:)``) and removed once published
/// (``Replication/acknowledge(_:)``).
public struct Announcements: Sendable {
    /// The keys by collection, in the outbox's order.
    public var changes: [RemoteChange]
    /// The outbox entries read, each with the transaction that last wrote it: an entry written
    /// again after it was read is not removed by the acknowledgement, and is announced again.
    let entries: [(key: [UInt8], stamp: [UInt8])]

    /// How many keys.
    public var count: Int { entries.count }
    /// Whether the outbox held nothing.
    public var isEmpty: Bool { entries.isEmpty }
}

/// A store's side of replication: its identity, its outbox of announcements, and the changes of
/// other replicas applied with a bus's position. Reached through ``Store/replication``.
///
/// A bus drives it; applications call `HoardCollection.invalidate(_:)` and read as usual. The Several replicas article tells the whole story.
public struct Replication: Sendable {
    let store: Store

    /// The store's identity, a random UUID recorded in the meta database the first time it is
    /// asked for; the origin of the changes this store announces, so that it ignores its own.
    ///
    /// - Throws: `LMDBError` when LMDB fails, or a read-only store has none yet.
    public func identity() throws -> UUID {
        try store.replicationState.identity.withLock { cached in
            if let cached { return cached }
            let key = Array(Store.MetaKey.identity.utf8)
            let made = UUID()
            let found = try store.environment.read { txn in
                try txn.value(forKey: key, in: try store.requireMeta()).flatMap { UUID(keyBytes: $0) }
            }
            let identity: UUID
            if let found {
                identity = found
            } else {
                identity = try store.environment.write { txn in
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
    /// - Throws: `LMDBError` when LMDB fails.
    public func pendingAnnouncements(limit: Int = 10_000) throws -> Announcements {
        let origin = try identity()
        guard let outbox = store.outbox else { return Announcements(changes: [], entries: []) }
        return try store.environment.read { txn in
            var entries: [(key: [UInt8], stamp: [UInt8])] = []
            var changes: [RemoteChange] = []
            try txn.forEach(in: outbox, range: .all) { key, value in
                guard let (collection, recordKey) = OutboxKey.parse(key) else { return .next }
                if changes.last?.collection != collection {
                    changes.append(RemoteChange(origin: origin, collection: collection, keys: []))
                }
                changes[changes.count - 1].keys.append(recordKey)
                entries.append((Array(key), Array(value)))
                return entries.count < limit ? .next : .stop
            }
            return Announcements(changes: changes, entries: entries)
        }
    }

    /// The number of keys waiting to be announced.
    ///
    /// - Throws: `LMDBError` when LMDB fails.
    public func pendingCount() throws -> Int {
        guard let outbox = store.outbox else { return 0 }
        return try store.environment.read { txn in try txn.count(in: outbox) }
    }

    /// Removes the announced keys from the outbox, except those written again since they were read
    /// (a later change of the same key must still be announced).
    ///
    /// - Throws: `LMDBError` when LMDB fails (the keys stay and are announced again: announcing
    ///   twice is harmless).
    public func acknowledge(_ announcements: Announcements) async throws {
        guard let outbox = store.outbox, !announcements.isEmpty else { return }
        let entries = announcements.entries
        try await store.submit { txn in
            for entry in entries {
                let current = try txn.value(forKey: entry.key, in: outbox)
                if current == entry.stamp { _ = try txn.delete(entry.key, in: outbox) }
            }
        }
    }

    /// Waits until keys may be waiting in the outbox: returns at once when a change was
    /// recorded since the last call returned (or at the first call), else when the next one is.
    /// For the one task of a bus that publishes; a cancelled task returns.
    public func announcementsAvailable() async {
        await store.replicationState.outboxSignal.wait()
    }

    // MARK: - Changes from other replicas

    /// The position of `bus` this store has applied changes through, or `nil` before its first.
    ///
    /// - Throws: `LMDBError` when LMDB fails.
    public func position(of bus: String) throws -> BusPosition? {
        guard let meta = store.meta else { return nil }
        return try store.environment.read { txn in try Self.position(of: bus, meta: meta, txn: txn) }
    }

    static func position<Access>(
        of bus: String, meta: Database, txn: borrowing Transaction<Access>
    ) throws
        -> BusPosition?
    {
        try txn.value(forKey: Array((Store.MetaKey.busPrefix + bus).utf8), in: meta).flatMap {
            BusPosition(stored: $0)
        }
    }

    /// Applies changes that other replicas (or the source of truth) announced, and records that the
    /// store has applied `bus` through `position`, in one transaction of the group commit: the records
    /// are no longer served as current, and the same batch is never applied twice, even when the
    /// process is killed and the bus delivers it again.
    ///
    /// A record is removed; in a collection opened in this process with a ``Freshness/staleIfError``
    /// window longer than its `staleWhileRevalidate`, it is kept but marked expired instead, as of
    /// `staleWhileRevalidate` ago, so that read-through fetches it anew and serves the old record
    /// only when that fetch fails. Changes whose origin is this store, and changes of collections
    /// it does not have, are skipped (the position still advances). A fetch under way for one of
    /// the keys does not store its (possibly older) result.
    ///
    /// - Parameters:
    ///   - changes: the changes, in the log's order.
    ///   - position: the position after the last of them.
    ///   - bus: the bus's name (a store may follow several).
    /// - Returns: what was done; ``ApplyResult/alreadyApplied`` when the store had applied this position.
    /// - Throws: ``HoardError/busPosition(bus:reason:)`` when `position` is of another log than the
    ///   store follows (``reset(bus:to:)`` first); `LMDBError` when LMDB fails (nothing is applied).
    @discardableResult
    public func apply(
        _ changes: [RemoteChange], through position: BusPosition, bus: String
    ) async throws
        -> ApplyResult
    {
        let own = try identity()
        let meta = try store.requireMeta()
        // Databases are opened before the write: LMDB opens them in transactions of their own.
        var targets: [String: RemoteTarget] = [:]
        for change in changes where change.origin != own && targets[change.collection] == nil {
            if let database = try store.recordDatabase(of: change.collection) {
                targets[change.collection] = RemoteTarget(
                    store: store, collection: change.collection, database: database)
            }
        }
        let targetsFound = targets
        let positionKey = Array((Store.MetaKey.busPrefix + bus).utf8)
        return try await store.submit { txn in
            var result = ApplyResult()
            if let applied = try Self.position(of: bus, meta: meta, txn: txn) {
                guard applied.log == position.log else {
                    throw HoardError.busPosition(
                        bus: bus,
                        reason:
                            "the store follows log \(applied.log), not \(position.log): reset it to the new log first")
                }
                if applied.sequence >= position.sequence {
                    result.alreadyApplied = true
                    return result
                }
            }
            for change in changes {
                if change.origin == own {
                    result.ownSkipped += 1
                } else if let target = targetsFound[change.collection] {
                    try target.invalidate(change.keys, in: txn, result: &result)
                } else {
                    result.unknownSkipped += 1
                }
            }
            try txn.put(position.stored, forKey: positionKey, in: meta)
            return result
        }
    }

    /// Starts following `bus` anew at `position`, when the store cannot catch up exactly (the log
    /// was recreated, or trimmed past the store's position): every record written before now is
    /// treated as expired from now on (never served as fresh; still served within a collection's
    /// stale windows), without deleting anything. One transaction of the group commit.
    ///
    /// A process that had the store open before another process reset it learns of the reset when
    /// it opens the store again.
    ///
    /// - Throws: `LMDBError` when LMDB fails (nothing is changed).
    public func reset(bus: String, to position: BusPosition) async throws {
        let meta = try store.requireMeta()
        let positionKey = Array((Store.MetaKey.busPrefix + bus).utf8)
        let state = store.replicationState
        try await store.submit { txn in
            // One millisecond past now: a record stamped in this millisecond may predate the reset.
            let resetAt = store.options.now() + 1
            let previous = try txn.value(forKey: Array(Store.MetaKey.staleBefore.utf8), in: meta).flatMap {
                Store.decodeMilliseconds($0)
            }
            let kept = max(previous ?? 0, resetAt)
            try txn.put(Store.encodeMilliseconds(kept), forKey: Array(Store.MetaKey.staleBefore.utf8), in: meta)
            try txn.put(position.stored, forKey: positionKey, in: meta)
            // In memory before the commit: no read after it may serve an older record as fresh
            // (should the commit fail, records are only treated as stale a little early).
            state.staleBefore.max(kept, ordering: .relaxed)
        }
        state.resets.add(1, ordering: .relaxed)
        store.metrics.resets.increment()
    }

    /// Records written before this time (milliseconds since 1970: one past the millisecond of the
    /// last ``reset(bus:to:)``) are treated as expired since that reset; `nil` when the store was
    /// never reset.
    public var staleBefore: Int64? {
        let value = store.replicationState.staleBefore.load(ordering: .relaxed)
        return value == 0 ? nil : value
    }

    /// Read-through fetches whose result was not stored because the key was invalidated while the
    /// fetch was under way (their callers still got it), since the store was opened.
    public var discardedFills: Int { store.replicationState.discardedFills.load(ordering: .relaxed) }

    /// Resets done since the store was opened.
    public var resets: Int { store.replicationState.resets.load(ordering: .relaxed) }
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

    /// When a record stops being served as fresh: its expiry, or the moment of the last reset for
    /// a record written before it (`nil`: never).
    @inline(__always)
    func effectiveExpiry(writtenAt: Int64, expiresAt: Int64?) -> Int64? {
        let resetAt = replicationState.staleBefore.load(ordering: .relaxed)
        guard resetAt != 0, writtenAt < resetAt else { return expiresAt }
        // Expired as of the reset's millisecond (``Replication/reset(bus:to:)`` keeps the one after it).
        return min(expiresAt ?? (resetAt - 1), resetAt - 1)
    }

    /// ``effectiveExpiry(writtenAt:expiresAt:)`` of a record's bytes, read from its header without the checksum.
    @inline(__always)
    func effectiveExpiry(of record: UnsafeRawBufferPointer) -> Int64? {
        let expiry = RecordHeader.peekExpiry(record)
        let resetAt = replicationState.staleBefore.load(ordering: .relaxed)
        guard resetAt != 0, let writtenAt = RecordHeader.peekWrittenAt(record), writtenAt < resetAt else {
            return expiry
        }
        return min(expiry ?? (resetAt - 1), resetAt - 1)
    }
}

/// The outbox's keys: the collection's name (its UTF-8 length as two bytes big-endian, then its
/// UTF-8), then the record's key; so the entries of one collection are together.
enum OutboxKey {
    static func make(collection: String, key: some Collection<UInt8>) -> [UInt8] {
        let name = Array(collection.utf8)
        return [UInt8(truncatingIfNeeded: name.count >> 8), UInt8(truncatingIfNeeded: name.count)] + name + key
    }

    static func parse(_ bytes: UnsafeRawBufferPointer) -> (collection: String, key: [UInt8])? {
        guard bytes.count >= 2 else { return nil }
        let length = Int(bytes[0]) << 8 | Int(bytes[1])
        guard bytes.count > 2 + length,
            let name = String(validating: bytes[2..<(2 + length)], as: UTF8.self)
        else { return nil }
        return (name, Array(bytes[(2 + length)...]))
    }
}

/// What a store keeps in memory for replication.
final class ReplicationState: Sendable {
    /// The store's identity, once read or made.
    let identity = Mutex<UUID?>(nil)
    /// ``Replication/staleBefore``, 0 for never; read by every get of a record, so an atomic.
    let staleBefore = Atomic<Int64>(0)
    /// Tells the bus's publisher that the outbox has entries.
    let outboxSignal = Signal()
    /// Invalidations that fetches under way must not overwrite.
    let invalidations = InvalidationGuard()
    let discardedFills = Atomic<Int>(0)
    let resets = Atomic<Int>(0)
}

/// A wake-up for one waiter: ``notify()`` before ``wait()`` makes it return at once; many
/// notifications before a wait count as one.
final class Signal: Sendable {
    private struct State {
        var pending = true
        var waiter: CheckedContinuation<Void, Never>?
    }
    private let state = Mutex(State())

    func notify() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.pending = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    func wait() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> CheckedContinuation<Void, Never>? in
                    if state.pending || Task.isCancelled {
                        state.pending = false
                        return continuation
                    }
                    // One waiter: a second replaces the first, which returns.
                    let previous = state.waiter
                    state.waiter = continuation
                    return previous
                }
                resumeNow?.resume()
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }
}

/// Where remote changes of one collection are applied, without the collection's model type.
struct RemoteTarget {
    let store: Store
    let collection: String
    let database: Database

    /// Removes the records of `keys`, or marks them expired (see ``Replication/apply(_:through:bus:)``),
    /// keeping the collection's capacity bookkeeping, and tells the fetches under way.
    func invalidate(_ keys: [[UInt8]], in txn: borrowing WriteTransaction, result: inout ApplyResult) throws {
        let state = store.existingState(of: collection)
        let now = store.options.now()
        // Keep-as-expired only where this process serves stale records on a failed fetch.
        let expireAs: Int64? = state.flatMap { state in
            let onError = state.staleIfErrorWindow.load(ordering: .relaxed)
            let revalidate = state.revalidateWindow.load(ordering: .relaxed)
            return onError > revalidate ? now - revalidate : nil
        }
        let tracker = try BoundTracker.open(collection, keyKind: .custom, database: database, store: store, txn: txn)
        for key in keys where !key.isEmpty && key.count <= store.environment.maxKeySize {
            if let expireAs, try markExpired(key, at: expireAs, in: txn) {
                result.markedExpired += 1
                continue
            }
            if let tracker { try key.withUnsafeBytes { try tracker.willRemove($0, in: txn) } }
            if try txn.delete(key, in: database) { result.removed += 1 }
        }
        try tracker?.finish(in: txn)
        store.replicationState.invalidations.noteRemoved(collection: collection, keys: keys)
    }

    /// Rewrites the record under `key` with the expiry `at` (or its own, if earlier); `false` when
    /// there is no readable record to keep (a damaged one is then removed by the caller).
    private func markExpired(_ key: [UInt8], at expiry: Int64, in txn: borrowing WriteTransaction) throws -> Bool {
        let rewritten = try txn.withValue(forKey: key, in: database) { record -> [UInt8]? in
            guard let (header, payload) = try? RecordHeader.parse(record) else { return nil }
            if let expiresAt = header.expiresAt, expiresAt <= expiry { return [] }
            let marked = RecordHeader(version: header.version, writtenAt: header.writtenAt, expiresAt: expiry)
            return [UInt8](unsafeUninitializedCapacity: record.count) { buffer, count in
                marked.write(payload: payload, into: UnsafeMutableRawBufferPointer(buffer))
                count = record.count
            }
        }
        guard let rewritten = rewritten ?? nil else { return false }
        if !rewritten.isEmpty { try txn.put(rewritten, forKey: key, in: database) }
        return true
    }
}

extension Replication {
    /// Where to read `bus`'s log from: after the position the store applied, when the log still
    /// holds every change since; otherwise (the store never followed this bus, the log was
    /// recreated, or it was trimmed past the store's position) the store is reset
    /// (``reset(bus:to:)``) to the log's head and reading starts there.
    ///
    /// - Parameters:
    ///   - bus: the bus's name in the store.
    ///   - log: the identity of the log as it is now.
    ///   - trimmedThrough: the highest sequence number the log no longer holds (0 when it holds all).
    ///   - head: the highest sequence number in the log now.
    /// - Returns: the sequence number to read after.
    /// - Throws: `LMDBError` when LMDB fails.
    public func startFollowing(bus: String, log: String, trimmedThrough: Int64, head: Int64) async throws -> Int64 {
        if let applied = try position(of: bus), applied.log == log, applied.sequence >= trimmedThrough,
            applied.sequence <= head
        {
            return applied.sequence
        }
        try await reset(bus: bus, to: BusPosition(log: log, sequence: head))
        return head
    }
}
