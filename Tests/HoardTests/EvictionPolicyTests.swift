import Foundation
import HoardTestSupport
import LMDB
import Synchronization
import Testing

@_spi(LMDB) @testable import Hoard

/// The eviction policy on its own, over records kept in memory in key order: what it keeps on
/// known traces against LRU computed here, the bound, and its pieces (the sketch, the counts,
/// the key queue). The policy inside a collection is tested with the collection.
@Suite("Eviction policy")
struct EvictionPolicyTests {
    @Test("on a Zipf 0.9 trace at 1% capacity it keeps at least 8 points more hits than LRU")
    func zipfBeatsLRU() throws {
        let trace = zipfTrace(objects: 20_000, requests: 400_000, alpha: 0.9, seed: 7)
        let hoard = try replay(trace, capacity: 200)
        let lru = lruHitRatio(trace, capacity: 200)
        #expect(hoard >= lru + 0.08, "Hoard \(hoard), LRU \(lru)")
    }

    @Test("on a loop slightly larger than the cache it keeps most of the loop, where LRU keeps nothing")
    func loopKeepsMost() throws {
        let trace = (0..<200_000).map { UInt32($0 % 1_100) }
        let hoard = try replay(trace, capacity: 1_000)
        #expect(lruHitRatio(trace, capacity: 1_000) == 0)
        #expect(hoard >= 0.85, "Hoard \(hoard)")
    }

    @Test("a scan of new keys does not push out the popular ones")
    func scanResistance() throws {
        var trace = zipfTrace(objects: 20_000, requests: 200_000, alpha: 1.1, seed: 11)
        // One scan of 20,000 keys never seen before, in the middle.
        trace.insert(contentsOf: (0..<20_000).map { UInt32(1_000_000 + $0) }, at: 100_000)
        let hoard = try replay(trace, capacity: 200)
        let lru = lruHitRatio(trace, capacity: 200)
        #expect(hoard > lru + 0.03, "Hoard \(hoard), LRU \(lru)")
    }

