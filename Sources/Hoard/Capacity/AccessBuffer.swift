internal import Synchronization

#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

/// Gets' accesses on their way to the eviction policy's counts: a get writes its key's hash into
/// a slot here, and the get that fills a batch counts the whole batch.
///
/// Why batches: a key's sketch block and recent-use bucket are two random lines in tables of
/// megabytes. Counting 32 at once first prefetches all their lines, whose misses overlap.
///
/// Each thread writes to one of a few stripes (by its thread ID). Slots are written and emptied
/// by exchanges, not plain stores, so each access is counted once, by whoever takes it out: the
/// get that fills the batch, a later get that finds it still there, or ``drain(_:)``, which the
/// policy calls before it decides anything.
final class AccessBuffer: Sendable {
    private let slots = CounterTable(count: stripes * batch)
    /// Each stripe's count of accesses written, one per cache line (8 words apart).
    private let tails = CounterTable(count: stripes * tailStride, alignment: 64)

    static let stripes = 8
    /// Accesses counted at once.
    static let batch = 32
    private static let tailStride = 8

    /// The memory the buffer takes, in bytes.
    var byteCount: Int { slots.byteCount + tails.byteCount }

    /// Writes `entry` (a key hash with bit 0 set for a hit; never 0) into the calling thread's
    /// stripe; when that fills a batch, calls `count` with the batch's entries.
    @inline(__always)
    func record(_ entry: UInt64, _ count: (UnsafeBufferPointer<UInt64>) -> Void) {
        let stripe = Int(truncatingIfNeeded: mix64(UInt64(truncatingIfNeeded: threadToken()))) & (Self.stripes - 1)
        let index = Int(
            truncatingIfNeeded: tails.words[stripe * Self.tailStride].wrappingAdd(1, ordering: .relaxed).oldValue)
        let left = slots.words[stripe * Self.batch + (index & (Self.batch - 1))].exchange(entry, ordering: .relaxed)
        // An entry still in the slot was written after its batch was taken (its thread was slow
        // between the two steps): counted here, as it would have been there.
        if left != 0 { withUnsafePointer(to: left) { count(UnsafeBufferPointer(start: $0, count: 1)) } }
        if index & (Self.batch - 1) == Self.batch - 1 { take(stripe, count) }
    }

    /// Calls `count` with every access written and not yet counted, stripe by stripe.
    func drain(_ count: (UnsafeBufferPointer<UInt64>) -> Void) {
        for stripe in 0..<Self.stripes { take(stripe, count) }
    }

    /// Empties the slots of `stripe` and calls `count` with the entries they held.
    private func take(_ stripe: Int, _ count: (UnsafeBufferPointer<UInt64>) -> Void) {
        withUnsafeTemporaryAllocation(of: UInt64.self, capacity: Self.batch) { entries in
            var taken = 0
            for index in 0..<Self.batch {
                // A load first: an empty slot costs no locked instruction (a write's drain looks
                // at every slot); one written after the load is taken later.
                let slot = stripe * Self.batch + index
                guard slots.words[slot].load(ordering: .relaxed) != 0 else { continue }
                let entry = slots.words[slot].exchange(0, ordering: .relaxed)
                guard entry != 0 else { continue }
                entries[taken] = entry
                taken += 1
            }
            if taken > 0 { count(UnsafeBufferPointer(rebasing: entries[..<taken])) }
        }
    }
}

/// A number that tells the calling thread from the others (its pthread ID).
@inline(__always)
private func threadToken() -> UInt {
    #if canImport(Darwin)
    UInt(bitPattern: pthread_self())
    #else
    UInt(pthread_self())
    #endif
}
