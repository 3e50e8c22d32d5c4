internal import Synchronization
internal import LMDB

/// What eviction may do with one record.
enum RecordStanding {
    /// There is no record under the key (any more).
    case absent
    /// The record was written in the running transaction: it stays.
    case pinned
    /// The record may go.
    case evictable
    /// The record has expired: it goes first, whatever its use.
    case expired
}

/// The records of one bounded collection as eviction sees them, inside the write transaction
/// that must end within the bound (`txn`; a source over memory, in tests, ignores it).
protocol EvictionSource {
    /// How many records the collection holds now.
    var recordCount: Int { get }
    /// Whether the collection is over its bound now.
    var isOverCapacity: Bool { get }
    /// The first key after `key` in key order (the first of all when `key` is `nil`), `nil` past the last.
    mutating func key(after key: [UInt8]?, in txn: borrowing WriteTransaction) throws -> [UInt8]?
    /// What eviction may do with the record under `key`.
    mutating func standing(of key: [UInt8], in txn: borrowing WriteTransaction) throws -> RecordStanding
    /// Deletes the record under `key` (whose standing is `.evictable` or, with `expired`, `.expired`).
    mutating func evict(_ key: [UInt8], expired: Bool, in txn: borrowing WriteTransaction) throws
}

/// Chooses which records a bounded collection gives up: W-TinyLFU's design (a small window of
/// new records, a frequency sketch deciding which of two records is worth more), laid over
/// records that live in LMDB, where a read must not write.
///
/// Every record is in one of three places, and only the first two are kept in memory:
/// - the **window**: the keys written last (1% of the records), oldest first;
/// - **probation**: keys that left the window or the main part, oldest first (20%);
/// - the **main part**: every other record, in the collection's key order, swept by a hand.
///
/// A hit counts the key in the ``FrequencySketch`` and raises its ``RecentUse`` count; nothing
/// else happens on the read path, and neither takes a lock. A write that puts the collection
/// over its bound then settles it: the window's oldest key is the candidate; the oldest key in
/// probation that was not read while there is the victim (one that was read is promoted: it
/// leaves probation for the main part); the sketch decides, and the one asked for less often
/// goes (the victim stays on a tie). When probation runs short, the hand moves over the main
/// part in key order: a record read since the hand last passed has its count lowered and stays;
/// the first one not read moves to probation.
///
/// The key order stands in for the recency order a list would keep (which LMDB could only keep
/// by writing on every read); the counts up to 3 give a record read often several passes of
/// grace, which is what lets the design match W-TinyLFU's hit ratios (BENCHMARKS.md).
///
/// After a restart, the window and probation are empty and every count is zero: the first
/// evictions come from the main part in key order, and the sketch learns again from the
/// traffic, reaching its steady state after about `sampleMultiple` × the records' number of
/// accesses.
final class EvictionPolicy: Sendable {
    let sketch: FrequencySketch
    let recentUse: RecentUse

    /// The share of the records kept in the window, and in probation.
    static let windowShare = 0.01
    static let probationShare = 0.2
    /// The most records the hand passes to find one to move to probation; past it, the record
    /// under the hand moves even if it was read. Bounds the time one write can spend sweeping.
    static let sweepLimit = 128

    private struct State {
        var window = KeyQueue()
        var probation = KeyQueue()
        /// Which queue each queued key is in, by hash; a key that left a queue early (promoted,
        /// written again) has a stale entry in it, which is skipped when it comes first.
        var place: [UInt64: Place] = [:]
        /// The key the hand is at in the main part.
        var hand: [UInt8]?
    }

    private enum Place { case window, probation }

    private let state = Mutex(State())

    /// A policy for a collection of about `records` records.
    init(records: Int) {
        sketch = FrequencySketch(records: records)
        recentUse = RecentUse(records: records)
    }

    /// Counts a get of the key with `hash`; `hit` when a record was found.
    func accessed(_ hash: UInt64, hit: Bool) {
        sketch.increment(hash)
        if hit { recentUse.touch(hash) }
    }

    /// Notes that `key` was written: it enters the window.
    func written(_ key: some Collection<UInt8>) {
        let hash = Array(key).withUnsafeBytes(keyHash)
        state.withLock { state in
            state.window.append(key)
            state.place[hash] = .window
        }
    }

    /// The memory the policy's state takes, in bytes (sketch, counts, queues; the dictionary
    /// of places estimated from its capacity).
    var byteCount: Int {
        state.withLock { state in
            let placeBytes = state.place.capacity * (MemoryLayout<UInt64>.stride + 1) + state.place.capacity / 8
            return sketch.byteCount + recentUse.byteCount + state.window.byteCount + state.probation.byteCount
                + placeBytes
        }
    }

    /// Evicts until `source` is within its bound, moving keys between the window, probation and
    /// the main part as it goes; returns how many records went. When the records that could go
    /// are gone and `source` is still over (every record left was written in the running
    /// transaction), it stops: the caller reports that the write alone exceeds the bound.
    func settle(_ source: inout some EvictionSource, in txn: borrowing WriteTransaction) throws -> Int {
        try state.withLock { state in
            var settling = Settling(policy: self, state: state)
            defer { state = settling.state }
            return try settling.run(&source, in: txn)
        }
    }

    /// One settle's work on the state (a value, so that the code reads as plain mutation).
    private struct Settling {
        let policy: EvictionPolicy
        var state: State
        var evicted = 0

