/// A growable list of plain values in memory of its own, for the coders' per-item bookkeeping
/// (open containers, map keys, map entries). An `Array` there checks uniqueness and capacity on
/// every write and retains its buffer around closures, which together cost more than the work
/// done with each element. Non-copyable, so the memory has exactly one owner.
struct RawStack<Element: BitwiseCopyable>: ~Copyable {
    private(set) var base: UnsafeMutablePointer<Element>
    private(set) var count = 0
    private(set) var capacity: Int

    init(capacity: Int = 16) {
        self.capacity = max(capacity, 1)
        base = .allocate(capacity: self.capacity)
    }

    deinit { base.deallocate() }

    var isEmpty: Bool { count == 0 }

    var last: Element? { count > 0 ? base[count - 1] : nil }

    /// The element at `index`; the coders index only what they appended.
    subscript(index: Int) -> Element {
        @inline(__always) get {
            precondition(index >= 0 && index < count, "RawStack index out of range")
            return base[index]
        }
        @inline(__always) set {
            precondition(index >= 0 && index < count, "RawStack index out of range")
            base[index] = newValue
        }
    }

    @inline(__always)
    mutating func append(_ element: Element) {
        if count == capacity { grow() }
        base[count] = element
        count += 1
    }

    /// Appends `element` `count` times.
    mutating func append(_ element: Element, count times: Int) {
        for _ in 0..<times { append(element) }
    }

    private mutating func grow() {
        let newBase = UnsafeMutablePointer<Element>.allocate(capacity: capacity * 2)
        newBase.initialize(from: base, count: count)
        base.deallocate()
        base = newBase
        capacity *= 2
    }

    @inline(__always)
    @discardableResult
    mutating func removeLast() -> Element {
        precondition(count > 0, "RawStack is empty")
        count -= 1
        return base[count]
    }

    /// Drops everything from `index` on.
    @inline(__always)
    mutating func truncate(to index: Int) {
        precondition(index >= 0 && index <= count, "RawStack index out of range")
        count = index
    }

    /// Empties the list; memory grown past `keepingUpTo` elements is given back.
    mutating func removeAll(keepingUpTo limit: Int) {
        count = 0
        if capacity > limit {
            base.deallocate()
            capacity = max(limit, 1)
            base = .allocate(capacity: capacity)
        }
    }

    /// The elements `range` as a buffer, valid until the next append.
    @inline(__always)
    func buffer(_ range: Range<Int>) -> UnsafeMutableBufferPointer<Element> {
        precondition(range.lowerBound >= 0 && range.upperBound <= count, "RawStack range out of bounds")
        return UnsafeMutableBufferPointer(start: base + range.lowerBound, count: range.count)
    }
}
