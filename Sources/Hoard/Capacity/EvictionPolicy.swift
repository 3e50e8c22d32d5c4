internal import Synchronization
internal import LMDB

/// Chooses which records a bounded collection gives up: W-TinyLFU (a window of new records, a
/// frequency sketch deciding which of two records is worth more) laid over records that live in
/// LMDB, where a read must not write. The window and probation are queues of keys in memory; the
/// main part is the rest of the records, swept by a hand in key order, which stands in for the
/// recency order a list would keep. Gets count through the ``AccessBuffer`` only; a write that
/// passes the bound removes expired records first (``expiryWalk``), then settles
/// (EvictionPolicy+Settling.swift). docs/EVICTION.md ("Eviction runs inside writes", "The policy")
/// gives the rules and why: the candidate and the victim, fading popularity, the hand's grace,
/// the ``PolicyTrial``, ``EvictionStrategy/recency``, and what a restart forgets.
final class EvictionPolicy: Sendable {
    let sketch: FrequencySketch
    let recentUse: RecentUse

    /// The share of the records kept in the window, and in probation.
    static let windowShare = 0.01
    static let probationShare = 0.25
    /// The most records the hand passes to find one to move to probation; past it, the record
    /// under the hand moves even if it was read. Bounds the time one write can spend sweeping.
    static let sweepLimit = 128
    /// How many keys short probation may fall before the hand refills it: few, since the walk may
    /// pass `sweepLimit` read records for each key it moves. A settle that must evict more waits
    /// for as many as it must (`Settling.refillBelow`).
    static let refillBatch = 16
    /// The records the expiry walk looks at in each write that must evict: it passes the whole
    /// collection every records / 16 evicting writes.
    static let expiryWalk = 16
    /// How many of probation's first keys have their recent-use lines asked for ahead of the
    /// victim looked at (the next half asked for once half have gone).
    static let victimLookahead = 64
    /// A victim that beats a candidate the sketch counted at least `staleCandidateMinimum` times,
    /// by more than `staleVictimRatio` times its count, has its own counts halved: a victim in
    /// probation was not read since the hand last passed it, so so large a lead is popularity
    /// from before (a hot set that moved), which the sketch's halving of all would forget only
    /// much later. A candidate counted once (a scan) halves nothing, nor does a tie (a loop).
    static let staleCandidateMinimum = 2
    static let staleVictimRatio = 3

    /// Whether a victim whose estimate beats a candidate's holds popularity from before
    /// (``staleVictimRatio``).
    @inline(__always)
    static func isOldPopularity(victim: Int, candidate: Int) -> Bool {
        candidate >= staleCandidateMinimum && candidate * staleVictimRatio < victim
    }

    /// The window, probation and the hands: what a settle changes, under the policy's lock.
    struct State {
        var window = KeyQueue()
        var probation = KeyQueue()
        /// The keys in the window, by hash. A key written again has an older entry in its queue,
        /// passed over when it comes first: in the window, one whose key is not in this set; in
        /// probation, one whose key is in the window again. Probation's keys are not kept here
        /// (they would be most of the policy's memory): one the hand queues twice is passed over.
        var inWindow = KeyHashSet()
        /// The key the hand is at in the main part.
        var hand: [UInt8]?
        /// The key the expiry walk stopped at (`nil`: it starts again at the first).
        var expiryHand: [UInt8]?
    }

    private let state = Mutex(State())

    /// Whether the sketch decides between the window's candidate and probation's victim
    /// (``EvictionStrategy/frequency``), or the victim always goes (``EvictionStrategy/recency``).
    let admitsByFrequency: Bool

    /// A policy for a collection of about `records` records.
    init(records: Int, strategy: EvictionStrategy = .frequency) {
        admitsByFrequency = strategy == .frequency
        // Recency needs no sketch (a token one, so the read path has no branch) and a plain
        // reference bit; frequency's counts up to 3 give often-read records several passes.
        sketch = FrequencySketch(records: admitsByFrequency ? records : 1)
        recentUse = RecentUse(records: records, maximum: admitsByFrequency ? 3 : 1)
        trial = admitsByFrequency ? PolicyTrial(records: records) : nil
    }

