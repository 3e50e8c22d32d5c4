/// Keys back to back in one buffer (a batch's changes, the records a settle evicts), copy on
/// write as an array; appending a key is a check of the buffer and a copy of its bytes.
struct KeyBytes: @unchecked Sendable {
    // @unchecked: the buffer is changed only through the one copy that holds it (copy on write),
    // so a copy handed to another thread never sees a change.
    private typealias Buffer = ManagedBuffer<Header, UInt8>

    private struct Header {
        var count: Int
        /// The bytes allocated (kept here: asking the allocator costs more than the append).
        var capacity: Int
    }

    private var buffer: Buffer?

    init() {}

    // The header is read and written through its pointer: as a property of the buffer's class,
    // each access would be checked for exclusivity at run time, which costs more than the rest.

    /// The bytes in use.
    var count: Int { buffer?.withUnsafeMutablePointerToHeader { $0.pointee.count } ?? 0 }

    /// The bytes allocated.
    var capacity: Int { buffer?.withUnsafeMutablePointerToHeader { $0.pointee.capacity } ?? 0 }

    /// Whether this copy alone holds the buffer (or there is none).
    var isUniquelyHeld: Bool {
        mutating get { buffer == nil || isKnownUniquelyReferenced(&buffer) }
    }

    /// Adds `bytes` at the end.
    @inline(__always)
    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        makeWritable(holding: count + bytes.count)
        buffer?.withUnsafeMutablePointers { header, elements in
            copyKeyBytes(bytes, to: UnsafeMutableRawPointer(elements + header.pointee.count))
            header.pointee.count += bytes.count
        }
    }

    /// Makes room for `bytes` bytes in all, so that appends up to them do not grow the buffer.
    mutating func reserve(_ bytes: Int) { makeWritable(holding: bytes) }

    /// Adds the bytes of `other` from `start` on at the end.
    mutating func append(_ other: KeyBytes, from start: Int) {
        other.withBytes(in: start..<other.count) { append($0) }
    }

    /// Drops the bytes from `start` on.
    mutating func removeSuffix(from start: Int) {
        guard start < count else { return }
        makeWritable(holding: start)
        buffer?.withUnsafeMutablePointerToHeader { $0.pointee.count = Swift.max(0, start) }
    }

    /// Drops every byte, keeping the buffer when no copy shares it (and otherwise allocating one
    /// as large, as the next batch will probably need).
    mutating func removeAll() {
        guard buffer != nil else { return }
        if isKnownUniquelyReferenced(&buffer) {
            buffer?.withUnsafeMutablePointerToHeader { $0.pointee.count = 0 }
        } else {
            buffer = Self.allocate(capacity)
        }
    }

    /// Calls `body` with the bytes in `range`.
    func withBytes<R>(in range: Range<Int>, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let range = range.clamped(to: 0..<count)
        guard let buffer, !range.isEmpty else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return try buffer.withUnsafeMutablePointerToElements { elements in
            try body(UnsafeRawBufferPointer(start: elements + range.lowerBound, count: range.count))
        }
    }

    /// Makes the buffer one that this copy alone holds, with room for `needed` bytes.
    @inline(__always)
    private mutating func makeWritable(holding needed: Int) {
        if !isKnownUniquelyReferenced(&buffer) || capacity < needed { grow(holding: needed) }
    }

    /// Moves to a new buffer with this one's bytes and room for `needed` (at least twice the
    /// room, as an array grows).
    private mutating func grow(holding needed: Int) {
        let count = Swift.min(self.count, needed)
        let grown = Self.allocate(Swift.max(needed, 2 * capacity, 64))
        grown.withUnsafeMutablePointers { header, elements in
            buffer?.withUnsafeMutablePointerToElements { elements.initialize(from: $0, count: count) }
            header.pointee.count = count
        }
        buffer = grown
    }

    private static func allocate(_ capacity: Int) -> Buffer {
        Buffer.create(minimumCapacity: capacity) { _ in Header(count: 0, capacity: capacity) }
    }
}

/// Copies the key `bytes` to `target`. Most keys (an integer's 8 bytes, a UUID's 16) go as two
/// words that may overlap, rather than through a call of memcpy, which costs more than the copy.
@inline(__always)
func copyKeyBytes(_ bytes: UnsafeRawBufferPointer, to target: UnsafeMutableRawPointer) {
    if (8...16).contains(bytes.count) {
        let offset = bytes.count - 8
        let (head, tail) = (
            bytes.loadUnaligned(as: UInt64.self), bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
        )
        target.storeBytes(of: head, as: UInt64.self)
        target.storeBytes(of: tail, toByteOffset: offset, as: UInt64.self)
    } else if let source = bytes.baseAddress {
        target.copyMemory(from: source, byteCount: bytes.count)
    }
}
