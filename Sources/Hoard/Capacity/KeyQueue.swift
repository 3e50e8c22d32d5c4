/// A first-in, first-out queue of keys kept back to back in one ring of bytes (a 2-byte length,
/// then the key), so that a queue of a hundred thousand short keys costs a few bytes more than
/// the keys themselves, not an allocation each. The ring grows by a quarter when full and shrinks
/// when three quarters of it are free, so its memory stays within about a quarter of its keys'
/// (a buffer consumed from the front and slid back now and then held up to twice their size,
/// and doubled as it grew).
struct KeyQueue {
    private var ring: [UInt8] = []
    /// Where the first key's length starts in `ring`.
    private var head = 0
    /// The bytes in use, from `head` on, wrapping around the end of `ring`.
    private var used = 0
    /// How many keys are queued.
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    /// The memory the queue holds, in bytes.
    var byteCount: Int { ring.capacity }

    /// Queues `key` last. Keys are at most 65,535 bytes (LMDB's are at most 511).
    mutating func append(_ key: some Collection<UInt8>) {
        let length = key.count
        if used + 2 + length > ring.count { resize(to: max(used + 2 + length, ring.count + ring.count / 4, 256)) }
        var index = wrapped(head + used)
        ring[index] = UInt8(truncatingIfNeeded: length >> 8)
        index = wrapped(index + 1)
        ring[index] = UInt8(truncatingIfNeeded: length)
        for byte in key {
            index = wrapped(index + 1)
            ring[index] = byte
        }
        used += 2 + length
        count += 1
    }

    /// The first key, without removing it.
    var first: [UInt8]? {
        guard count > 0 else { return nil }
        return key(at: head)
    }

    /// Removes and returns the first key.
    @discardableResult
    mutating func removeFirst() -> [UInt8]? {
        guard count > 0 else { return nil }
        let key = key(at: head)
        head = wrapped(head + 2 + key.count)
        used -= 2 + key.count
        count -= 1
        if count == 0 { head = 0 }
        // A queue that drained (probation after a collection filled) gives memory back.
        if ring.count > 4_096, used * 4 < ring.count { resize(to: max(used + used / 4, 256)) }
        return key
    }

    /// Queues every key of `other` last, in its order.
    mutating func append(contentsOf other: KeyQueue) {
        var index = other.head
        for _ in 0..<other.count {
            let key = other.key(at: index)
            append(key)
            index = other.wrapped(index + 2 + key.count)
        }
    }

    @inline(__always)
    private func wrapped(_ index: Int) -> Int { index >= ring.count ? index - ring.count : index }

    /// The key whose length starts at `index`.
    private func key(at index: Int) -> [UInt8] {
        let length = Int(ring[index]) << 8 | Int(ring[wrapped(index + 1)])
        let start = wrapped(index + 2)
        if start + length <= ring.count { return Array(ring[start..<(start + length)]) }
        return Array(ring[start...] + ring[..<(start + length - ring.count)])
    }

    /// Moves the queued bytes, in order from the start, into a ring of `size` bytes.
    private mutating func resize(to size: Int) {
        var resized = [UInt8]()
        resized.reserveCapacity(size)
        if head + used <= ring.count {
            resized.append(contentsOf: ring[head..<(head + used)])
        } else {
            resized.append(contentsOf: ring[head...])
            resized.append(contentsOf: ring[..<(head + used - ring.count)])
        }
        resized.append(contentsOf: repeatElement(0, count: size - used))
        ring = resized
        head = 0
    }
}

/// The keys one write stored, in order, with their hashes: what the eviction policy's window
/// takes in at the write's end (``EvictionPolicy/settle(_:written:in:)``), under one lock.
struct WrittenBatch {
    private(set) var keys = KeyQueue()
    private(set) var hashes: [UInt64] = []

    /// Notes `key`, whose ``keyHash(_:)`` is `hash`.
    mutating func append(_ key: some Collection<UInt8>, hash: UInt64) {
        keys.append(key)
        hashes.append(hash)
    }

    mutating func removeAll() {
        keys = KeyQueue()
        hashes.removeAll(keepingCapacity: true)
    }
}
