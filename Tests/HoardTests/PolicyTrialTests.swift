import Foundation
import Testing

@testable import Hoard

/// The miniature caches that choose between keeping every new key and the frequency filter.
@Suite("Policy trial")
struct PolicyTrialTests {
    @Test("the miniature LRU cache hits exactly where an LRU cache does, through evictions and its index's deletes")
    func miniatureLRUIsLRU() {
        for (trace, capacity) in [
            (zipfTrace(objects: 5_000, requests: 60_000, alpha: 0.8, seed: 3), 300),
            (recencyTrace(requests: 60_000, meanDistance: 40, seed: 5), 100),
            ((0..<20_000).map { UInt32($0 % 51) }, 50),
        ] {
            var cache = MiniatureCache(capacity: capacity, segmented: false)
            let hits = trace.reduce(0) { hits, id in hits + (cache.accessLRU(hash(id)) ? 1 : 0) }
            let expected = lruHitRatio(trace, capacity: capacity) * Double(trace.count)
            #expect(Double(hits) == expected.rounded(), "capacity \(capacity)")
        }
    }

    @Test("the miniature W-TinyLFU cache keeps popular keys through a scan, where LRU loses them")
    func miniatureTinyLFUResistsScans() {
        let sketch = FrequencySketch(records: 200)
        var cache = MiniatureCache(capacity: 200, segmented: true)
        var lru = MiniatureCache(capacity: 200, segmented: false)
        let popular = (0..<UInt32(150)).map { $0 }
        func access(_ id: UInt32) -> (Bool, Bool) {
            sketch.increment(hash(id))
            return (cache.accessTinyLFU(hash(id), sketch: sketch), lru.accessLRU(hash(id)))
        }
        for _ in 0..<20 { for id in popular { _ = access(id) } }
        for id in UInt32(10_000)..<UInt32(12_000) { _ = access(id) }
        let after = popular.map(access)
        // Half the cache is protected, so about 50 of the popular keys are in probation while the
        // scan passes and face each of its keys there; the sketch keeps all but a few of them.
        #expect(after.filter(\.0).count >= 135, "W-TinyLFU kept \(after.filter(\.0).count) of 150")
        #expect(after.filter(\.1).count == 0)
    }

    @Test("the trial turns to recency when recent keys come back soon, and back to frequency when popularity lasts")
    func trialFollowsTheTraffic() {
        let records = 500
        let sketch = FrequencySketch(records: records)
        let trial = PolicyTrial(records: records)
        func replay(_ trace: [UInt32]) {
            for id in trace {
                sketch.increment(hash(id))
                if trial.samples(hash(id)) { trial.accessed(hash(id), sketch: sketch) }
            }
        }
        replay(zipfTrace(objects: 20_000, requests: 100_000, alpha: 0.9, seed: 23))
        #expect(!trial.prefersRecency)
        replay(recencyTrace(requests: 100_000, meanDistance: 250, seed: 29))
        #expect(trial.prefersRecency)
        replay(zipfTrace(objects: 20_000, requests: 100_000, alpha: 0.9, seed: 31))
        #expect(!trial.prefersRecency)
        replay(recencyTrace(requests: 100_000, meanDistance: 250, seed: 37))
        #expect(trial.prefersRecency)
        // A loop a little larger than the bound: LRU keeps nothing of it.
        replay((0..<100_000).map { UInt32(5_000_000 + $0 % 550) })
        #expect(!trial.prefersRecency)
    }

    @Test(
        "after a hot set moves to new keys, the trial turns to recency and is back with the sketch within 150,000 requests"
    )
    func trialReturnsAfterAMove() {
        let records = 5_000
        let sketch = FrequencySketch(records: records)
        let trial = PolicyTrial(records: records)
        func access(_ id: UInt32) {
            let hash = bytes(id).withUnsafeBytes(keyHash)
            sketch.increment(hash)
            if trial.samples(hash) { trial.accessed(hash, sketch: sketch) }
        }
        for id in zipfTrace(objects: 50_000, requests: 300_000, alpha: 1.0, seed: 43) { access(id) }
        #expect(!trial.prefersRecency)
        // The same popularity over keys never asked for before.
        let moved = zipfTrace(objects: 50_000, requests: 300_000, alpha: 1.0, seed: 47).map { $0 + 1_000_000 }
        var turned: Int?
        var back: Int?
        for (index, id) in moved.enumerated() {
            access(id)
            if turned == nil, trial.prefersRecency { turned = index }
            if turned != nil, back == nil, !trial.prefersRecency { back = index }
        }
        // Measured: turned after about 1,700 requests and back after about 104,000; with the
        // trial's earlier settings (a lead of 1/32 to flip, hits halved every two turns, 80% of
        // the miniature protected, old popularity kept) back after about 204,000.
        #expect(turned != nil)
        let description = "turned at \(String(describing: turned)), back at \(String(describing: back))"
        #expect(back ?? moved.count <= 150_000, "\(description)")
    }

    @Test("a trial for a million records samples about 1,024 keys' share and takes under 100 KB")
    func trialIsSmall() {
        let trial = PolicyTrial(records: 1_000_000)
        let sampled = (0..<UInt32(1_000_000)).filter { trial.samples(hash($0)) }.count
        #expect((700...1_400).contains(sampled), "\(sampled) keys sampled")
        #expect(trial.byteCount <= 100_000, "\(trial.byteCount) bytes")
        let small = PolicyTrial(records: 1_000)
        #expect((0..<UInt32(1_000)).allSatisfy { small.samples(hash($0)) })
    }

    private func hash(_ id: UInt32) -> UInt64 { bytes(id).withUnsafeBytes(keyHash) }
}

/// Requests of a recency-heavy stream: 30% for a key never asked for before, the rest for one of
/// the recent new keys, about `meanDistance` new keys back (exponentially distributed).
func recencyTrace(requests: Int, meanDistance: Double, seed: UInt64) -> [UInt32] {
    var generator = SplitMix(seed: seed)
    var newest = 10_000_000 &+ UInt32(truncatingIfNeeded: seed) &* 1_000_000
    let first = newest
    return (0..<requests).map { _ in
        if generator.next() % 10 < 3 {
            newest += 1
            return newest
        }
        let uniform = Double(generator.next() >> 11 | 1) / Double(1 << 53)
        let back = UInt32(min(Double(newest - first), -log(uniform) * meanDistance))
        return newest - back
    }
}
