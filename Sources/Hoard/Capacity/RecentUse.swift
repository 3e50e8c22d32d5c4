internal import CCRC32
internal import Synchronization

/// Whether each key was read since the eviction hand last passed it: a 2-bit count per key (0 to
/// 3), raised by a hit and lowered by the hand, in a hashed table that tells keys apart.
///
/// The table is a row of 64-bit words, each a bucket of eight 1-byte entries: a 6-bit
/// fingerprint of the key and its count. A key's hash picks its bucket; its entry is the one with
/// its fingerprint and a count above 0 (an entry at 0 is free). So two keys in one bucket keep
/// counts of their own: a cold record that shares a hot one's bucket is not kept as if hot.
///
/// Every operation is one compare-and-swap on one word: a hit counts without a lock.
final class RecentUse: @unchecked Sendable {
    // @unchecked: the table's words are only read and written through their atomics.
    private let table: CounterTable
    private var words: UnsafeMutablePointer<Atomic<UInt64>> { table.words }
    private var wordCount: Int { table.count }

    /// The highest count: a record read this often survives this many passes of the hand unread
    /// (3; 1 for the recency policy, a plain reference bit as CLOCK and SIEVE keep).
    let maximum: UInt64

    /// A table for about `records` keys with `entriesPerRecord` entries (bytes) for each.
    init(records: Int, entriesPerRecord: Int = 4, maximum: UInt64 = 3) {
        self.maximum = maximum
        let entries = max(records, 1) * entriesPerRecord
        var count = 2
        while count * 8 < entries { count <<= 1 }
        table = CounterTable(count: count)
    }

    /// The memory the counts take, in bytes.
    var byteCount: Int { table.byteCount }

    /// The bucket of `hash` and its fingerprint (from bits the sketch's rows and the bucket do
    /// not use alone).
    @inline(__always)
    private func locate(_ hash: UInt64) -> (word: Int, fingerprint: UInt64) {
        (Int(truncatingIfNeeded: hash >> 20) & (wordCount - 1), hash >> 58)
    }

    /// The entry index of `fingerprint` among the counted entries of `bucket`, if any.
    @inline(__always)
    private func find(_ fingerprint: UInt64, in bucket: UInt64) -> Int? {
        for index in 0..<8 {
            let entry = bucket >> UInt64(index * 8)
            if entry & 3 != 0, (entry >> 2) & 0x3F == fingerprint { return index }
        }
        return nil
    }

    /// Asks the processor for the bucket of `hash` without waiting for it, so that an operation
    /// on it soon after finds it in cache.
    @inline(__always)
    func prefetch(_ hash: UInt64) {
        hoard_prefetch(UnsafeRawPointer(words + locate(hash).word))
    }

    /// Counts a hit on the key with `hash`. A key without an entry takes a free one or, in a full
    /// bucket, the one with the lowest count (whose key then reads 0: it loses a pass of grace).
    func touch(_ hash: UInt64) {
        let (word, fingerprint) = locate(hash)
        var current = words[word].load(ordering: .relaxed)
        while true {
            let desired: UInt64
            if let index = find(fingerprint, in: current) {
                let shift = UInt64(index * 8)
                guard (current >> shift) & 3 < maximum else { return }
                desired = current &+ (1 << shift)
            } else {
                var lowest = 0
                for index in 1..<8 where (current >> UInt64(index * 8)) & 3 < (current >> UInt64(lowest * 8)) & 3 {
                    lowest = index
                }
                let shift = UInt64(lowest * 8)
                desired = current & ~(0xFF << shift) | (fingerprint << 2 | 1) << shift
            }
            let (exchanged, original) = words[word].compareExchange(
                expected: current, desired: desired, ordering: .relaxed)
            if exchanged { return }
            current = original
        }
    }

    /// The count for the key with `hash`.
    @inline(__always)
    func count(_ hash: UInt64) -> UInt64 {
        let (word, fingerprint) = locate(hash)
        let bucket = words[word].load(ordering: .relaxed)
        guard let index = find(fingerprint, in: bucket) else { return 0 }
        return (bucket >> UInt64(index * 8)) & 3
    }

    /// Lowers the count for the key with `hash` by one, if it is above zero; returns whether it was.
    func lower(_ hash: UInt64) -> Bool {
        change(hash) { entry in entry &- 1 }
    }

    /// Sets the count for the key with `hash` to zero (its record is gone), freeing its entry.
    @inline(__always)
    func clear(_ hash: UInt64) {
        _ = change(hash) { _ in 0 }
    }

    /// Replaces the key's entry with `update(entry)`; returns whether the key had one.
    private func change(_ hash: UInt64, _ update: (UInt64) -> UInt64) -> Bool {
        let (word, fingerprint) = locate(hash)
        var current = words[word].load(ordering: .relaxed)
        while let index = find(fingerprint, in: current) {
            let shift = UInt64(index * 8)
            let entry = (current >> shift) & 0xFF
            let desired = current & ~(0xFF << shift) | update(entry) << shift
            let (exchanged, original) = words[word].compareExchange(
                expected: current, desired: desired, ordering: .relaxed)
            if exchanged { return true }
            current = original
        }
        return false
    }
}
