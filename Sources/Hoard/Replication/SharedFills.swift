internal import LMDB
internal import Synchronization

// A tier of fills the replicas share: on a miss, read-through asks it before the upstream, so
// that one replica fetches a key for all of them (HoardPostgres's shared fills). Hoard's part is
// engine-neutral: which collections use a tier, the record bytes it holds, and the keys that
// must bypass it (invalidated here and not yet announced: the tier has not heard of them).

/// A record as the replicas share it: its stored bytes (header and payload, as docs/FORMAT.md
/// describes them) and its tags.
public struct SharedRecord: Sendable, Hashable {
    /// The record, header and payload, as a store holds it.
    public var bytes: [UInt8]
    /// Its tags, each the UTF-8 of a tag, sorted, without repeats.
    public var tags: [[UInt8]]
    /// Its expiry in milliseconds since 1970 (its header's), or `nil` for none.
    public var expiresAt: Int64?

    /// A shared record; each parameter is the property of the same name.
    public init(bytes: [UInt8], tags: [[UInt8]], expiresAt: Int64?) {
        self.bytes = bytes
        self.tags = tags
        self.expiresAt = expiresAt
    }
}

/// What a shared fill tier answered for the keys it was asked for: the records it held or that
/// another replica fetched meanwhile (by key), and what `upstream` fetched in this replica (one
/// entry per call).
public struct SharedFill<Fetched: Sendable>: Sendable {
    /// The records the tier supplied, by key.
    public var shared: [[UInt8]: SharedRecord]
    /// What each call of `upstream` returned.
    public var fetched: [Fetched]
    /// Whether the answer waited for another replica's fetch.
    public var waited: Bool

    /// An answer; each parameter is the property of the same name.
    public init(shared: [[UInt8]: SharedRecord], fetched: [Fetched], waited: Bool) {
        self.shared = shared
        self.fetched = fetched
        self.waited = waited
    }
}

/// A tier of fetched records that the replicas of a service share, so that a key missing in
/// every replica is fetched from the upstream once for all of them.
///
/// Read-through calls ``fill(collection:keys:upstream:)`` in place of the upstream for the keys a
/// fetch is for. A tier answers each key with a record it holds that no invalidation announced
/// since its fetch began has made obsolete, or with the record another replica is fetching (it
/// waits for that, within a bound), or else calls `upstream` for it and shares what it returns.
/// A tier that cannot answer (its database away or slow) calls `upstream` for every key: a read
/// never fails because of it. HoardPostgres's `PostgresBus` is one (`Configuration.sharedFills`).
public protocol SharedFillTier: Sendable {
    /// The records of `keys` in `collection`: shared, or fetched through `upstream` (called with
    /// the keys left to fetch; it returns what it fetched and the records to share of it).
    ///
    /// - Throws: what `upstream` throws, and `CancellationError`; nothing of the tier's own.
    func fill<Fetched: Sendable>(
        collection: String, keys: [[UInt8]],
        upstream: @escaping @Sendable ([[UInt8]]) async throws -> (fetched: Fetched, records: [[UInt8]: SharedRecord])
    ) async throws -> SharedFill<Fetched>
}

/// The tier a store's collections share their fills through, if any.
final class SharedFillsState: Sendable {
    private let state = Mutex<(tier: any SharedFillTier, collections: Set<String>, generation: Int)?>(nil)
    private let generations = Atomic<Int>(0)

    func tier(for collection: String) -> (any SharedFillTier)? {
        state.withLock { state in
            guard let state, state.collections.contains(collection) else { return nil }
            return state.tier
        }
    }

    func use(_ tier: any SharedFillTier, for collections: Set<String>) -> Int {
        let generation = generations.add(1, ordering: .relaxed).newValue
        state.withLock { $0 = (tier, collections, generation) }
        return generation
    }

    func stop(_ generation: Int) {
        state.withLock { state in
            if state?.generation == generation { state = nil }
        }
    }
}

extension Replication {
    // MARK: - Shared fills

    /// From now on, read-through fetches of the collections named `collections` go through
    /// `tier` (``SharedFillTier``), until ``stopSharingFills(_:)`` is called with the number this
    /// returns. A store uses one tier at a time: a second call replaces the first.
    public func shareFills(of collections: Set<String>, through tier: any SharedFillTier) -> Int {
        store.replicationState.sharedFills.use(tier, for: collections)
    }

    /// Stops the sharing that ``shareFills(of:through:)`` began and numbered `generation` (a
    /// later call's sharing goes on).
    public func stopSharingFills(_ generation: Int) {
        store.replicationState.sharedFills.stop(generation)
    }

    /// Whether `collection` has changes of its own that the outbox still holds for `key`: the
    /// key, a tag, or the whole collection, not yet announced (so a shared tier has not heard of
    /// them, and may hold what they made obsolete), counted from the moment the invalidation
    /// wrote them, before its transaction commits (``ReplicationState/announcingNow``).
    func hasUnannounced(collection: String, key: [UInt8]) throws -> Bool {
        guard let outbox = store.outbox else { return false }
        let acknowledged = store.replicationState.acknowledged.withLock { $0 }
        func pending(_ entry: [UInt8], _ stamp: some Collection<UInt8>) -> Bool {
            acknowledged[entry].map { !$0.elementsEqual(stamp) } ?? true
        }
        let exact = [OutboxKey.make(collection: collection, key: key), OutboxKey.make(collection: collection, .all)]
        // Any tag of the collection: the tier's record may carry it.
        var tags = OutboxKey.make(collection: collection, key: [])
        tags[0] |= OutboxKey.tagFlag
        // Read before the snapshot: a transaction that wrote these entries and had not committed
        // when the snapshot began is still the latest to announce (LMDB's write lock).
        let announcing = store.replicationState.announcingNow.withLock { $0 }
        return try store.readLMDB { txn in
            if announcing.transaction > txn.id,
                announcing.entries.contains(where: { entry in exact.contains(entry) || entry.starts(with: tags) })
            {
                return true
            }
            for entry in exact {
                if let stamp = try txn.value(forKey: entry, in: outbox), pending(entry, stamp) {
                    return true
                }
            }
            var found = false
            try txn.forEach(in: outbox, range: .prefix(tags)) { entry, stamp in
                if pending(Array(entry), stamp) {
                    found = true
                    return .stop
                }
                return .next
            }
            return found
        }
    }
}
