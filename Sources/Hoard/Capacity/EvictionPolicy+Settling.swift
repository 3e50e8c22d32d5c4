internal import LMDB

extension EvictionPolicy {
    /// One settle's work on the state (a value, so that the code reads as plain mutation).
    struct Settling {
        let policy: EvictionPolicy
        var state: State
        var evicted = 0
        var probationTarget = 1
        /// Probation is refilled (to its target) once below this, so that one walk of the main
        /// part serves many victims: it may fall ``refillBatch`` keys short, or as many as the
        /// collection is over its bound (up to half of probation).
        var refillBelow = 1
        var records = 0
        /// Probation's first key while it stays first (in `victimKey`), and its estimate once
        /// looked up: every candidate of a settle is weighed against it until it goes.
        var victim: (hash: UInt64, estimate: Int?)?
        var victimKey: [UInt8] = []
        /// How many of probation's first keys had their recent-use lines asked for.
        var prefetchedVictims = 0
        /// Whether every candidate is kept, recency having the upper hand (``PolicyTrial``), read
        /// once a settle.
        let keepsEveryKey: Bool

        init(policy: EvictionPolicy, state: State) {
            self.policy = policy
            self.state = state
            keepsEveryKey = policy.trial?.prefersRecency ?? false
        }

        mutating func run(
            _ source: inout some EvictionSource, written: inout WrittenBatch, partial: Bool,
            in txn: borrowing LMDB.WriteTransaction
        ) throws -> Int {
            // Expired records go first: before any live record is weighed, the expiry walk
            // removes those it finds in the next stretch of the key order.
            if source.isOverCapacity {
                let walk = try source.removeExpired(
                    after: state.expiryHand, limit: EvictionPolicy.expiryWalk, in: txn)
                state.expiryHand = walk.position
                evicted += walk.removed
            }
            records = source.recordCount
            let windowTarget = max(1, Int(Double(records) * EvictionPolicy.windowShare))
            probationTarget = max(1, Int(Double(records) * EvictionPolicy.probationShare))
            let shortfall = max(
                min(probationTarget / 16, EvictionPolicy.refillBatch), min(source.recordsOver, probationTarget / 2))
            refillBelow = max(1, probationTarget - shortfall)
            // The write's keys enter the window, newest last, and as many of the window's oldest
            // leave it: first the keys that were there, then the write's own first keys.
            let leaving = max(0, state.window.count + written.count - windowTarget)
            let fromWindow = min(leaving, state.window.count)
            // The candidates' hashes, found for their prefetch and kept for their turn (not hashed again).
            var candidateHashes: [UInt64] = []
            if source.isOverCapacity { prefetch(fromWindow, hashes: &candidateHashes) }
            // Many candidates: each is taken out of the window's set, whose lines the write's own
            // work pushed out of the caches; streamed in at once, they cost less than a wait each.
            if fromWindow > 64 { state.inWindow.prefetchAll() }
            // The key just out of the window, its memory reused (a local: a property handed to a
            // mutating method would be copied).
            var candidate: [UInt8] = []
            // Candidates leave the window whether or not the collection is full, so that the
            // window stays the newest records.
            for number in 0..<fromWindow {
                guard state.window.removeFirst(into: &candidate) else { break }
                let hash =
                    number < candidateHashes.count ? candidateHashes[number] : candidate.withUnsafeBytes(keyHash)
                guard state.inWindow.remove(hash) else { continue }
                if source.isOverCapacity {
                    try weigh(candidate, hash, &source, in: txn)
                } else {
                    keep(candidate)
                }
            }
            // The write's first keys would leave the window in this same settle: they go to
            // probation at once. The rest enter the window, or, in a partial settle, wait.
            let direct = leaving - fromWindow
            // Within the bound, as many as probation lacks (as `keep` takes them).
            let admitted =
                source.isOverCapacity ? direct : min(direct, max(0, probationTarget - state.probation.count))
            state.probation.append(contentsOf: written.keys, keys: 0..<admitted)
            if partial {
                written.removeFirst(direct)
            } else {
                state.window.append(contentsOf: written.keys, keys: direct..<written.count)
                state.inWindow.insert(contentsOf: written.hashes[direct...])
                written.removeAll()
            }
            // Victims that turn out pinned leave probation and may come back with the hand;
            // once as many have been passed over as there are records, none is left that may go.
            var passedOver = 0
            while source.isOverCapacity, passedOver <= records, let victim = try probationVictim(&source, in: txn) {
                dropVictim()
                if try source.evict(victimKey, hash: victim, in: txn).removed {
                    evicted += 1
                } else {
                    passedOver += 1
                }
            }
            // Still over: every record outside the window is gone or pinned (a write larger
            // than the main part); the window's own oldest go next.
            while source.isOverCapacity, state.window.removeFirst(into: &candidate) {
                let hash = candidate.withUnsafeBytes(keyHash)
                guard state.inWindow.remove(hash) else { continue }
                try evict(candidate, hash, &source, in: txn)
            }
            return evicted
        }

