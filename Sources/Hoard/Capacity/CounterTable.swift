internal import Synchronization

/// A table of 64-bit atomic words, all zero at first, for the eviction policy's counts: allocated
/// once, read and written only through the atomics.
final class CounterTable: @unchecked Sendable {
    // @unchecked: `words` is only read and written through its atomics, allocated in init and
    // freed in deinit.
    let words: UnsafeMutablePointer<Atomic<UInt64>>
    let count: Int

    /// A table of `count` words, aligned to `alignment` bytes (a power of two, at least 8).
    init(count: Int, alignment: Int = MemoryLayout<UInt64>.alignment) {
        self.count = count
        words = UnsafeMutableRawPointer.allocate(byteCount: count * MemoryLayout<UInt64>.stride, alignment: alignment)
            .bindMemory(to: Atomic<UInt64>.self, capacity: count)
        for index in 0..<count { (words + index).initialize(to: Atomic(0)) }
    }

    deinit {
        words.deinitialize(count: count)
        words.deallocate()
    }

    /// The memory the table takes, in bytes.
    var byteCount: Int { count * MemoryLayout<UInt64>.stride }
}