    @Test(
        "where the working set moves, frequency keeps as many hits as recency (its trial keeps new keys); where popularity lasts, more"
    )
    func strategies() throws {
        // Phases of 3,000 requests over 80 keys each, a new set of keys every phase: what was
        // asked for last comes next.
        var generator = SplitMix(seed: 13)
        let phases = (0..<30).flatMap { phase in
            (0..<3_000).map { _ in UInt32(phase * 1_000) + UInt32(generator.next() % 80) }
        }
        let recencyOnPhases = try replay(phases, capacity: 100, strategy: .recency)
        let frequencyOnPhases = try replay(phases, capacity: 100, strategy: .frequency)
        #expect(
            frequencyOnPhases >= recencyOnPhases - 0.01, "recency \(recencyOnPhases), frequency \(frequencyOnPhases)")
        let zipf = zipfTrace(objects: 20_000, requests: 200_000, alpha: 0.9, seed: 17)
        let recencyOnZipf = try replay(zipf, capacity: 200, strategy: .recency)
        let frequencyOnZipf = try replay(zipf, capacity: 200, strategy: .frequency)
        #expect(frequencyOnZipf > recencyOnZipf + 0.03, "recency \(recencyOnZipf), frequency \(frequencyOnZipf)")
        // Recency keeps at least LRU's hits on it (a reference bit with a second chance, as CLOCK).
        let lru = lruHitRatio(zipf, capacity: 200)
        #expect(recencyOnZipf >= lru - 0.01, "recency \(recencyOnZipf), LRU \(lru)")
    }

    @Test("where new keys are asked for again soon after, frequency keeps about recency's hits")
    func recencyHeavyTraffic() throws {
        // A third of the requests for new keys, the rest for keys about 100 new keys back: the
        // sketch alone would keep the old keys, whose counts are higher, and lose most of these.
        let trace = recencyTrace(requests: 100_000, meanDistance: 100, seed: 41)
        let recency = try replay(trace, capacity: 200, strategy: .recency)
        let frequency = try replay(trace, capacity: 200, strategy: .frequency)
        #expect(frequency >= recency - 0.02, "recency \(recency), frequency \(frequency)")
    }

    @Test("a victim popular long ago has its counts halved by candidates asked for again, until one wins")
    func oldPopularityFades() throws {
        try inTransaction { txn in try oldPopularityFades(txn) }
    }

    private func oldPopularityFades(_ txn: borrowing LMDB.WriteTransaction) throws {
        // Sized for 1,000 records, so that the sketch does not halve everything during the test;
        // the records are bounded to 10.
        let policy = EvictionPolicy(records: 1_000)
        var records = InMemoryRecords(capacity: 10)
        let old = (0..<10).map { bytes(UInt32($0)) }
        // Ten records asked for 15 times each (the sketch's highest count), none read since.
        var first = WrittenBatch()
        for key in old {
            let hash = key.withUnsafeBytes(keyHash)
            for _ in 0..<15 { policy.sketch.increment(hash) }
            records.insert(key)
            first.append(key, hash: hash)
        }
        _ = try policy.settle(&records, written: &first, in: txn)
        // A new key asked for `asks` times, then written: it enters the window, and the key
        // there before it leaves as the candidate.
        func write(_ value: UInt32, asks: Int) throws {
            let key = bytes(value)
            let hash = key.withUnsafeBytes(keyHash)
            for _ in 0..<asks { policy.sketch.increment(hash) }
            records.insert(key)
            records.pinned = [key]
            var written = WrittenBatch()
            written.append(key, hash: hash)
            _ = try policy.settle(&records, written: &written, in: txn)
        }
        // The last old key, out of the window, ties with the victim (15 against 15) and goes.
        try write(100, asks: 2)
        // Two candidates asked for twice lose to the victim; each halves its counts (15 → 7 → 3).
        try write(101, asks: 2)
        try write(102, asks: 4)
        #expect(!records.contains(bytes(100)) && !records.contains(bytes(101)))
        #expect(old.filter(records.contains).count == 9)
        // The candidate asked for four times now beats the victim (3): without the halving it
        // would have lost to 15.
        try write(103, asks: 1)
        #expect(records.contains(bytes(102)))
        #expect(old.filter(records.contains).count == 8)
    }

    @Test("every settle ends within the bound and never evicts what the running write wrote")
    func boundAndPinned() throws {
        try inTransaction { txn in try boundAndPinned(txn) }
    }

    private func boundAndPinned(_ txn: borrowing LMDB.WriteTransaction) throws {
        let policy = EvictionPolicy(records: 100)
        var records = InMemoryRecords(capacity: 100)
        var generator = SplitMix(seed: 3)
        for round in 0..<2_000 {
            // A write of 1 to 20 keys, some new, some rewritten; a long one (1 in 8: up to 40
            // keys, more than the window's 1) settles part way through too, as a bulk put does.
            let long = generator.next() % 8 == 0
            let count = Int(generator.next() % (long ? 40 : 20)) + 1
            records.pinned = []
            var written = WrittenBatch()
            for number in 1...count {
                let key = bytes(UInt32(generator.next() % 1_000))
                records.insert(key)
                records.pinned.insert(key)
                written.append(key, hash: key.withUnsafeBytes(keyHash))
                if long, number < count, generator.next() % 4 == 0 {
                    _ = try policy.settle(&records, written: &written, partial: true, in: txn)
                    #expect(records.count <= 100, "round \(round), part way: \(records.count) records")
                    // The window's 1 key is held back for the next settle.
                    #expect(written.count == 1, "round \(round): \(written.count) keys held back")
                }
            }
            _ = try policy.settle(&records, written: &written, in: txn)
            #expect(written.count == 0)
            #expect(records.count <= 100, "round \(round): \(records.count) records")
            #expect(records.pinned.allSatisfy(records.contains), "round \(round): a key written by the write went")
            // Reads between writes.
            for _ in 0..<10 {
                let key = bytes(UInt32(generator.next() % 1_000))
                policy.accessed(key.withUnsafeBytes(keyHash), hit: records.contains(key))
            }
        }
    }

    @Test("a write larger than the bound leaves the collection over it, for the caller to refuse")
    func writeLargerThanBound() throws {
        try inTransaction { txn in try writeLargerThanBound(txn) }
    }

    private func writeLargerThanBound(_ txn: borrowing LMDB.WriteTransaction) throws {
        let policy = EvictionPolicy(records: 10)
        var records = InMemoryRecords(capacity: 10)
        var first = WrittenBatch()
        for value in 0..<5 {
            records.insert(bytes(UInt32(value)))
            first.append(bytes(UInt32(value)), hash: bytes(UInt32(value)).withUnsafeBytes(keyHash))
        }
        _ = try policy.settle(&records, written: &first, in: txn)
        records.pinned = Set((100..<115).map { bytes(UInt32($0)) })
        var second = WrittenBatch()
        for key in records.pinned.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            records.insert(key)
            second.append(key, hash: key.withUnsafeBytes(keyHash))
        }
        let evicted = try policy.settle(&records, written: &second, in: txn)
        #expect(evicted == 5)  // every record not written by the write
        #expect(records.count == 15)
        #expect(records.isOverCapacity)
    }

    @Test("a write as large as the bound evicts every older record, however often its own keys come first")
    func writeAsLargeAsBound() throws {
        try inTransaction { txn in try writeAsLargeAsBound(txn) }
    }

    private func writeAsLargeAsBound(_ txn: borrowing LMDB.WriteTransaction) throws {
        for seed in 0..<20 {
            let policy = EvictionPolicy(records: 100)
            var records = InMemoryRecords(capacity: 100)
            var generator = SplitMix(seed: UInt64(seed))
            // A full collection, some of it read, in writes of 1 to 10 records.
            var next: UInt32 = 0
            while next < 100 + UInt32(seed * 7) {
                var written = WrittenBatch()
                for _ in 0..<(generator.next() % 10 + 1) {
                    records.insert(bytes(next))
                    written.append(bytes(next), hash: bytes(next).withUnsafeBytes(keyHash))
                    next += 1
                }
                records.pinned = []
                _ = try policy.settle(&records, written: &written, in: txn)
                for _ in 0..<20 {
                    let key = bytes(UInt32(generator.next() % UInt64(next)))
                    policy.accessed(key.withUnsafeBytes(keyHash), hit: records.contains(key))
                }
            }
            // One write of 100 new records, settled every 10 as a bulk put is: every older
            // record must go, with the write's own keys (which may not) all over the key order.
            records.pinned = []
            var written = WrittenBatch()
            for number in 1...100 {
                let key = bytes(UInt32(generator.next() % 1_000_000) + 1_000_000)
                records.insert(key)
                records.pinned.insert(key)
                written.append(key, hash: key.withUnsafeBytes(keyHash))
                if number % 10 == 0, number < 100 {
                    _ = try policy.settle(&records, written: &written, partial: true, in: txn)
                }
            }
            _ = try policy.settle(&records, written: &written, in: txn)
            #expect(records.count == 100, "seed \(seed): \(records.count) records left, capacity 100")
        }
    }

    @Test("the sketch never estimates below a key's count, up to 15, and halves after its sample")
    func sketchCounts() {
        let sketch = FrequencySketch(records: 1_000, sampleMultiple: 10)
        var generator = SplitMix(seed: 5)
        var truth: [UInt64: Int] = [:]
        for _ in 0..<5_000 {
            let hash = mix64(generator.next() % 2_000)
            sketch.increment(hash)
            truth[hash, default: 0] += 1
        }
        for (hash, count) in truth { #expect(sketch.estimate(hash) >= min(count, 15)) }
        let hot = mix64(123_456_789)
        for _ in 0..<15 { sketch.increment(hot) }
        #expect(sketch.estimate(hot) == 15)
        // 10,000 accesses in all reach the sample size: every counter is halved once.
        for _ in 0..<5_000 - 15 { sketch.increment(mix64(generator.next() % 2_000 + 10_000)) }
        #expect((7...8).contains(sketch.estimate(hot)), "\(sketch.estimate(hot))")
    }

    @Test("recent-use counts rise to 3 on hits and fall by one as the hand passes")
    func recentUseCounts() {
        let counts = RecentUse(records: 64)
        let hash = mix64(42)
        #expect(counts.count(hash) == 0)
        #expect(!counts.lower(hash))
        for _ in 0..<5 { counts.touch(hash) }
        #expect(counts.count(hash) == 3)
        #expect(counts.lower(hash))
        #expect(counts.count(hash) == 2)
        counts.clear(hash)
        #expect(counts.count(hash) == 0)
    }

    @Test("keys in one bucket of recent-use counts keep counts of their own; a full bucket gives up its lowest")
    func recentUseBuckets() {
        let counts = RecentUse(records: 64)
        // Bits 20 and up pick the bucket, the top six the fingerprint: nine keys, one bucket.
        let keys = (1...9).map { UInt64($0) << 58 | 5 << 20 }
        for _ in 0..<3 { counts.touch(keys[0]) }
        #expect(counts.count(keys[1]) == 0, "a key never read reads another's count")
        counts.touch(keys[1])
        #expect(counts.count(keys[0]) == 3 && counts.count(keys[1]) == 1)
        counts.clear(keys[0])
        #expect(counts.count(keys[0]) == 0 && counts.count(keys[1]) == 1)
        // Eight keys fill the bucket (counts 1 to 3); the ninth takes the entry of a key at 1.
        for (index, key) in keys[0..<8].enumerated() {
            counts.clear(key)
            for _ in 0...(index == 3 ? 0 : 1) { counts.touch(key) }
        }
        counts.touch(keys[8])
        #expect(counts.count(keys[8]) == 1)
        #expect(counts.count(keys[3]) == 0, "the lowest count was not the one given up")
        for (index, key) in keys[0..<8].enumerated() where index != 3 { #expect(counts.count(key) == 2) }
    }

    @Test(
        "the access buffer hands one thread's accesses over once each: a batch when 32 are written, the rest at a drain"
    )
    func accessBufferOneThread() {
        let buffer = AccessBuffer()
        var counted: [UInt64] = []
        var batches = 0
        for value in 1...100 {
            buffer.record(UInt64(value) << 1) { batch in
                counted += batch
                batches += 1
            }
        }
        #expect(batches == 100 / AccessBuffer.batch)
        #expect(counted.count == batches * AccessBuffer.batch)
        buffer.drain { counted += $0 }
        #expect(counted.sorted() == (1...100).map { UInt64($0) << 1 })
        buffer.drain { counted += $0 }
        #expect(counted.count == 100, "a drain handed over an access twice")
    }

    @Test("threads writing at once: every access is handed over exactly once")
    func accessBufferThreads() {
        let buffer = AccessBuffer()
        let counted = Mutex<[UInt64]>([])
        let threads = 4
        let each = 20_000
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for value in 1...each {
                buffer.record(UInt64(thread * each + value) << 1) { batch in
                    counted.withLock { $0 += batch }
                }
            }
        }
        buffer.drain { batch in counted.withLock { $0 += batch } }
        let all = counted.withLock { $0 }
        #expect(all.count == threads * each, "\(all.count) handed over for \(threads * each) written")
        #expect(all.sorted() == (1...(threads * each)).map { UInt64($0) << 1 }, "an access lost, doubled or made up")
    }

    @Test(
        "the key hash set agrees with a Set through inserts (one at a time and in batches) and removals, as the table grows and shrinks"
    )
    func keyHashSet() {
        var table = KeyHashSet()
        var reference = Set<UInt64>()
        var generator = SplitMix(seed: 21)
        // Hashes from a small range of homes, so that probes run long and removals shift entries.
        func hash() -> UInt64 { (generator.next() % 3_000) << 2 | (generator.next() & 0xFFFF) << 40 & ~3 }
        let pool = (0..<6_000).map { _ in hash() }
        for round in 0..<40_000 {
            let key = pool[Int(generator.next() % UInt64(pool.count))]
            let choice = generator.next() % 6
            if choice < 2 {
                #expect(table.remove(key) == (reference.remove(key) != nil), "round \(round)")
            } else if choice == 2 {
                // A batch, with hashes that may repeat in it or be in the set already.
                let batch = (0..<Int(generator.next() % 40)).map { _ in pool[Int(generator.next() % UInt64(pool.count))]
                }
                table.insert(contentsOf: batch + batch.prefix(3))
                reference.formUnion(batch)
            } else {
                table.insert(key)
                reference.insert(key)
            }
            #expect(table.count == reference.count, "round \(round)")
        }
        for key in pool { #expect(table.contains(key) == reference.contains(key)) }
        #expect(table.byteCount >= 4 * 8 * reference.count / 3)
        // Emptied, the table gives its memory back as it goes.
        for key in pool.reversed() {
            table.remove(key)
            reference.remove(key)
            #expect(table.count == reference.count)
        }
        #expect(table.count == 0 && table.byteCount <= 8 * 2_048, "an empty table kept \(table.byteCount) bytes")
    }

    @Test(
        "a transaction's written keys are all found, through batches that outgrow the size it expected, and its filter turns most others away"
    )
    func writtenKeys() {
        var generator = SplitMix(seed: 33)
        func hash() -> UInt64 { generator.next() & ~1 }
        // Sized for 10 keys; batches of up to 2,000 outgrow its filter (256 keys) several times.
        let written = WrittenKeys(expected: 10)
        var inserted: [UInt64] = []
        for batch in [3, 500, 1, 2_000, 40, 2_000] {
            for _ in 0..<batch {
                let next = hash()
                written.insert(next)
                inserted.append(next)
            }
            // Asked between batches: the keys added since go in before the answer.
            let missing = inserted.filter { !written.contains($0) }
            #expect(missing.isEmpty, "after \(inserted.count) keys, \(missing.count) not found")
            #expect(written.count == inserted.count)
        }
        // Keys never written: the set says no to all, and the filter sent few of them on to it
        // (about 1% expected at 16 to 32 bits a key).
        let others = (0..<10_000).map { _ in hash() }
        #expect(others.allSatisfy { !written.contains($0) })
        #expect(written.filterPassRate(others) < 0.05, "the filter let \(written.filterPassRate(others)) through")
    }

    @Test(
        "the key queue gives keys back first in, first out, across its compaction, batches queued at once and keys dropped at once"
    )
    func keyQueue() {
        var queue = KeyQueue()
        var expected: [[UInt8]] = []
        var generator = SplitMix(seed: 9)
        // One buffer for every key taken out, as the policy reuses one: a longer key before a
        // shorter must not leave bytes behind.
        var key: [UInt8] = []
        func freshKey() -> [UInt8] {
            (0..<Int(generator.next() % 40)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        }
        for round in 0..<20_000 {
            if round % 61 == 0 {
                // A stretch of a batch queued at once, as a write's keys enter the window and
                // probation: the batch's ring wraps when keys were taken from its front, and so may
                // this one.
                var batch = KeyQueue()
                var batchKeys: [[UInt8]] = []
                for _ in 0..<Int(generator.next() % 40) {
                    let fresh = freshKey()
                    batch.append(fresh)
                    batchKeys.append(fresh)
                    if generator.next() % 2 == 0 {
                        batch.dropFirst()
                        batchKeys.removeFirst()
                    }
                }
                let start = Int(generator.next() % UInt64(batchKeys.count + 1))
                let end = start + Int(generator.next() % UInt64(batchKeys.count - start + 1))
                queue.append(contentsOf: batch, keys: start..<end)
                expected += batchKeys[start..<end]
            } else if (round / 2_500 % 2 == 0 ? generator.next() % 3 != 0 : generator.next() % 3 == 0)
                || expected.isEmpty
            {
                // Appends two rounds in three for a stretch, one in three for the next, so that
                // the queue grows and compacts, and then wraps round a small ring, again and again.
                let fresh = freshKey()
                queue.append(fresh)
                expected.append(fresh)
            } else if generator.next() % 4 == 0 {
                // Dropped without being copied out, one or several at once (perhaps more than
                // are queued): the next key must still come back whole.
                let several = Int(generator.next() % 5)
                if several == 0 {
                    queue.dropFirst()
                    expected.removeFirst()
                } else {
                    queue.dropFirst(several)
                    expected.removeFirst(min(several, expected.count))
                }
            } else {
                #expect(queue.removeFirst(into: &key) && key == expected.removeFirst(), "round \(round)")
            }
            #expect(queue.count == expected.count)
            if round % 97 == 0 {
                // A stretch read in place, as the policy asks for victims' lines ahead.
                var stretch: [[UInt8]] = []
                queue.forEach(from: 3, to: 9) { stretch.append(Array($0)) }
                #expect(stretch == Array(expected.dropFirst(3).prefix(6)), "round \(round)")
            }
        }
        while queue.removeFirst(into: &key) { #expect(key == expected.removeFirst()) }
        #expect(expected.isEmpty && queue.count == 0)
    }
}

// MARK: - Replaying traces

/// The hit ratio of `trace` through the policy: a get, and on a miss a write of the key that
/// settles the collection to `capacity`, as a read-through cache does.
func replay(_ trace: [UInt32], capacity: Int, strategy: EvictionStrategy = .frequency) throws -> Double {
    try inTransaction { txn in try replay(trace, capacity: capacity, strategy: strategy, txn) }
}

/// Runs `body` in a write transaction of a temporary store, which the policy's source is handed
/// and the in-memory records ignore.
func inTransaction<R>(_ body: (borrowing LMDB.WriteTransaction) throws -> R) throws -> R {
    try withStore { store, _ in try store.writeLMDB(body) }
}

func replay(
    _ trace: [UInt32], capacity: Int, strategy: EvictionStrategy, _ txn: borrowing LMDB.WriteTransaction
) throws -> Double {
    let policy = EvictionPolicy(records: capacity, strategy: strategy)
    var records = InMemoryRecords(capacity: capacity)
    var hits = 0
    for id in trace {
        let key = bytes(id)
        let hash = key.withUnsafeBytes(keyHash)
        let hit = records.contains(key)
        policy.accessed(hash, hit: hit)
        if hit {
            hits += 1
            continue
        }
        records.insert(key)
        records.pinned = [key]
        var written = WrittenBatch()
        written.append(key, hash: hash)
        _ = try policy.settle(&records, written: &written, in: txn)
    }
    return Double(hits) / Double(trace.count)
}

/// LRU's hit ratio on `trace` at `capacity` (a list through a dictionary of nodes).
func lruHitRatio(_ trace: [UInt32], capacity: Int) -> Double {
    var previous: [UInt32: UInt32] = [:]
    var next: [UInt32: UInt32] = [:]
    var newest: UInt32?
    var oldest: UInt32?
    var present = Set<UInt32>()
    func unlink(_ id: UInt32) {
        let before = previous.removeValue(forKey: id)
        let after = next.removeValue(forKey: id)
        if let before { next[before] = after } else { oldest = after }
        if let after { previous[after] = before } else { newest = before }
    }
    func pushNewest(_ id: UInt32) {
        if let newest { next[newest] = id; previous[id] = newest } else { oldest = id }
        newest = id
    }
    var hits = 0
    for id in trace {
        if present.contains(id) {
            hits += 1
            unlink(id)
        } else {
            present.insert(id)
            if present.count > capacity, let victim = oldest {
                unlink(victim)
                present.remove(victim)
            }
        }
        pushNewest(id)
    }
    return Double(hits) / Double(trace.count)
}

/// Keys as 4 big-endian bytes, so that key order is numeric order.
func bytes(_ id: UInt32) -> [UInt8] {
    [UInt8(id >> 24), UInt8((id >> 16) & 0xFF), UInt8((id >> 8) & 0xFF), UInt8(id & 0xFF)]
}

/// Requests for `objects` objects whose popularity follows Zipf's law with exponent `alpha`.
func zipfTrace(objects: Int, requests: Int, alpha: Double, seed: UInt64) -> [UInt32] {
    var cumulative: [Double] = []
    cumulative.reserveCapacity(objects)
    var total = 0.0
    for rank in 1...objects {
        total += 1 / Double(rank).pow(alpha)
        cumulative.append(total)
    }
    var generator = SplitMix(seed: seed)
    // Ranks are scattered over the IDs, so that popularity has nothing to do with key order.
    let ids = (0..<UInt32(objects)).map { UInt32(truncatingIfNeeded: mix64(UInt64($0)) % 1_000_000_000) }
    return (0..<requests).map { _ in
        let point = Double(generator.next() >> 11) / Double(1 << 53) * total
        var low = 0
        var high = objects - 1
        while low < high {
            let middle = (low + high) / 2
            if cumulative[middle] < point { low = middle + 1 } else { high = middle }
        }
        return ids[low]
    }
}

extension Double {
    fileprivate func pow(_ exponent: Double) -> Double { exp(exponent * log(self)) }
}

struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        return mix64(state &- 0x9E37_79B9_7F4A_7C15)
    }
}

/// Records in memory in key order, with a bound in records and the keys of the running write.
struct InMemoryRecords: EvictionSource {
    let capacity: Int
    private var keys: [[UInt8]] = []
    var pinned: Set<[UInt8]> = []

    init(capacity: Int) { self.capacity = capacity }

    var count: Int { keys.count }
    var recordCount: Int { keys.count }
    var isOverCapacity: Bool { keys.count > capacity }
    var recordsOver: Int { max(0, keys.count - capacity) }

    private func index(after key: [UInt8]) -> Int {
        var low = 0
        var high = keys.count
        while low < high {
            let middle = (low + high) / 2
            if key.lexicographicallyPrecedes(keys[middle]) { high = middle } else { low = middle + 1 }
        }
        return low
    }

    func contains(_ key: [UInt8]) -> Bool {
        let index = index(after: key)
        return index > 0 && keys[index - 1] == key
    }

    mutating func insert(_ key: [UInt8]) {
        guard !contains(key) else { return }
        keys.insert(key, at: index(after: key))
    }

    func walk(
        after position: [UInt8]?, in txn: borrowing LMDB.WriteTransaction,
        _ visit: (UnsafeRawBufferPointer, UInt64) throws -> Bool
    ) rethrows -> [UInt8]? {
        var index = position.map(index(after:)) ?? 0
        while index < keys.count {
            let key = keys[index]
            if !pinned.contains(key), try !key.withUnsafeBytes({ try visit($0, keyHash($0)) }) { return key }
            index += 1
        }
        return nil
    }

    mutating func evict(_ key: [UInt8], hash: UInt64, in txn: borrowing LMDB.WriteTransaction) -> EvictionOutcome {
        guard contains(key) else { return .absent }
        guard !pinned.contains(key) else { return .pinned }
        keys.remove(at: index(after: key) - 1)
        return .evicted
    }

    /// Records in memory never expire: the walk finds nothing (the store's is tested in CapacityTests).
    func removeExpired(
        after position: [UInt8]?, limit: Int, in txn: borrowing LMDB.WriteTransaction
    ) -> (position: [UInt8]?, removed: Int) { (position, 0) }

}
