internal import CCRC32

/// The fixed header in front of every stored payload; docs/FORMAT.md specifies it byte by byte.
///
/// ```
/// offset size  field
///  0     2     magic "HR" (0x48 0x52)
///  2     1     record format (1)
///  3     1     flags (bit 0: the record expires; other bits 0)
///  4     4     key-set version of the payload, UInt32 big-endian
///  8     8     written at, Int64 big-endian, milliseconds since 1970-01-01T00:00:00Z
/// 16     8     expires at, Int64 big-endian, milliseconds since 1970 (0 when flag bit 0 is clear)
/// 24     4     CRC-32 (IEEE 802.3, as zlib's crc32) of bytes 0..<24 followed by the payload, big-endian
/// 28     …     payload: one CBOR data item
/// ```
public struct RecordHeader: Sendable, Hashable {
    /// The size of the header in bytes.
    public static let size = 28
    /// The record format this code writes and reads.
    public static let format: UInt8 = 1
    static let magic: (UInt8, UInt8) = (0x48, 0x52)

    /// The local key-set version the payload was written with.
    public var version: Int
    /// When the record was written, in milliseconds since 1970.
    public var writtenAt: Int64
    /// When the record expires, in milliseconds since 1970; `nil` for never.
    public var expiresAt: Int64?

    /// A header with these fields (times in milliseconds since 1970, as stored).
    public init(version: Int, writtenAt: Int64, expiresAt: Int64?) {
        self.version = version
        self.writtenAt = writtenAt
        self.expiresAt = expiresAt
    }

    /// Whether the record has expired at `now` (milliseconds since 1970).
    public func isExpired(at now: Int64) -> Bool {
        guard let expiresAt else { return false }
        return expiresAt <= now
    }

    /// The complete record: this header, then `payload`.
    public func record(with payload: [UInt8]) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: Self.size + payload.count) { buffer, count in
            payload.withUnsafeBytes { write(payload: $0, into: UnsafeMutableRawBufferPointer(buffer)) }
            count = Self.size + payload.count
        }
    }

    /// The version stamped in `record`'s header, read without checking the checksum (for
    /// counting versions quickly), or `nil` when the bytes do not start with a header.
    public static func peekVersion(_ record: UnsafeRawBufferPointer) -> Int? {
        guard record.count >= size, record[0] == magic.0, record[1] == magic.1, record[2] == format else { return nil }
        return Int(loadBigEndian(UInt32.self, at: 4, in: record))
    }

    /// The write time stamped in `record`'s header, read without checking the checksum, or `nil`
    /// when the bytes do not start with a header.
    public static func peekWrittenAt(_ record: UnsafeRawBufferPointer) -> Int64? {
        guard record.count >= size else { return nil }
        return Int64(bitPattern: loadBigEndian(UInt64.self, at: 8, in: record))
    }

    /// The expiry stamped in `record`'s header, read without checking the checksum.
    public static func peekExpiry(_ record: UnsafeRawBufferPointer) -> Int64? {
        guard record.count >= size, record[3] & 1 == 1 else { return nil }
        return Int64(bitPattern: loadBigEndian(UInt64.self, at: 16, in: record))
    }

    /// Writes the header followed by `payload` into `record`, which must be exactly
    /// `size + payload.count` bytes long (for writing a record in place, e.g. into LMDB's
    /// reserved space).
    public func write(payload: UnsafeRawBufferPointer, into record: UnsafeMutableRawBufferPointer) {
        precondition(
            record.count == Self.size + payload.count,
            "a record buffer of \(record.count) bytes for a \(payload.count)-byte payload")
        writeCheckedFields(into: record)
        if let base = payload.baseAddress, !payload.isEmpty {
            (record.baseAddress! + Self.size).copyMemory(from: base, byteCount: payload.count)
        }
        var crc = CRC32()
        crc.update(header: UnsafeRawBufferPointer(rebasing: record[0..<24]), payload: payload)
        storeBigEndian(crc.value, at: 24, in: record)
    }

    /// Writes the header's first 24 bytes, all but the checksum, at the start of `record`.
    private func writeCheckedFields(into record: UnsafeMutableRawBufferPointer) {
        record[0] = Self.magic.0
        record[1] = Self.magic.1
        record[2] = Self.format
        record[3] = expiresAt == nil ? 0 : 1
        storeBigEndian(UInt32(truncatingIfNeeded: version), at: 4, in: record)
        storeBigEndian(UInt64(bitPattern: writtenAt), at: 8, in: record)
        storeBigEndian(UInt64(bitPattern: expiresAt ?? 0), at: 16, in: record)
    }

    /// Writes into `renewed`, which is as long as `record`, the record `record` renewed: this
    /// header's write time and expiry, with `record`'s version and payload. Returns `false` when
    /// `record` is not a valid record (as ``parse(_:)`` checks it): a damaged record is not given a
    /// fresh checksum. The old checksum is checked and the new one computed in one pass over the
    /// payload.
    func renew(_ record: UnsafeRawBufferPointer, into renewed: UnsafeMutableRawBufferPointer) -> Bool {
        guard (try? Self.checkShape(of: record)) != nil else { return false }
        var header = self
        header.version = Int(loadBigEndian(UInt32.self, at: 4, in: record))
        header.writeCheckedFields(into: renewed)
        let payload = UnsafeRawBufferPointer(rebasing: record[Self.size...])
        let (old, new) = CRC32.checksums(
            of: payload, after: UnsafeRawBufferPointer(rebasing: record[0..<24]),
            and: UnsafeRawBufferPointer(rebasing: renewed[0..<24]))
        guard old == loadBigEndian(UInt32.self, at: 24, in: record) else { return false }
        storeBigEndian(new, at: 24, in: renewed)
        UnsafeMutableRawBufferPointer(rebasing: renewed[Self.size...]).copyMemory(from: payload)
        return true
    }

    /// Reads and checks the header of `record` (magic, format, flags, checksum); returns it and
    /// the payload, which points into `record`.
    ///
    /// - Throws: ``RecordDamage`` saying what is wrong (the caller names the record).
    public static func parse(
        _ record: UnsafeRawBufferPointer
    ) throws(RecordDamage) -> (RecordHeader, UnsafeRawBufferPointer) {
        try checkShape(of: record)
        let flags = record[3]
        let payload = UnsafeRawBufferPointer(rebasing: record[size...])
        var crc = CRC32()
        crc.update(header: UnsafeRawBufferPointer(rebasing: record[0..<24]), payload: payload)
        let stored = loadBigEndian(UInt32.self, at: 24, in: record)
        guard crc.value == stored else {
            throw RecordDamage(
                "checksum mismatch (stored 0x\(String(stored, radix: 16)), computed 0x\(String(crc.value, radix: 16)))")
        }
        let version = Int(loadBigEndian(UInt32.self, at: 4, in: record))
        let writtenAt = Int64(bitPattern: loadBigEndian(UInt64.self, at: 8, in: record))
        let expiresAt = flags & 1 == 1 ? Int64(bitPattern: loadBigEndian(UInt64.self, at: 16, in: record)) : nil
        return (RecordHeader(version: version, writtenAt: writtenAt, expiresAt: expiresAt), payload)
    }

    /// Checks what a record's header says of itself: its length, magic, format and flags.
    private static func checkShape(of record: UnsafeRawBufferPointer) throws(RecordDamage) {
        guard record.count >= size else {
            throw RecordDamage("the record has \(record.count) bytes, fewer than the \(size)-byte header")
        }
        guard record[0] == magic.0, record[1] == magic.1 else {
            throw RecordDamage("the header does not start with \"HR\" (found 0x\(hexString([record[0], record[1]])))")
        }
        guard record[2] == format else {
            throw RecordDamage("record format \(record[2]) is not the format \(format) this code reads")
        }
        let flags = record[3]
        guard flags & ~1 == 0 else { throw RecordDamage("unknown header flags 0x\(hexString([flags]))") }
    }
}

