/// A first-in, first-out queue of keys back to back in one ring of bytes (a 2-byte length, then
/// the key): a few bytes a key more than the keys, not an allocation each. Past 64 KiB the ring
/// grows by a quarter when full and shrinks when three quarters are free.
struct KeyQueue {
    private var ring: [UInt8] = []
    /// Where the first key's length starts in `ring`.
    private var head = 0
    /// The bytes in use, from `head` on, wrapping around the end of `ring`.
    private var used = 0
    /// How many keys are queued.
    private(set) var count = 0

    /// The memory the queue holds, in bytes.
    var byteCount: Int { ring.capacity }

    /// Queues `key` last. Keys are at most 65,535 bytes (LMDB's are at most 511).
    mutating func append(_ key: some Collection<UInt8>) {
        let length = key.count
        reserve(2 + length)
        var index = wrapped(head + used)
        let copied: Bool? =
            index + 2 + length > ring.count
            ? nil
            : key.withContiguousStorageIfAvailable { bytes in
                // Room before the ring's end: one copy, not a byte at a time.
                ring.withUnsafeMutableBytes { ring in
                    ring[index] = UInt8(truncatingIfNeeded: length >> 8)
                    ring[index + 1] = UInt8(truncatingIfNeeded: length)
                    guard let target = ring.baseAddress else { return true }
                    copyKeyBytes(UnsafeRawBufferPointer(bytes), to: target + index + 2)
                    return true
                }
            }
        if copied == nil {
            ring[index] = UInt8(truncatingIfNeeded: length >> 8)
            index = wrapped(index + 1)
            ring[index] = UInt8(truncatingIfNeeded: length)
            for byte in key {
                index = wrapped(index + 1)
                ring[index] = byte
            }
        }
        used += 2 + length
        count += 1
    }

    /// Queues the keys of `other` at the positions in `keys` (counted from its first, from 0), in
    /// order, copying their bytes as they lie, in at most four runs.
    mutating func append(contentsOf other: KeyQueue, keys: Range<Int>) {
        let keys = keys.clamped(to: 0..<other.count)
        guard !keys.isEmpty else { return }
        // Where the first key starts, and how many bytes the keys take: for all of them (a
        // write's keys into the window, most often), the bytes in use; else found key by key.
        var from = other.head
        var remaining = other.used
        if keys.count != other.count {
            remaining = 0
            var index = other.head
            for number in 0..<keys.upperBound {
                if number == keys.lowerBound { from = index }
                let length = Int(other.ring[index]) << 8 | Int(other.ring[other.wrapped(index + 1)])
                if number >= keys.lowerBound { remaining += 2 + length }
                index = other.wrapped(other.wrapped(index + 2) + length)
            }
        }
        reserve(remaining)
        var to = wrapped(head + used)
        used += remaining
        count += keys.count
        other.ring.withUnsafeBytes { source in
            ring.withUnsafeMutableBytes { target in
                while remaining > 0 {
                    let run = min(remaining, source.count - from, target.count - to)
                    UnsafeMutableRawBufferPointer(rebasing: target[to..<(to + run)]).copyMemory(
                        from: UnsafeRawBufferPointer(rebasing: source[from..<(from + run)]))
                    from = from + run == source.count ? 0 : from + run
                    to = to + run == target.count ? 0 : to + run
                    remaining -= run
                }
            }
        }
    }

    /// Puts the first key in `key` (its old bytes replaced, its memory kept), without removing
    /// it; `false` when the queue is empty.
    func first(into key: inout [UInt8]) -> Bool {
        guard count > 0 else { return false }
        copyKey(at: head, into: &key)
        return true
    }

    /// Removes the first key, into `key` (its old bytes replaced, its memory kept, so that a
    /// loop over the queue allocates nothing); `false` when the queue is empty.
    mutating func removeFirst(into key: inout [UInt8]) -> Bool {
        guard first(into: &key) else { return false }
        dropFirst()
        return true
    }

    /// Removes the first key without copying it out (a victim, whose key the caller holds).
    mutating func dropFirst() { dropFirst(1) }