        /// The estimate of the victim, whose hash is `hash`, looked up at the first call.
        mutating func victimEstimate(_ hash: UInt64) -> Int {
            if let estimate = victim?.estimate { return estimate }
            let estimate = policy.sketch.estimate(hash)
            victim?.estimate = estimate
            return estimate
        }

        /// Decides between `candidate`, just out of the window, and probation's victim: the one
        /// asked for less often goes (the victim stays on a tie).
        mutating func weigh(
            _ candidate: [UInt8], _ hash: UInt64, _ source: inout some EvictionSource,
            in txn: borrowing LMDB.WriteTransaction
        ) throws {
            let estimate = policy.admitsByFrequency ? policy.sketch.estimate(hash) : 0
            // Victims that turn out pinned or gone leave probation and the next is tried; once
            // as many as there are records have, none is left that may go.
            for _ in 0...records {
                guard let victim = try probationVictim(&source, in: txn) else { break }
                guard !policy.admitsByFrequency || keepsEveryKey || estimate > victimEstimate(victim) else {
                    // Popular before, not now (``EvictionPolicy/staleVictimRatio``): halved.
                    if EvictionPolicy.isOldPopularity(victim: victimEstimate(victim), candidate: estimate) {
                        policy.forgetOldPopularity(victim)
                        self.victim?.estimate = nil
                    }
                    // A candidate the sketch never saw asked for has no recent-use count to clear.
                    try evict(candidate, hash, &source, clearingCount: estimate > 0, in: txn)
                    return
                }
                dropVictim()
                if try source.evict(victimKey, hash: victim, in: txn).removed {
                    evicted += 1
                    break
                }
            }
            if keepsEveryKey {
                // Into the main part, with a pass of the hand's grace: recency wants it kept about
                // as long as the rest, where probation would let it go unread.
                policy.recentUse.touch(hash)
            } else {
                admit(candidate)
            }
        }

        /// Prefetches the sketch's lines of the next `count` candidates and of probation's first
        /// keys, so that their misses overlap; victims' recent-use lines come later
        /// (``prefetchVictims()``). Leaves the candidates' hashes in `hashes`, in order.
        func prefetch(_ count: Int, hashes: inout [UInt64]) {
            guard policy.admitsByFrequency else { return }
            let sketch = policy.sketch
            hashes.reserveCapacity(count)
            state.window.forEach(first: count) { key in
                let hash = keyHash(key)
                sketch.prefetch(hash)
                hashes.append(hash)
            }
            state.probation.forEach(first: 8) { sketch.prefetch(keyHash($0)) }
        }