        init(policy: EvictionPolicy, state: State) {
            self.policy = policy
            self.state = state
        }

        mutating func run(_ source: inout some EvictionSource, in txn: borrowing WriteTransaction) throws -> Int {
            let records = source.recordCount
            let windowTarget = max(1, Int(Double(records) * EvictionPolicy.windowShare))
            // Candidates leave the window whether or not the collection is full, so that the
            // window stays the newest records.
            while state.window.count > windowTarget, let candidate = state.window.removeFirst() {
                let hash = candidate.withUnsafeBytes(keyHash)
                guard state.place[hash] == .window else { continue }
                state.place[hash] = nil
                guard source.isOverCapacity else {
                    admit(candidate, hash)
                    continue
                }
                switch try source.standing(of: candidate, in: txn) {
                case .absent: continue
                case .pinned: admit(candidate, hash)
                case .expired: try evict(candidate, hash, &source, expired: true, in: txn)
                case .evictable:
                    guard let victim = try probationVictim(&source, records: records, in: txn) else {
                        admit(candidate, hash)
                        continue
                    }
                    if policy.sketch.estimate(hash) > policy.sketch.estimate(victim.hash) {
                        try evictFirstInProbation(victim, &source, in: txn)
                        admit(candidate, hash)
                    } else {
                        try evict(candidate, hash, &source, in: txn)
                    }
                }
            }
            while source.isOverCapacity, let victim = try probationVictim(&source, records: records, in: txn) {
                try evictFirstInProbation(victim, &source, in: txn)
            }
            // Still over: every record outside the window is gone or pinned (a write larger
            // than the main part); the window's own oldest go next.
            while source.isOverCapacity, let candidate = state.window.removeFirst() {
                let hash = candidate.withUnsafeBytes(keyHash)
                guard state.place[hash] == .window else { continue }
                state.place[hash] = nil
                switch try source.standing(of: candidate, in: txn) {
                case .absent: continue
                case .pinned: admit(candidate, hash)
                case .expired: try evict(candidate, hash, &source, expired: true, in: txn)
                case .evictable: try evict(candidate, hash, &source, in: txn)
                }
            }
            return evicted
        }

        /// Puts `key` last in probation.
        mutating func admit(_ key: [UInt8], _ hash: UInt64) {
            state.probation.append(key)
            state.place[hash] = .probation
        }

        mutating func evict(
            _ key: [UInt8], _ hash: UInt64, _ source: inout some EvictionSource, expired: Bool = false,
            in txn: borrowing WriteTransaction
        ) throws {
            try source.evict(key, expired: expired, in: txn)
            policy.recentUse.clear(hash)
            evicted += 1
        }

        mutating func evictFirstInProbation(
            _ victim: (key: [UInt8], hash: UInt64), _ source: inout some EvictionSource,
            in txn: borrowing WriteTransaction
        ) throws {
            state.probation.removeFirst()
            state.place[victim.hash] = nil
            try evict(victim.key, victim.hash, &source, in: txn)
        }

        /// The first key in probation that may go, after promoting those read while there and
        /// refilling probation from the main part when it is short; `nil` when there is none.
        mutating func probationVictim(
            _ source: inout some EvictionSource, records: Int, in txn: borrowing WriteTransaction
        ) throws -> (key: [UInt8], hash: UInt64)? {
            let target = max(1, Int(Double(records) * EvictionPolicy.probationShare))
            // Records that may not go (written by the running write) leave probation as they are
            // met; once as many have left as there are records, the hand has been round them
            // all and no record is left that may go.
            var passedOver = 0
            while passedOver <= records {
                while state.probation.count < target, try demote(&source, records: records, in: txn) {}
                guard let first = state.probation.first else { return nil }
                let key = Array(first)
                let hash = key.withUnsafeBytes(keyHash)
                guard state.place[hash] == .probation else {
                    state.probation.removeFirst()
                    continue
                }
                if policy.recentUse.count(hash) > 0 {
                    // Read while in probation: promoted to the main part.
                    state.probation.removeFirst()
                    state.place[hash] = nil
                    continue
                }
                switch try source.standing(of: key, in: txn) {
                case .absent, .pinned:
                    state.probation.removeFirst()
                    state.place[hash] = nil
                    passedOver += 1
                case .expired:
                    state.probation.removeFirst()
                    state.place[hash] = nil
                    try evict(key, hash, &source, expired: true, in: txn)
                    if !source.isOverCapacity { return nil }
                case .evictable:
                    return (key, hash)
                }
            }
            return nil
        }

        /// Moves the hand over the main part to the next record not read since the hand last
        /// passed it, and moves that record to probation; returns whether it found one.
        mutating func demote(
            _ source: inout some EvictionSource, records: Int, in txn: borrowing WriteTransaction
        ) throws -> Bool {
            var key = state.hand
            var steps = 0
            // Past `sweepLimit` the first record found moves, read or not; the bound on steps
            // only matters when every record is queued already.
            while steps < records + EvictionPolicy.sweepLimit {
                guard let next = try source.key(after: key, in: txn) else {
                    if key == nil { return false }  // no records at all
                    key = nil  // past the last key: around to the first
                    continue
                }
                key = next
                steps += 1
                let hash = next.withUnsafeBytes(keyHash)
                if state.place[hash] != nil { continue }
                state.hand = next
                if steps < EvictionPolicy.sweepLimit, policy.recentUse.lower(hash) { continue }
                admit(next, hash)
                return true
            }
            return false
        }
    }
}
