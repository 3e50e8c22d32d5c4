// LMDB's key order over the store's key buffers, with memcmp.
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

/// `keyPrecedes` over two slices of the fresh side's key buffer.
@inline(__always)
func keyPrecedes(_ a: ArraySlice<UInt8>, _ b: ArraySlice<UInt8>) -> Bool {
    b.withUnsafeBytes { keyPrecedes(a, $0) }
}

/// `keyPrecedes` with the second key in LMDB's memory.
@inline(__always)
func keyPrecedes(_ a: ArraySlice<UInt8>, _ b: UnsafeRawBufferPointer) -> Bool {
    a.withUnsafeBytes { keyPrecedes($0, b) }
}

/// `keyPrecedes` over two keys in memory.
@inline(__always)
func keyPrecedes(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
    let common = min(a.count, b.count)
    let order = common == 0 ? 0 : a.baseAddress.flatMap { left in b.baseAddress.map { memcmp(left, $0, common) } } ?? 0
    return order != 0 ? order < 0 : a.count < b.count
}

/// Whether `a` and `b` hold the same bytes (memcmp: `elementsEqual` is several times slower).
@inline(__always)
func bytesEqual(_ a: ArraySlice<UInt8>, _ b: UnsafeRawBufferPointer) -> Bool {
    a.withUnsafeBytes { bytesEqual($0, b) }
}

/// Whether two keys in memory hold the same bytes.
@inline(__always)
func bytesEqual(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
    guard a.count == b.count else { return false }
    guard let left = a.baseAddress, let right = b.baseAddress else { return true }
    return memcmp(left, right, a.count) == 0
}

/// LMDB's key order (byte-wise, a prefix first) with `memcmp`, cheaper than the generic
/// `lexicographicallyPrecedes` (a sort calls this many times per model).
@inline(__always)
func keyPrecedes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    a.withUnsafeBufferPointer { x in
        b.withUnsafeBufferPointer { y in
            let common = min(x.count, y.count)
            let order = common == 0 ? 0 : memcmp(x.baseAddress!, y.baseAddress!, common)
            return order != 0 ? order < 0 : x.count < y.count
        }
    }
}

/// The first 8 bytes of `key` as a big-endian number (zero-padded): comparing two of them orders
/// keys as memcmp does, up to ties.
@inline(__always)
func keyPrefix(_ key: ArraySlice<UInt8>) -> UInt64 {
    var value: UInt64 = 0
    var index = key.startIndex
    for _ in 0..<8 {
        value = value << 8 | UInt64(index < key.endIndex ? key[index] : 0)
        index += 1
    }
    return value
}

/// `keyPrefix` of a key in memory.
@inline(__always)
func keyPrefix(_ key: UnsafeRawBufferPointer) -> UInt64 {
    guard key.count < 8 else { return UInt64(bigEndian: key.loadUnaligned(as: UInt64.self)) }
    var value: UInt64 = 0
    for index in 0..<8 { value = value << 8 | UInt64(index < key.count ? key[index] : 0) }
    return value
}