    /// What decides whether new keys are kept whatever the sketch says (``PolicyTrial``); `nil`
    /// for the recency strategy, which always keeps them.
    let trial: PolicyTrial?

    /// Gets' accesses not counted yet (counted 32 at a time, for the caches' sake).
    private let accesses = AccessBuffer()
    /// Held while a batch of accesses is counted: the sketch counts one batch at a time, with no
    /// compare-and-swap (the recent-use table, which eviction changes too, keeps its own).
    private let counting = Mutex(())

    /// Counts a get of the key with `hash`; `hit` when a record was found. The count lands in the
    /// sketch and the recent-use table when the get's batch fills, or when a write settles.
    @inline(__always)
    func accessed(_ hash: UInt64, hit: Bool) {
        accesses.record(hash | (hit ? 1 : 0), count)
    }

    /// Counts a batch of accesses: asks for every cache line they touch, then counts each (the
    /// lines arrive together; one count after another would wait for each line in turn).
    private func count(_ batch: UnsafeBufferPointer<UInt64>) {
        for entry in batch {
            if admitsByFrequency { sketch.prefetch(entry & ~1) }
            if entry & 1 != 0 { recentUse.prefetch(entry & ~1) }
        }
        counting.withLock { _ in
            for entry in batch {
                let hash = entry & ~1
                if admitsByFrequency { sketch.increment(hash) }
                if entry & 1 != 0 { recentUse.touch(hash) }
                if let trial, trial.samples(hash) { trial.accessed(hash, sketch: sketch) }
            }
        }
    }

    /// Halves the sketch's counts of the key with `hash`, whose popularity is old, under the
    /// counting lock (the sketch counts on one thread at a time).
    func forgetOldPopularity(_ hash: UInt64) {
        counting.withLock { _ in sketch.halve(hash) }
    }

    /// The memory the policy's state takes, in bytes (sketch, counts, buffered accesses, queues,
    /// the set of the window's keys and the trial's miniature caches).
    var byteCount: Int {
        state.withLock { state in
            sketch.byteCount + recentUse.byteCount + accesses.byteCount + state.window.byteCount
                + state.probation.byteCount + state.inWindow.byteCount + (trial?.byteCount ?? 0)
        }
    }

    /// Takes the keys a write stored (`written`) into the window, then evicts until `source` is
    /// within its bound, moving keys between the window, probation and the main part as it goes;
    /// returns how many records went (or, for a source that deletes them later, were chosen to
    /// go). When the records that could go are gone and `source` is still over (every record left
    /// was written in the running transaction), it stops: the caller reports that the write alone
    /// exceeds the bound.
    ///
    /// With `partial` (a bulk put part way through), the write's newest keys, up to the window's
    /// size, stay in `written` for the next settle (pinned, they could only leave the window for
    /// probation); its older keys go to probation at once.
    func settle(
        _ source: inout some EvictionSource, written: inout WrittenBatch, partial: Bool = false,
        in txn: borrowing LMDB.WriteTransaction
    ) throws -> Int {
        try state.withLock { state in
            // Every access made so far counts before anything is decided.
            accesses.drain(count)
            var settling = Settling(policy: self, state: state)
            // Settling now holds the only reference to the queues and the key set, so its changes
            // do not copy them (a copy of the whole state on every write, otherwise).
            state = State()
            defer { state = settling.state }
            return try settling.run(&source, written: &written, partial: partial, in: txn)
        }
    }

    /// Evicts until `source` is within its bound (a write with no keys of its own to add).
    func settle(_ source: inout some EvictionSource, in txn: borrowing LMDB.WriteTransaction) throws -> Int {
        var none = WrittenBatch()
        return try settle(&source, written: &none, in: txn)
    }
}
