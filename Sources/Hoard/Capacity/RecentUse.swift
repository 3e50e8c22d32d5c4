internal import Synchronization

/// Whether each key was read since the eviction hand last passed it: a 2-bit counter per key
/// (0 to 3), raised by a hit and lowered by the hand, kept in a table indexed by the key's hash.
///
/// A hit sets it without a lock (one compare-and-swap). Two keys that share a slot share the
/// counter, which can only keep a record a little longer than it deserves: with four slots per
/// tracked record, about one key in five shares.
final class RecentUse: @unchecked Sendable {
    // @unchecked: `words` is only read and written through its atomics, allocated in init and
    // freed in deinit.
    private let words: UnsafeMutablePointer<Atomic<UInt64>>
    private let wordCount: Int

    /// The highest count: a record read this often survives three passes of the hand unread.
    static let maximum: UInt64 = 3

    init(records: Int, slotsPerRecord: Int = 4) {
        let slots = max(records, 1) * slotsPerRecord
        var count = 2
        while count * 32 < slots { count <<= 1 }
        wordCount = count
        words = .allocate(capacity: count)
        for index in 0..<count { (words + index).initialize(to: Atomic(0)) }
    }

    deinit {
        words.deinitialize(count: wordCount)
        words.deallocate()
    }

    /// The memory the counters take, in bytes.
    var byteCount: Int { wordCount * MemoryLayout<UInt64>.stride }

    @inline(__always)
    private func slot(_ hash: UInt64) -> (word: Int, shift: UInt64) {
        // The hash's top bits pick the slot: the sketch's rows use other mixes of it.
        let slot = Int(truncatingIfNeeded: hash >> 20) & (wordCount * 32 - 1)
        return (slot >> 5, UInt64(slot & 31) << 1)
    }

    /// Counts a hit on the key with `hash`.
    func touch(_ hash: UInt64) {
        let (word, shift) = slot(hash)
        var current = words[word].load(ordering: .relaxed)
        while (current >> shift) & 3 < Self.maximum {
            let (exchanged, original) = words[word].compareExchange(
                expected: current, desired: current &+ (1 << shift), ordering: .relaxed)
            if exchanged { return }
            current = original
        }
    }

    /// The count for the key with `hash`.
    func count(_ hash: UInt64) -> UInt64 {
        let (word, shift) = slot(hash)
        return (words[word].load(ordering: .relaxed) >> shift) & 3
    }

    /// Lowers the count for the key with `hash` by one, if it is above zero; returns whether it was.
    func lower(_ hash: UInt64) -> Bool {
        let (word, shift) = slot(hash)
        var current = words[word].load(ordering: .relaxed)
        while (current >> shift) & 3 > 0 {
            let (exchanged, original) = words[word].compareExchange(
                expected: current, desired: current &- (1 << shift), ordering: .relaxed)
            if exchanged { return true }
            current = original
        }
        return false
    }

    /// Sets the count for the key with `hash` to zero (its record is gone).
    func clear(_ hash: UInt64) {
        let (word, shift) = slot(hash)
        var current = words[word].load(ordering: .relaxed)
        while (current >> shift) & 3 > 0 {
            let (exchanged, original) = words[word].compareExchange(
                expected: current, desired: current & ~(3 << shift), ordering: .relaxed)
            if exchanged { return }
            current = original
        }
    }
}