/// Why a record's bytes are not a valid record.
public struct RecordDamage: Error, CustomStringConvertible, Sendable {
    /// What is wrong, e.g. "checksum mismatch (stored 0x…, computed 0x…)".
    public let reason: String
    init(_ reason: String) { self.reason = reason }
    /// The ``reason``.
    public var description: String { reason }
}

@inline(__always)
func storeBigEndian<T: FixedWidthInteger>(_ value: T, at offset: Int, in buffer: UnsafeMutableRawBufferPointer) {
    buffer.storeBytes(of: value.bigEndian, toByteOffset: offset, as: T.self)
}

@inline(__always)
func loadBigEndian<T: FixedWidthInteger>(_ type: T.Type, at offset: Int, in buffer: UnsafeRawBufferPointer) -> T {
    T(bigEndian: buffer.loadUnaligned(fromByteOffset: offset, as: T.self))
}

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

    /// Advances over a record's 24 checked header bytes and then its payload, folding both as one
    /// run where the processor can (the header alone is too short to fold).
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

    /// The checksums of two records with the same `payload` after the 24 checked header bytes
    /// `header` and `other`, in one pass over the payload where the processor folds.
    static func checksums(
        of payload: UnsafeRawBufferPointer, after header: UnsafeRawBufferPointer, and other: UnsafeRawBufferPointer
    ) -> (UInt32, UInt32) {
        var first = CRC32()
        var second = CRC32()
        guard accelerated, header.count == 24, other.count == 24, payload.count >= 8,
            let head = header.baseAddress, let otherHead = other.baseAddress, let data = payload.baseAddress
        else {
            first.update(header: header, payload: payload)
            second.update(header: other, payload: payload)
            return (first.value, second.value)
        }
        let blocks = (payload.count - 8) / 16
        var folded = second.state
        first.state = hoard_crc32_fold_records(
            first.state, head.assumingMemoryBound(to: UInt8.self), otherHead.assumingMemoryBound(to: UInt8.self),
            data.assumingMemoryBound(to: UInt8.self), blocks, &folded)
        second.state = folded
        let tail = UnsafeRawBufferPointer(rebasing: payload[(8 + 16 * blocks)...])
        first.update(tail)
        second.update(tail)
        return (first.value, second.value)
    }

    var value: UInt32 { state ^ 0xFFFF_FFFF }
}
