/// A first-in, first-out queue of keys kept back to back in one byte buffer (a 2-byte length,
/// then the key), so that a queue of a hundred thousand short keys costs a few bytes more than
/// the keys themselves, not an allocation each.
struct KeyQueue {
    private var bytes: [UInt8] = []
    /// Where the first key's length starts in `bytes`.
    private var head = 0
    /// How many keys are queued.
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    /// The memory the queue holds, in bytes.
    var byteCount: Int { bytes.capacity }

    /// Queues `key` last. Keys are at most 65,535 bytes (LMDB's are at most 511).
    mutating func append(_ key: some Collection<UInt8>) {
        let length = UInt16(truncatingIfNeeded: key.count)
        bytes.append(UInt8(length >> 8))
        bytes.append(UInt8(length & 0xFF))
        bytes.append(contentsOf: key)
        count += 1
    }

    /// The first key, without removing it.
    var first: ArraySlice<UInt8>? {
        guard count > 0 else { return nil }
        let length = Int(bytes[head]) << 8 | Int(bytes[head + 1])
        return bytes[(head + 2)..<(head + 2 + length)]
    }

    /// Removes and returns the first key.
    @discardableResult
    mutating func removeFirst() -> [UInt8]? {
        guard let key = first else { return nil }
        head += 2 + key.count
        count -= 1
        let taken = Array(key)
        if count == 0 {
            bytes.removeAll(keepingCapacity: bytes.capacity <= 65_536)
            head = 0
        } else if head > 4096, head > bytes.count / 2 {
            // Slide the queue to the front once the consumed part is more than half the buffer:
            // each byte moves at most once per time the queue's length turns over. A queue that
            // drained to a quarter of its buffer (probation after a collection filled) moves to
            // a buffer of its size, so that its memory follows its length down too.
            if bytes.capacity > 4 * (bytes.count - head) {
                bytes = Array(bytes[head...])
            } else {
                bytes.removeFirst(head)
            }
            head = 0
        }
        return taken
    }

    /// Queues every key of `other` last, in its order (one copy of its bytes).
    mutating func append(contentsOf other: KeyQueue) {
        bytes.append(contentsOf: other.bytes[other.head...])
        count += other.count
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
