internal import CCRC32

/// CRC-32 (IEEE 802.3 polynomial, reflected; the checksum of zlib, gzip and PNG).
///
/// Every record is checked on every read: runs of 32 bytes or more are folded with carry-less
/// multiplies where the processor has them (`CCRC32`, x86-64), the rest with slicing-by-8 tables.
struct CRC32 {
    private(set) var state: UInt32 = 0xFFFF_FFFF

    /// Table k maps a byte to its CRC contribution k bytes further on; table 0 is the classic one.
    /// Raw memory, made once for the process: no retain or bounds check around a checksum.
    nonisolated(unsafe) static let tables: UnsafePointer<UInt32> = {
        let tables = UnsafeMutablePointer<UInt32>.allocate(capacity: 8 * 256)
        tables.initialize(repeating: 0, count: 8 * 256)
        for n in 0..<256 {
            var c = UInt32(n)
            for _ in 0..<8 { c = c & 1 == 1 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
            tables[n] = c
        }
        for k in 1..<8 {
            for n in 0..<256 {
                let previous = tables[(k - 1) * 256 + n]
                tables[k * 256 + n] = (previous >> 8) ^ tables[Int(previous & 0xFF)]
            }
        }
        return UnsafePointer(tables)
    }()

    /// Whether the processor folds with carry-less multiplies (`CCRC32`).
    static let accelerated = hoard_crc32_accelerated() != 0

    /// Adds one byte.
    @inline(__always)
    mutating func update(byte: UInt8) {
        state = Self.tables[Int((state ^ UInt32(byte)) & 0xFF)] ^ (state >> 8)
    }

    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard var pointer = bytes.baseAddress else { return }
        var remaining = bytes.count
        var c = state
        if remaining >= 32 && Self.accelerated {
            let folded = remaining & ~15
            c = hoard_crc32_fold(c, pointer.assumingMemoryBound(to: UInt8.self), folded)
            pointer += folded
            remaining -= folded
        }
        let t = Self.tables
        while remaining >= 8 {
            let low = UInt32(littleEndian: pointer.loadUnaligned(as: UInt32.self)) ^ c
            let high = UInt32(littleEndian: pointer.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
            c =
                t[7 * 256 + Int(low & 0xFF)] ^ t[6 * 256 + Int((low >> 8) & 0xFF)]
                ^ t[5 * 256 + Int((low >> 16) & 0xFF)] ^ t[4 * 256 + Int(low >> 24)]
                ^ t[3 * 256 + Int(high & 0xFF)] ^ t[2 * 256 + Int((high >> 8) & 0xFF)]
                ^ t[1 * 256 + Int((high >> 16) & 0xFF)] ^ t[Int(high >> 24)]
            pointer += 8
            remaining -= 8
        }
        while remaining > 0 {
            c = t[Int((c ^ UInt32(pointer.load(as: UInt8.self))) & 0xFF)] ^ (c >> 8)
            pointer += 1
            remaining -= 1
        }
        state = c
    }

    /// Advances over a format-1 record's 24 checked header bytes and then its payload (the
    /// checksum lies between them), folding both as one run where the processor can.
    mutating func update(header: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer) {
        guard Self.accelerated, header.count == 24, payload.count >= 8,
            let head = header.baseAddress, let data = payload.baseAddress
        else {
            update(header)
            update(payload)
            return
        }
        let blocks = (payload.count - 8) / 16
        state = hoard_crc32_fold_record(
            state, head.assumingMemoryBound(to: UInt8.self), data.assumingMemoryBound(to: UInt8.self), blocks)
        update(UnsafeRawBufferPointer(rebasing: payload[(8 + 16 * blocks)...]))
    }

    var value: UInt32 { state ^ 0xFFFF_FFFF }
}
