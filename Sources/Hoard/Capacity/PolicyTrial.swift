internal import Synchronization

/// Which of two admission rules suits the traffic now, decided by running both in miniature on a
/// sample of about ``sampledKeys`` keys: LRU (every new key kept) and W-TinyLFU (a new key kept
/// only if the sketch prefers it). Whichever had more hits lately wins (``prefersRecency``); hit
/// counts halve every ``halvingMultiple`` × the miniature size of sampled accesses. Simulations,
/// not the collection's own hit ratio: a policy turned to recency would see recency's hits only.
/// (The miniature simulation of Waldspurger et al., USENIX ATC 2017; docs/EVICTION.md, "The trial".)
/// Only the thread counting a batch of accesses touches the caches (under the counting lock).
final class PolicyTrial: @unchecked Sendable {
    // @unchecked and exclusivity unchecked: the caches and counts are touched only under the
    // policy's counting lock; `prefersRecencyFlag` is atomic.
    @exclusivity(unchecked) private var recency: MiniatureCache
    @exclusivity(unchecked) private var frequency: MiniatureCache
    @exclusivity(unchecked) private var recencyHits = 0
    @exclusivity(unchecked) private var frequencyHits = 0
    @exclusivity(unchecked) private var sampled = 0
    private let threshold: UInt64
    private let halvingPeriod: Int
    private let prefersRecencyFlag = Atomic<Bool>(false)

    /// The most keys each miniature cache holds.
    static let sampledKeys = 1_024
    /// Short, and the choice flips at any lead: after a hot set moved, the sketch's side wins the
    /// trial back while there is traffic left to gain from it.
    static let halvingMultiple = 1

    /// A trial for a collection bounded to about `records` records.
    init(records: Int) {
        let records = max(records, 1)
        threshold = UInt64(min(4_096, max(1, 4_096 * Self.sampledKeys / records)))
        let size = max(1, records * Int(threshold) / 4_096)
        recency = MiniatureCache(capacity: size, segmented: false)
        frequency = MiniatureCache(capacity: size, segmented: true)
        halvingPeriod = Self.halvingMultiple * size
    }

    /// Whether the keep-every-new-key rule had more hits lately.
    var prefersRecency: Bool { prefersRecencyFlag.load(ordering: .relaxed) }

    /// The memory the two caches take, in bytes.
    var byteCount: Int { recency.byteCount + frequency.byteCount }

    /// Whether the key with `hash` is in the sample.
    @inline(__always)
    func samples(_ hash: UInt64) -> Bool { (hash >> 44) & 0xFFF < threshold }

    /// An access to the sampled key with `hash`, after the sketch counted it. Under the counting lock.
    func accessed(_ hash: UInt64, sketch: FrequencySketch) {
        if recency.accessLRU(hash) { recencyHits += 1 }
        if frequency.accessTinyLFU(hash, sketch: sketch) { frequencyHits += 1 }
        sampled += 1
        if sampled >= halvingPeriod {
            sampled = 0
            recencyHits /= 2
            frequencyHits /= 2
        }
        // A tie keeps the choice.
        if recencyHits != frequencyHits, (recencyHits > frequencyHits) != prefersRecency {
            prefersRecencyFlag.store(recencyHits > frequencyHits, ordering: .relaxed)
        }
    }
}

/// A cache of key hashes only, for ``PolicyTrial``: a pool of nodes in up to three lists
/// (most recent first) and an index from hash to node.
struct MiniatureCache {
    private struct Node {
        var hash: UInt64
        var previous: Int32
        var next: Int32
        var list: Int32
    }

    /// Lists: the whole cache when not segmented; else the window, probation and the protected part.
    private static let window: Int32 = 0
    private static let probation: Int32 = 1
    private static let protected: Int32 = 2

    private var nodes: [Node]
    // Vectors, not arrays: an element is read and written without a check of the storage's
    // uniqueness or bounds (one list a lane; the fourth is unused).
    private var heads = SIMD4<Int32>(repeating: -1)
    private var tails = SIMD4<Int32>(repeating: -1)
    private var counts = SIMD4<Int32>(repeating: 0)
    /// Open addressing: node index + 1, 0 for an empty slot.
    private var index: [Int32]
    private var free: Int32 = -1
    private let capacity: Int
    private let windowCapacity: Int
    private let protectedCapacity: Int

    init(capacity: Int, segmented: Bool) {
        self.capacity = capacity
        // Half the rest protected, not W-TinyLFU's 80%: the miniature stands for the collection's
        // policy, whose hand lets go of a record not read for three passes.
        windowCapacity = segmented ? max(1, capacity / 100) : capacity
        protectedCapacity = (capacity - windowCapacity) / 2
        nodes = []
        nodes.reserveCapacity(capacity)
        var slots = 8
        while slots < capacity * 2 { slots <<= 1 }
        index = Array(repeating: 0, count: slots)
    }

    var byteCount: Int {
        nodes.capacity * MemoryLayout<Node>.stride + index.capacity * MemoryLayout<Int32>.stride
    }

