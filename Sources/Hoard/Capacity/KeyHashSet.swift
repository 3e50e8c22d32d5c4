internal import CCRC32

/// A set of key hashes (``keyHash(_:)``) in one flat array of words: open addressing with linear
/// probing, and removal by shifting the entries after a hole back (no tombstones to clean up).
/// The eviction policy keeps the window's keys this way, and a write the keys it wrote (a `Set`
/// would hash every hash again).
///
/// An entry is the hash with bit 0 set (bit 0 of a key hash is always 0), so that no entry is 0,
/// the mark of an empty slot. The table grows when it is half full, which keeps probes and
/// removals' shifts short.
struct KeyHashSet {
    private var slots: [UInt64]
    private(set) var count = 0

    /// A set for about `capacity` hashes before it grows.
    init(capacity: Int = 0) {
        var size = 16
        while size < capacity * 2 { size <<= 1 }
        slots = Array(repeating: 0, count: size)
    }

    /// The memory the set takes, in bytes.
    var byteCount: Int { slots.capacity * MemoryLayout<UInt64>.stride }

    func contains(_ hash: UInt64) -> Bool { find(hash) != nil }

    /// Calls `body` with every hash in the set, in no order.
    func forEach(_ body: (UInt64) -> Void) {
        for entry in slots where entry != 0 { body(entry & ~1) }
    }

    /// Prefetches the whole table, before many look-ups in a table the caches have lost.
    func prefetchAll() {
        slots.withUnsafeBufferPointer { slots in
            guard let base = slots.baseAddress else { return }
            for line in stride(from: 0, to: slots.count, by: 8) { hoard_prefetch(UnsafeRawPointer(base + line)) }
        }
    }

    /// Adds `hash`, if it is not there.
    mutating func insert(_ hash: UInt64) {
        let entry = hash | 1
        var index = home(entry)
        while slots[index] != 0 {
            if slots[index] == entry { return }
            index = (index + 1) & (slots.count - 1)
        }
        slots[index] = entry
        count += 1
        if count * 2 > slots.count { resize(to: slots.count * 2) }
    }

    /// Adds every hash of `hashes` that is not there: the table grows at most once, and its
    /// memory is reached with one check of its uniqueness, not one a hash.
    mutating func insert(contentsOf hashes: some Collection<UInt64>) {
        guard !hashes.isEmpty else { return }
        var size = slots.count
        while (count + hashes.count) * 2 > size { size <<= 1 }
        if size != slots.count { resize(to: size) }
        let mask = slots.count - 1
        var added = 0
        slots.withUnsafeMutableBufferPointer { slots in
            for hash in hashes {
                let entry = hash | 1
                var index = Int(truncatingIfNeeded: entry >> 1) & mask
                while slots[index] != 0 && slots[index] != entry { index = (index + 1) & mask }
                if slots[index] == 0 {
                    slots[index] = entry
                    added += 1
                }
            }
        }
        count += added
    }

    /// Removes `hash`; returns whether it was there.
    @discardableResult
    mutating func remove(_ hash: UInt64) -> Bool {
        let entry = hash | 1
        // Through the buffer: one check of the array's uniqueness, not one a slot written.
        let removed = slots.withUnsafeMutableBufferPointer { slots -> Bool in
            let mask = slots.count - 1
            var hole = Int(truncatingIfNeeded: entry >> 1) & mask
            while slots[hole] != entry {
                if slots[hole] == 0 { return false }
                hole = (hole + 1) & mask
            }
            slots[hole] = 0
            // Entries after the hole whose probe started at or before it move back into it, so
            // that every entry stays reachable from its home without passing an empty slot.
            var index = hole
            while true {
                index = (index + 1) & mask
                let next = slots[index]
                if next == 0 { break }
                let distance = (index - (Int(truncatingIfNeeded: next >> 1) & mask)) & mask
                if distance >= (index - hole) & mask {
                    slots[hole] = next
                    slots[index] = 0
                    hole = index
                }
            }
            return true
        }
        guard removed else { return false }
        count -= 1
        // A set that emptied (the window after a burst of writes) gives its memory back.
        if slots.count > 1_024, count * 8 < slots.count { resize(to: slots.count / 4) }
        return true
    }

    @inline(__always)
    private func home(_ entry: UInt64) -> Int {
        Int(truncatingIfNeeded: entry >> 1) & (slots.count - 1)
    }

    private func find(_ hash: UInt64) -> Int? {
        let entry = hash | 1
        var index = home(entry)
        while slots[index] != 0 {
            if slots[index] == entry { return index }
            index = (index + 1) & (slots.count - 1)
        }
        return nil
    }

    private mutating func resize(to size: Int) {
        let old = slots
        slots = Array(repeating: 0, count: size)
        count = 0
        for entry in old where entry != 0 { insert(entry) }
    }
}
