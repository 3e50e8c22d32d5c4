internal import CCRC32
internal import Synchronization

/// How often each key was asked for lately, estimated in a fixed amount of memory: a count-min
/// sketch of 4-bit counters that halves them all once it has counted `sampleSize` accesses, so
/// that old popularity fades (TinyLFU's frequency sketch and its reset).
///
/// One thread counts at a time (the policy counts gets' accesses in batches, under a lock of its
/// own, ``EvictionPolicy``); estimates are read by any thread meanwhile, without a lock, since
/// every word of 16 counters is loaded and stored whole. Estimates never fall below a key's true
/// count since the last halving (up to 15), and keys that share counters can only raise each
/// other's estimates, but for one case: a key whose counts are halved alone as old popularity
/// (``halve(_:)``) halves its share of a counter for the key it shares it with too.
final class FrequencySketch: @unchecked Sendable {
    // @unchecked: the table's words are only read and written through their atomics; counting
    // is serialized by the caller.
    private let table: CounterTable
    private var words: UnsafeMutablePointer<Atomic<UInt64>> { table.words }
    private var wordCount: Int { table.count }
    /// Accesses counted since the last halving.
    private let additions = Atomic<Int>(0)
    /// After this many accesses, every counter is halved.
    let sampleSize: Int

    /// The number of hash functions (rows) a key is counted in.
    static let depth = 4

    /// A sketch for about `records` tracked keys, with `countersPerRecord` 4-bit counters for
    /// each (rounded up to a power of two words), halving after `sampleMultiple × records` accesses.
    init(records: Int, countersPerRecord: Int = 16, sampleMultiple: Int = 20) {
        let counters = max(records, 1) * countersPerRecord
        var count = 8
        while count * 16 < counters { count <<= 1 }
        // Aligned to a cache line, so that each block of eight words is one line.
        table = CounterTable(count: count, alignment: Self.blockWords * MemoryLayout<UInt64>.stride)
        sampleSize = max(records, 1) * sampleMultiple
    }

    /// The memory the counters take, in bytes.
    var byteCount: Int { table.byteCount }

    /// Words in a block: a key's counters are all in one block of 64 bytes (one cache line), so
    /// that counting a get touches one line, not four (Caffeine lays its sketch out this way).
    static let blockWords = 8

    /// The bits that place a key's counters: its hash mixed again with the sketch's own seed, so
    /// that the sketch's choices do not follow the recent-use table's, which uses the hash as is.
    @inline(__always)
    private static func mixed(_ hash: UInt64) -> UInt64 { mix64(hash ^ 0x517C_C1B7_2722_0A95) }

    /// The word and bit offset of `hash`'s counter in `row`: the key's block, in it one of two
    /// words for the row, in it one of sixteen counters, each chosen by other bits of one mix.
    @inline(__always)
    private func slot(_ mixed: UInt64, row: Int) -> (word: Int, shift: UInt64) {
        let block = Int(truncatingIfNeeded: mixed) & (wordCount / Self.blockWords - 1)
        let word = block * Self.blockWords + row * 2 + Int(truncatingIfNeeded: (mixed >> (32 + UInt64(row))) & 1)
        return (word, ((mixed >> (40 + 4 * UInt64(row))) & 15) << 2)
    }

    /// Asks the processor for the cache line of `hash`'s counters without waiting for it, so that
    /// a count or an estimate soon after finds it in cache.
    @inline(__always)
    func prefetch(_ hash: UInt64) {
        hoard_prefetch(UnsafeRawPointer(words + slot(Self.mixed(hash), row: 0).word))
    }

    /// Counts one access to the key with `hash`. One thread at a time (the policy counts under
    /// its lock): each counter word is loaded and stored whole, with no compare-and-swap.
    func increment(_ hash: UInt64) {
        var counted = false
        let mixed = Self.mixed(hash)
        for row in 0..<Self.depth {
            let (word, shift) = slot(mixed, row: row)
            let current = words[word].load(ordering: .relaxed)
            guard (current >> shift) & 0xF < 0xF else { continue }
            words[word].store(current &+ (1 << shift), ordering: .relaxed)
            counted = true
        }
        guard counted else { return }
        let added = additions.load(ordering: .relaxed) + 1
        additions.store(added, ordering: .relaxed)
        if added == sampleSize { halve() }
    }

    /// The estimated accesses to the key with `hash` since the last halving, 0 to 15.
    @inline(__always)
    func estimate(_ hash: UInt64) -> Int {
        var least: UInt64 = 0xF
        let mixed = Self.mixed(hash)
        for row in 0..<Self.depth {
            let (word, shift) = slot(mixed, row: row)
            least = min(least, (words[word].load(ordering: .relaxed) >> shift) & 0xF)
        }
        return Int(least)
    }

    /// Halves the counters of the key with `hash`: its popularity is known to be old (a counter it
    /// shares with another key is halved for both, which can only bring that key's estimate
    /// nearer its true count or below it, as a halving of all does). One thread at a time, as
    /// ``increment(_:)``.
    func halve(_ hash: UInt64) {
        let mixed = Self.mixed(hash)
        for row in 0..<Self.depth {
            let (word, shift) = slot(mixed, row: row)
            let current = words[word].load(ordering: .relaxed)
            let halved = ((current >> shift) & 0xF) >> 1
            words[word].store(current & ~(0xF << shift) | halved << shift, ordering: .relaxed)
        }
    }

    /// Halves every counter (the reset that lets popularity fade). Run by the access that
    /// reached the sample size, as part of counting it.
    private func halve() {
        for index in 0..<wordCount {
            let current = words[index].load(ordering: .relaxed)
            words[index].store((current >> 1) & 0x7777_7777_7777_7777, ordering: .relaxed)
        }
        additions.store(sampleSize / 2, ordering: .relaxed)
    }
}

/// A 64-bit finalizer (SplitMix64's): spreads the bits of `value` over the whole word.
@inline(__always)
func mix64(_ value: UInt64) -> UInt64 {
    var mixed = value &+ 0x9E37_79B9_7F4A_7C15
    mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
    mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
    return mixed ^ (mixed >> 31)
}

/// A 64-bit hash of a key's bytes, the same in every process (unlike `Hasher`), so that tests
/// and simulations repeat. Bit 0 is always 0: ``AccessBuffer`` carries a flag there.
func keyHash(_ key: UnsafeRawBufferPointer) -> UInt64 {
    var hash = UInt64(truncatingIfNeeded: key.count) &* 0x9E37_79B9_7F4A_7C15
    var offset = 0
    while offset + 8 <= key.count {
        hash = mix64(hash ^ key.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
        offset += 8
    }
    if offset < key.count {
        var tail: UInt64 = 0
        for index in offset..<key.count { tail = tail << 8 | UInt64(key[index]) }
        hash = mix64(hash ^ tail ^ 0xFF51_AFD7_ED55_8CCD)
    }
    return mix64(hash) & ~1
}
