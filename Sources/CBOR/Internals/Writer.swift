#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

/// Appends CBOR items to a growable byte buffer with the shortest heads and the shortest exact
/// floats (RFC 8949 §4.2.1 "preferred serialization"). Shared by the encoder and `CBORValue`.
///
/// The buffer is raw memory with one capacity check per write, not a `[UInt8]`: array appends
/// (uniqueness check, generic copy) cost more than the encoding itself. The encoder keeps its
/// writer across calls, so steady-state encoding allocates only the returned array.
final class Writer {
    private(set) var base: UnsafeMutablePointer<UInt8>
    /// Bytes of memory held.
    private(set) var capacity: Int
    /// Bytes written so far.
    @exclusivity(unchecked) private(set) var count = 0
    /// Whether a ``ThreadWriter`` has lent it out.
    var isLent = false

    init(capacity: Int = 256) {
        self.capacity = max(capacity, 16)
        base = .allocate(capacity: self.capacity)
    }

    deinit { base.deallocate() }

    /// Gives back memory beyond the initial capacity (the bytes are dropped).
    func shrink() {
        base.deallocate()
        capacity = 256
        base = .allocate(capacity: capacity)
        count = 0
    }

    /// Starts over, empty.
    func reset() {
        count = 0
    }

    /// A copy of the bytes written.
    func toArray() -> [UInt8] {
        Array(UnsafeBufferPointer(start: base, count: count))
    }

    /// Runs `body` over the bytes written so far.
    func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    @inline(__always)
    private func reserve(_ extra: Int) {
        if count + extra > capacity { grow(to: count + extra) }
    }

    private func grow(to needed: Int) {
        var newCapacity = capacity * 2
        while newCapacity < needed { newCapacity *= 2 }
        let newBase = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        newBase.update(from: base, count: count)
        base.deallocate()
        base = newBase
        capacity = newCapacity
    }

    @inline(__always)
    func append(_ byte: UInt8) {
        reserve(1)
        base[count] = byte
        count += 1
    }

    @inline(__always)
    func append(_ raw: UnsafeRawBufferPointer) {
        guard let source = raw.baseAddress, !raw.isEmpty else { return }
        reserve(raw.count)
        (base + count).update(from: source.assumingMemoryBound(to: UInt8.self), count: raw.count)
        count += raw.count
    }

    /// Appends the first `count` (at most 8) bytes of `word` as it lies in memory, with one store.
    @inline(__always)
    func append(word: UInt64, count length: Int) {
        reserve(8)
        UnsafeMutableRawPointer(base + count).storeBytes(of: word, as: UInt64.self)
        count += length
    }

    /// Opens a gap of `length` bytes at `offset`, moving what follows.
    func insertGap(_ length: Int, at offset: Int) {
        reserve(length)
        memmove(base + offset + length, base + offset, count - offset)
        count += length
    }

    // MARK: Items

    /// The length of the head for `argument`.
    @inline(__always)
    static func headLength(_ argument: UInt64) -> Int {
        switch argument {
        case 0..<24: 1
        case 24...0xFF: 2
        case 0x100...0xFFFF: 3
        case 0x1_0000...0xFFFF_FFFF: 5
        default: 9
        }
    }

    @inline(__always)
    func head(_ major: UInt8, _ argument: UInt64) {
        reserve(9)
        count += writeHead(major, argument, at: count)
    }

    /// Writes the head for `argument` at `offset` (the space must be there), each width as one
    /// big-endian store; returns its length.
    @inline(__always)
    @discardableResult
    func writeHead(_ major: UInt8, _ argument: UInt64, at offset: Int) -> Int {
        let m = major << 5
        let target = UnsafeMutableRawPointer(base + offset)
        switch argument {
        case 0..<24:
            target.storeBytes(of: m | UInt8(argument), as: UInt8.self)
            return 1
        case 24...0xFF:
            target.storeBytes(of: m | 24, as: UInt8.self)
            target.storeBytes(of: UInt8(argument), toByteOffset: 1, as: UInt8.self)
            return 2
        case 0x100...0xFFFF:
            target.storeBytes(of: m | 25, as: UInt8.self)
            target.storeBytes(of: UInt16(argument).bigEndian, toByteOffset: 1, as: UInt16.self)
            return 3
        case 0x1_0000...0xFFFF_FFFF:
            target.storeBytes(of: m | 26, as: UInt8.self)
            target.storeBytes(of: UInt32(argument).bigEndian, toByteOffset: 1, as: UInt32.self)
            return 5
        default:
            target.storeBytes(of: m | 27, as: UInt8.self)
            target.storeBytes(of: argument.bigEndian, toByteOffset: 1, as: UInt64.self)
            return 9
        }
    }

    @inline(__always)
    func int(_ value: Int64) {
        if value >= 0 {
            head(0, UInt64(value))
        } else {
            head(1, UInt64(bitPattern: -1 - value))
        }
    }

    @inline(__always)
    func text(_ value: String) {
        // Native strings lend their UTF-8 in place; `withUTF8` would need a mutable copy (a retain).
        if value.utf8.withContiguousStorageIfAvailable({ text($0) }) == nil {
            var copy = value
            copy.withUTF8 { text($0) }
        }
    }

    @inline(__always)
    func text(_ utf8: UnsafeBufferPointer<UInt8>) {
        head(3, UInt64(utf8.count))
        append(UnsafeRawBufferPointer(utf8))
    }

    @inline(__always)
    func byteString(_ raw: UnsafeRawBufferPointer) {
        head(2, UInt64(raw.count))
        append(raw)
    }

    /// The shortest of half, single and double that holds `value` exactly; NaN as 0xf97e00.
    func double(_ value: Double) {
        reserve(9)
        if let half = halfBits(exactly: value) {
            base[count] = 0xF9
            base[count + 1] = UInt8(half >> 8)
            base[count + 2] = UInt8(half & 0xFF)
            count += 3
        } else if Double(Float(value)) == value {
            let bits = Float(value).bitPattern.bigEndian
            base[count] = 0xFA
            withUnsafeBytes(of: bits) {
                (base + count + 1).update(from: $0.baseAddress!.assumingMemoryBound(to: UInt8.self), count: 4)
            }
            count += 5
        } else {
            let bits = value.bitPattern.bigEndian
            base[count] = 0xFB
            withUnsafeBytes(of: bits) {
                (base + count + 1).update(from: $0.baseAddress!.assumingMemoryBound(to: UInt8.self), count: 8)
            }
            count += 9
        }
    }
}
