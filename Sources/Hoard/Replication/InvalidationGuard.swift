internal import Synchronization

/// The read-through race: a fetch that began before an invalidation of its key may return the
/// value from before the change, and storing it after the invalidation would serve that old value
/// as fresh until it expires. So every fetch takes a ticket (the number of invalidations so far)
/// before it calls the upstream, invalidations note their keys with a higher number, and the
/// fetch's write stores no model whose key was noted after its ticket.
///
/// Exact because both sides run in LMDB write transactions, which LMDB serializes: the fill
/// either committed before the invalidation (which then removes what it stored) or sees the note.
/// Keys are noted only while a fetch is under way, and forgotten once no earlier fetch is.
final class InvalidationGuard: Sendable {
    private struct State {
        /// The number of the last invalidation noted.
        var epoch: UInt64 = 0
        /// The tickets of the fetches under way: ticket -> how many fetches hold it.
        var active: [UInt64: Int] = [:]
        /// The keys invalidated while fetches were under way, by collection, with the number of the
        /// last invalidation of each.
        var removed: [String: [[UInt8]: UInt64]] = [:]
        var noted = 0
        /// The number of the last reset noted while fetches were under way: it voids every ticket before it.
        var reset: UInt64 = 0
        /// The number of the last invalidation of a whole collection, by collection, noted while fetches were under way.
        var cleared: [String: UInt64] = [:]
        /// The tags invalidated while fetches were under way, by collection, with the number of the
        /// last invalidation of each: a fill that would tag its record with one does not store it.
        var removedTags: [String: [[UInt8]: UInt64]] = [:]
    }

    private let state = Mutex(State())
    /// Off only in the test that shows the race without the guard.
    let enabled = Atomic<Bool>(true)

    /// Takes a ticket for a fetch about to call the upstream; give it back with ``endFetch(_:)``.
    func beginFetch() -> UInt64 {
        state.withLock { state in
            state.active[state.epoch, default: 0] += 1
            return state.epoch
        }
    }

    /// Gives a fetch's ticket back, forgetting the notes no fetch under way needs.
    func endFetch(_ ticket: UInt64) {
        state.withLock { state in
            if let count = state.active[ticket], count > 1 {
                state.active[ticket] = count - 1
            } else {
                state.active[ticket] = nil
            }
            guard let oldest = state.active.keys.min() else {
                state.removed = [:]
                state.cleared = [:]
                state.removedTags = [:]
                state.noted = 0
                return
            }
            // Pruned when the notes have doubled since the last pruning: amortized, not per fetch.
            guard state.noted > 1_024 else { return }
            var kept = 0
            for collection in Array(state.removed.keys) {
                state.removed[collection] = state.removed[collection]?.filter { $0.value > oldest }
                kept += state.removed[collection]?.count ?? 0
            }
            state.noted = kept / 2
        }
    }

    /// Notes that `keys` of `collection` were invalidated (inside the invalidating write transaction).
    func noteRemoved(collection: String, keys: [[UInt8]]) {
        guard enabled.load(ordering: .relaxed) else { return }
        state.withLock { state in
            guard !state.active.isEmpty else { return }
            state.epoch += 1
            let epoch = state.epoch
            var notes = state.removed[collection] ?? [:]
            state.removed[collection] = nil
            for key in keys { notes[key] = epoch }
            state.removed[collection] = notes
            state.noted += keys.count
        }
    }

    /// Notes a reset (inside its write transaction): a fetch under way may have read the upstream
    /// before a change the store missed, so no fetch that began before the reset stores its result.
    func noteReset() {
        guard enabled.load(ordering: .relaxed) else { return }
        state.withLock { state in
            guard !state.active.isEmpty else { return }
            state.epoch += 1
            state.reset = state.epoch
        }
    }

    /// Notes that `tags` of `collection` were invalidated (inside the invalidating write transaction).
    func noteRemoved(collection: String, tags: [[UInt8]]) {
        guard enabled.load(ordering: .relaxed), !tags.isEmpty else { return }
        state.withLock { state in
            guard !state.active.isEmpty else { return }
            state.epoch += 1
            for tag in tags { state.removedTags[collection, default: [:]][tag] = state.epoch }
        }
    }

    /// Notes that every record of `collection` was invalidated (inside the invalidating write
    /// transaction): no fetch of it that began before stores its result.
    func noteCleared(collection: String) {
        guard enabled.load(ordering: .relaxed) else { return }
        state.withLock { state in
            guard !state.active.isEmpty else { return }
            state.epoch += 1
            state.cleared[collection] = state.epoch
        }
    }

    /// Whether `key` of `collection` was invalidated (or the store reset) after the fetch with `ticket` began (inside the fill's write transaction).
    func wasRemoved(collection: String, key: [UInt8], tags: [[UInt8]] = [], after ticket: UInt64) -> Bool {
        check(collection: collection, key: key, after: ticket) { removedTags in
            tags.contains(where: { removedTags[$0].map { $0 > ticket } == true })
        }
    }

    /// Whether a get of `key` must not join the fetch with `ticket`, since what that fetch returns
    /// may predate an invalidation the get began after: of the key, the collection or the store
    /// (``wasRemoved(collection:key:tags:after:)``), or of any tag of the collection, because the
    /// record's tags are known only from the fetch's answer.
    func forbidsJoining(collection: String, key: [UInt8], after ticket: UInt64) -> Bool {
        check(collection: collection, key: key, after: ticket) { removedTags in
            removedTags.values.contains { $0 > ticket }
        }
    }

    private func check(
        collection: String, key: [UInt8], after ticket: UInt64, tags removed: ([[UInt8]: UInt64]) -> Bool
    ) -> Bool {
        state.withLock { state in
            if state.reset > ticket || state.cleared[collection].map({ $0 > ticket }) == true { return true }
            if let removedTags = state.removedTags[collection], removed(removedTags) { return true }
            guard let epoch = state.removed[collection]?[key] else { return false }
            return epoch > ticket
        }
    }
}