    /// Removes the first `keys` keys, reading only their lengths; a queue that drained gives
    /// memory back.
    mutating func dropFirst(_ keys: Int) {
        let keys = min(keys, count)
        guard keys > 0 else { return }
        var index = head
        ring.withUnsafeBytes { ring in
            let size = ring.count
            for _ in 0..<keys {
                let second = index + 1 == size ? 0 : index + 1
                let length = Int(ring[index]) << 8 | Int(ring[second])
                index += 2 + length
                if index >= size { index -= size }
            }
        }
        used -= (index - head + ring.count) % ring.count
        if keys == count { used = 0 }
        head = index
        count -= keys
        if count == 0 { head = 0 }
        if ring.count > 4_096, used * 4 < ring.count { resize(to: max(used + used / 4, 256)) }
    }

    /// Calls `body` with each of the first `limit` keys, first to last, without removing them.
    func forEach(first limit: Int, _ body: (UnsafeRawBufferPointer) -> Void) {
        forEach(from: 0, to: limit, body)
    }

    /// Calls `body` with the keys from the `start`th to before the `end`th (counted from the
    /// first, from 0), without removing them.
    func forEach(from start: Int, to end: Int, _ body: (UnsafeRawBufferPointer) -> Void) {
        var index = head
        var wrappedKey: [UInt8] = []
        for number in 0..<min(end, count) {
            let length = Int(ring[index]) << 8 | Int(ring[wrapped(index + 1)])
            let keyStart = wrapped(index + 2)
            if number >= start {
                if keyStart + length <= ring.count {
                    ring.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[keyStart..<(keyStart + length)])) }
                } else {
                    copyKey(at: index, into: &wrappedKey)
                    wrappedKey.withUnsafeBytes(body)
                }
            }
            index = wrapped(keyStart + length)
        }
    }

    @inline(__always)
    private func wrapped(_ index: Int) -> Int { index >= ring.count ? index - ring.count : index }

    /// Puts the key whose length starts at `index` in `key`.
    private func copyKey(at index: Int, into key: inout [UInt8]) {
        let length = Int(ring[index]) << 8 | Int(ring[wrapped(index + 1)])
        let start = wrapped(index + 2)
        // `key` is resized (keys are mostly of one length, so mostly not) and its bytes copied
        // over from the ring's memory, not appended as slices (generic paths).
        if key.count > length {
            key.removeLast(key.count - length)
        } else if key.count < length {
            key.append(contentsOf: repeatElement(0, count: length - key.count))
        }
        ring.withUnsafeBytes { ring in
            key.withUnsafeMutableBytes { key in
                let first = min(length, ring.count - start)
                guard first < length else {
                    if let target = key.baseAddress {
                        copyKeyBytes(UnsafeRawBufferPointer(rebasing: ring[start..<(start + length)]), to: target)
                    }
                    return
                }
                // Wrapped around the ring's end: in two parts.
                key.copyMemory(from: UnsafeRawBufferPointer(rebasing: ring[start..<(start + first)]))
                UnsafeMutableRawBufferPointer(rebasing: key[first...]).copyMemory(
                    from: UnsafeRawBufferPointer(rebasing: ring[..<(length - first)]))
            }
        }
    }

    /// Grows the ring, if it must, so that `bytes` more fit: doubling while small (a write's
    /// keys), a quarter at a time past 64 KiB.
    private mutating func reserve(_ bytes: Int) {
        guard used + bytes > ring.count else { return }
        let grown = ring.count < 65_536 ? ring.count * 2 : ring.count + ring.count / 4
        resize(to: max(used + bytes, grown, 256))
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

    var count: Int { hashes.count }

    /// Notes `key`, whose ``keyHash(_:)`` is `hash`.
    mutating func append(_ key: some Collection<UInt8>, hash: UInt64) {
        keys.append(key)
        hashes.append(hash)
    }

    /// Removes the first `count` keys.
    mutating func removeFirst(_ count: Int) {
        keys.dropFirst(count)
        hashes.removeFirst(count)
    }

    mutating func removeAll() {
        keys = KeyQueue()
        hashes.removeAll(keepingCapacity: true)
    }
}