        /// Evicts `key`, which left its queue; a pinned record stays, in probation.
        mutating func evict(
            _ key: [UInt8], _ hash: UInt64, _ source: inout some EvictionSource, clearingCount: Bool = true,
            in txn: borrowing LMDB.WriteTransaction
        ) throws {
            switch try source.evict(key, hash: hash, in: txn) {
            case .evicted, .expired:
                if clearingCount { policy.recentUse.clear(hash) }
                evicted += 1
            case .pinned: admit(key)
            case .absent: break
            }
        }

        /// A key out of the window while the collection is within its bound: into probation
        /// while it is short of its share (which bounds the policy's memory), else into the main
        /// part, where the hand will find it.
        mutating func keep(_ key: some Collection<UInt8>) {
            if state.probation.count < probationTarget { admit(key) }
        }

        /// Puts `key` last in probation.
        mutating func admit(_ key: some Collection<UInt8>) {
            state.probation.append(key)
        }

        /// Removes the victim from probation's front (its recent-use count was 0 when it was
        /// chosen: no entry to free).
        mutating func dropVictim() {
            victim = nil
            dropProbationFront()
        }

        /// Removes probation's first key (a victim's, or one promoted).
        mutating func dropProbationFront() {
            state.probation.dropFirst()
            prefetchedVictims = max(0, prefetchedVictims - 1)
        }

        /// Prefetches the recent-use lines of the next victims, a stretch ahead of the one looked
        /// at (all at the settle's start, the last would push the first out of the cache).
        mutating func prefetchVictims() {
            guard prefetchedVictims < EvictionPolicy.victimLookahead / 2 else { return }
            let recentUse = policy.recentUse
            state.probation.forEach(from: prefetchedVictims, to: EvictionPolicy.victimLookahead) { key in
                recentUse.prefetch(keyHash(key))
            }
            prefetchedVictims = min(EvictionPolicy.victimLookahead, state.probation.count)
        }

        /// The first key in probation not read while there, after promoting those that were
        /// and refilling probation from the main part when it is short; `nil` when there is none.
        mutating func probationVictim(
            _ source: inout some EvictionSource, in txn: borrowing LMDB.WriteTransaction
        ) throws -> UInt64? {
            if let victim { return victim.hash }
            while true {
                if state.probation.count < refillBelow { try refill(&source, in: txn) }
                prefetchVictims()
                guard state.probation.first(into: &victimKey) else { return nil }
                let hash = victimKey.withUnsafeBytes(keyHash)
                guard !state.inWindow.contains(hash), policy.recentUse.count(hash) == 0 else {
                    // Written again (its key is in the window), or read while in probation:
                    // promoted to the main part.
                    dropProbationFront()
                    continue
                }
                victim = (hash, nil)
                return hash
            }
        }

        /// Moves the hand over the main part in one walk, moving records not read since it
        /// last passed them to probation until probation is full; a record read since has its
        /// count lowered and stays. Past `sweepLimit` records without one to move, the record
        /// under the hand moves even if read, so that one write never sweeps for long. The
        /// running transaction's own records are passed over: queued, they would come back as
        /// victims that cannot go, and a write as large as the bound would stop before the hand
        /// reached the older ones (`writeAsLargeAsBound`).
        mutating func refill(_ source: inout some EvictionSource, in txn: borrowing LMDB.WriteTransaction) throws {
            var steps = 0
            var sinceMoved = 0
            // Twice round the collection at most: every count falls by one a round, and records
            // already queued are passed over.
            let limit = 2 * records + EvictionPolicy.sweepLimit
            var position = state.hand
            while state.probation.count < probationTarget, steps < limit {
                var visited = false
                position = try source.walk(after: position, in: txn) { key, hash in
                    visited = true
                    steps += 1
                    guard !state.inWindow.contains(hash) else { return steps < limit }
                    sinceMoved += 1
                    if sinceMoved < EvictionPolicy.sweepLimit, policy.recentUse.lower(hash) { return steps < limit }
                    sinceMoved = 0
                    admit(key)
                    return state.probation.count < probationTarget && steps < limit
                }
                if !visited { break }  // no records at all
            }
            state.hand = position
        }
    }
}