    /// LRU: whether `hash` was there; it is the most recent now.
    mutating func accessLRU(_ hash: UInt64) -> Bool {
        if let node = find(hash) {
            moveToFront(node, list: Self.window)
            return true
        }
        if Int(counts[0]) == capacity, let oldest = popBack(Self.window) { evict(oldest) }
        insert(hash, list: Self.window)
        return false
    }

    /// W-TinyLFU: whether `hash` was there. A new key enters the window; the window's oldest then
    /// goes to probation if there is room, else is weighed against probation's oldest by the sketch.
    mutating func accessTinyLFU(_ hash: UInt64, sketch: FrequencySketch) -> Bool {
        if let node = find(hash) {
            switch nodes[Int(node)].list {
            case Self.window:
                moveToFront(node, list: Self.window)
            case Self.probation:
                moveToFront(node, list: Self.protected)
                if Int(counts[Int(Self.protected)]) > protectedCapacity, let demoted = popBack(Self.protected) {
                    pushFront(demoted, list: Self.probation)
                }
            default:
                moveToFront(node, list: Self.protected)
            }
            return true
        }
        insert(hash, list: Self.window)
        guard Int(counts[Int(Self.window)]) > windowCapacity, let candidate = popBack(Self.window) else { return false }
        if Int(counts[1] + counts[2]) < capacity - windowCapacity {
            pushFront(candidate, list: Self.probation)
            return false
        }
        guard let victim = tails[1] >= 0 ? popBack(Self.probation) : popBack(Self.protected) else {
            evict(candidate)
            return false
        }
        let candidateEstimate = sketch.estimate(nodes[Int(candidate)].hash)
        let victimEstimate = sketch.estimate(nodes[Int(victim)].hash)
        if candidateEstimate > victimEstimate {
            evict(victim)
            pushFront(candidate, list: Self.probation)
        } else {
            // Old popularity fades here as in the collection (``EvictionPolicy/staleVictimRatio``),
            // or the miniature would keep losing to keys the collection has let go.
            if EvictionPolicy.isOldPopularity(victim: victimEstimate, candidate: candidateEstimate) {
                sketch.halve(nodes[Int(victim)].hash)
            }
            evict(candidate)
            pushFront(victim, list: Self.probation)
        }
        return false
    }

    // MARK: Nodes and lists

    private func slot(_ hash: UInt64) -> Int { Int(truncatingIfNeeded: hash >> 8) & (index.count - 1) }

    private func find(_ hash: UInt64) -> Int32? {
        var position = slot(hash)
        while index[position] != 0 {
            let node = index[position] - 1
            if nodes[Int(node)].hash == hash { return node }
            position = (position + 1) & (index.count - 1)
        }
        return nil
    }

    private mutating func insert(_ hash: UInt64, list: Int32) {
        let node: Int32
        if free >= 0 {
            node = free
            free = nodes[Int(node)].next
            nodes[Int(node)].hash = hash
        } else {
            node = Int32(nodes.count)
            nodes.append(Node(hash: hash, previous: -1, next: -1, list: list))
        }
        var position = slot(hash)
        while index[position] != 0 { position = (position + 1) & (index.count - 1) }
        index[position] = node + 1
        pushFront(node, list: list)
    }

    /// Removes `node` (out of every list already) from the index, and frees it.
    private mutating func evict(_ node: Int32) {
        var position = slot(nodes[Int(node)].hash)
        while index[position] != node + 1 { position = (position + 1) & (index.count - 1) }
        // Backward shift: moves later entries of the run into the hole, so lookups need no tombstones.
        var hole = position
        var next = (hole + 1) & (index.count - 1)
        while index[next] != 0 {
            let home = slot(nodes[Int(index[next] - 1)].hash)
            // The entry at `next` may fill the hole unless its home lies cyclically in (hole, next].
            let fits = hole <= next ? (home <= hole || home > next) : (home <= hole && home > next)
            if fits {
                index[hole] = index[next]
                hole = next
            }
            next = (next + 1) & (index.count - 1)
        }
        index[hole] = 0
        nodes[Int(node)].next = free
        free = node
    }

    private mutating func pushFront(_ node: Int32, list: Int32) {
        nodes[Int(node)].list = list
        nodes[Int(node)].previous = -1
        nodes[Int(node)].next = heads[Int(list)]
        if heads[Int(list)] >= 0 { nodes[Int(heads[Int(list)])].previous = node } else { tails[Int(list)] = node }
        heads[Int(list)] = node
        counts[Int(list)] += 1
    }

    private mutating func unlink(_ node: Int32) {
        let list = Int(nodes[Int(node)].list)
        let previous = nodes[Int(node)].previous
        let next = nodes[Int(node)].next
        if previous >= 0 { nodes[Int(previous)].next = next } else { heads[list] = next }
        if next >= 0 { nodes[Int(next)].previous = previous } else { tails[list] = previous }
        counts[list] -= 1
    }

    private mutating func moveToFront(_ node: Int32, list: Int32) {
        unlink(node)
        pushFront(node, list: list)
    }

    private mutating func popBack(_ list: Int32) -> Int32? {
        let node = tails[Int(list)]
        guard node >= 0 else { return nil }
        unlink(node)
        return node
    }
}
