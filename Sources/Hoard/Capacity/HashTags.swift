/// Key hashes (``keyHash(_:)``), each with a small tag (1 to 3), in one flat array of words:
/// open addressing with linear probing, and removal by shifting the entries after a hole back
/// (no tombstones to clean up). The eviction policy keeps which queue each queued key is in this
/// way, and a write the keys it wrote. A `Dictionary` or a `Set` of the hashes hashed every hash
/// again (SipHash) and took about a tenth of an evicting bulk put (BENCHMARKS.md).
///
/// Bits 0 and 1 of an entry are its tag, so two hashes that differ in bit 1 alone count as one
/// (bit 0 of a key hash is always 0): one pair of keys in 2^62, which would only make a queued
/// key look queued twice or not at all, and costs at most a place in the queues.
struct HashTags {
    /// 0 for an empty slot, else the hash with bits 0 and 1 replaced by the tag.
    private var slots: [UInt64]
    private(set) var count = 0

    /// A table for about `capacity` hashes before it grows.
    init(capacity: Int = 0) {
        var size = 16
        while size * 3 < capacity * 4 { size <<= 1 }
        slots = Array(repeating: 0, count: size)
    }

    /// The memory the table takes, in bytes.
    var byteCount: Int { slots.capacity * MemoryLayout<UInt64>.stride }

    /// The tag of `hash`, `nil` when it has none; setting `nil` removes it.
    subscript(hash: UInt64) -> UInt8? {
        get {
            guard let index = find(hash) else { return nil }
            return UInt8(truncatingIfNeeded: slots[index] & 3)
        }
        set {
            if let tag = newValue { insert(hash, tag: tag) } else { remove(hash) }
        }
    }

    func contains(_ hash: UInt64) -> Bool { find(hash) != nil }

    /// Gives `hash` the tag `tag` (1 to 3), adding it when it is not there.
    mutating func insert(_ hash: UInt64, tag: UInt8) {
        let entry = hash & ~3 | UInt64(tag & 3)
        var index = home(hash)
        while slots[index] != 0 {
            if slots[index] & ~3 == hash & ~3 {
                slots[index] = entry
                return
            }
            index = (index + 1) & (slots.count - 1)
        }
        slots[index] = entry
        count += 1
        if count * 4 > slots.count * 3 { resize(to: slots.count * 2) }
    }

    /// Removes `hash` and its tag, if it is there.
    mutating func remove(_ hash: UInt64) {
        guard var hole = find(hash) else { return }
        slots[hole] = 0
        count -= 1
        // Entries after the hole whose probe started at or before it move back into it, so that
        // every entry stays reachable from its home without passing an empty slot.
        let mask = slots.count - 1
        var index = hole
        while true {
            index = (index + 1) & mask
            let entry = slots[index]
            if entry == 0 { break }
            let distance = (index - home(entry)) & mask
            if distance >= (index - hole) & mask {
                slots[hole] = entry
                slots[index] = 0
                hole = index
            }
        }
        // A table that emptied (a queue that drained) gives its memory back.
        if slots.count > 1_024, count * 8 < slots.count { resize(to: slots.count / 4) }
    }

    /// Removes every hash, keeping the memory.
    mutating func removeAll() {
        guard count > 0 else { return }
        for index in slots.indices { slots[index] = 0 }
        count = 0
    }

    @inline(__always)
    private func home(_ hash: UInt64) -> Int {
        Int(truncatingIfNeeded: hash >> 2) & (slots.count - 1)
    }

    private func find(_ hash: UInt64) -> Int? {
        var index = home(hash)
        while slots[index] != 0 {
            if slots[index] & ~3 == hash & ~3 { return index }
            index = (index + 1) & (slots.count - 1)
        }
        return nil
    }

    private mutating func resize(to size: Int) {
        let old = slots
        slots = Array(repeating: 0, count: size)
        count = 0
        for entry in old where entry != 0 { insert(entry, tag: UInt8(entry & 3)) }
    }
}
