/// The header in front of every stored payload; docs/FORMAT.md specifies it byte by byte.
///
/// Records are written in format 3, a header of 14 bytes (20 with an expiry) for a version below
/// 128:
///
/// ```
/// offset size  field
///  0     1     magic "H" (0x48)
///  1     1     record format (3; 2 has the same header)
///  2     4     CRC-32 (IEEE 802.3, as zlib's crc32), big-endian: of the format byte and every
///              byte from offset 6 on (format 2: of the bytes from offset 6 on)
///  6     1     flags (bit 0: the record expires; other bits 0)
///  7     6     written at: milliseconds since 1970-01-01T00:00:00Z, 48-bit big-endian
/// 13     6     expires at, as written at: only when flag bit 0 is set
///  …     1–5   key-set version of the payload, unsigned LEB128
///  …     …     payload: one CBOR data item
/// ```
///
/// In format 3 the payload's top-level map is keyed by numbers that stand for the key names of
/// the header's version (docs/FORMAT.md says which number is which); in formats 2 and 1 by the
/// names as text. Records of format 1 (a fixed 28-byte header, "HR", then the format byte) and 2
/// are read as well; a migration rewrites them in format 3.
public struct RecordHeader: Sendable, Hashable {
    /// The size of the smallest header (no expiry, a version below 128).
    public static let minimumSize = 14
    /// The record format this code writes.
    public static let format: UInt8 = 3
    /// The record formats this code reads.
    public static let formats: ClosedRange<UInt8> = 1...3
    /// The latest time a header holds, in milliseconds since 1970 (2^48 − 1, in the year 10889).
    public static let latestTime: Int64 = (1 << 48) - 1
    static let magic: UInt8 = 0x48

    /// The local key-set version the payload was written with.
    public var version: Int
    /// When the record was written, in milliseconds since 1970.
    public var writtenAt: Int64
    /// When the record expires, in milliseconds since 1970; `nil` for never.
    public var expiresAt: Int64?
    /// The record format the header was read in, or is written in: ``format`` for one made here.
    /// Set it to 2 to write a record as code before record format 3 did, over a payload keyed by
    /// name (a renewal of such a record keeps it so; tools and tests make such records); format
    /// 1 is written as 2, whose header has the same layout as 3's.
    public var recordFormat: UInt8 = Self.format

    /// A header with these fields (times in milliseconds since 1970, as stored). Times are kept
    /// within `0...latestTime` when written: an earlier one is written as 0, a later one as
    /// ``latestTime``, which changes no comparison with a clock's reading.
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

    /// The size of this header in formats 2 and 3, in bytes.
    public var size: Int { (expiresAt == nil ? 13 : 19) + Self.leb128Size(storedVersion) }

    /// The size of this header as its record stores it: in formats 2 and 3, ``size``; in format 1, 28.
    public var storedSize: Int { recordFormat == 1 ? Legacy.size : size }

    /// Whether a record with this header is written in the format this code writes.
    public var isCurrentFormat: Bool { recordFormat == Self.format }

    /// Whether the payload's top-level keys are numbers (format 3) rather than text (1 and 2).
    public var hasNumberedKeys: Bool { recordFormat >= 3 }

    private var storedVersion: UInt32 { UInt32(truncatingIfNeeded: version) }

    /// The complete record: this header, then `payload`.
    public func record(with payload: [UInt8]) -> [UInt8] {
        let size = size
        return [UInt8](unsafeUninitializedCapacity: size + payload.count) { buffer, count in
            payload.withUnsafeBytes { write(payload: $0, into: UnsafeMutableRawBufferPointer(buffer)) }
            count = size + payload.count
        }
    }

    /// Writes the header followed by `payload` into `record`, which must be exactly
    /// `size + payload.count` bytes long (for writing a record in place, e.g. into LMDB's
    /// reserved space).
    public func write(payload: UnsafeRawBufferPointer, into record: UnsafeMutableRawBufferPointer) {
        let size = size
        precondition(
            record.count == size + payload.count,
            "a record buffer of \(record.count) bytes for a \(size)-byte header and a \(payload.count)-byte payload")
        record[0] = Self.magic
        record[1] = max(recordFormat, 2)
        record[6] = expiresAt == nil ? 0 : 1
        Self.storeTime(writtenAt, at: 7, in: record)
        var offset = 13
        if let expiresAt {
            Self.storeTime(expiresAt, at: 13, in: record)
            offset = 19
        }
        var version = storedVersion
        while version >= 0x80 {
            record[offset] = UInt8(truncatingIfNeeded: version) | 0x80
            version >>= 7
            offset += 1
        }
        record[offset] = UInt8(version)
        UnsafeMutableRawBufferPointer(rebasing: record[size...]).copyMemory(from: payload)
        storeBigEndian(Self.checksum(UnsafeRawBufferPointer(record)), at: 2, in: record)
    }

    // MARK: - Peeking (unchecked, for counting and for the read rule)

    /// The record format of `record`'s header, when the bytes start with one this code reads.
    @inline(__always)
    static func peekFormat(_ record: UnsafeRawBufferPointer) -> UInt8? {
        if record.count >= minimumSize, record[0] == magic, record[1] == format || record[1] == 2 { return record[1] }
        if record.count >= Legacy.size, record[0] == magic, record[1] == Legacy.magic1, record[2] == 1 { return 1 }
        return nil
    }

    /// The version stamped in `record`'s header, read without checking the checksum (for
    /// counting versions quickly), or `nil` when the bytes do not start with a header.
    public static func peekVersion(_ record: UnsafeRawBufferPointer) -> Int? {
        switch peekFormat(record) {
        case 2?, format?: (try? readVersion(record, at: record[6] & 1 == 1 ? 19 : 13)).map { Int($0.value) }
        case 1?: Int(loadBigEndian(UInt32.self, at: 4, in: record))
        default: nil
        }
    }

    /// The write time stamped in `record`'s header, read without checking the checksum, or `nil`
    /// when the bytes do not start with a header.
    @inline(__always)
    public static func peekWrittenAt(_ record: UnsafeRawBufferPointer) -> Int64? {
        switch peekFormat(record) {
        case 2?, format?: loadTime(at: 7, in: record)
        case 1?: Int64(bitPattern: loadBigEndian(UInt64.self, at: 8, in: record))
        default: nil
        }
    }

    /// The expiry stamped in `record`'s header, read without checking the checksum.
    @inline(__always)
    public static func peekExpiry(_ record: UnsafeRawBufferPointer) -> Int64? {
        switch peekFormat(record) {
        case 2?, format?: record[6] & 1 == 1 && record.count >= 20 ? loadTime(at: 13, in: record) : nil
        case 1?: record[3] & 1 == 1 ? Int64(bitPattern: loadBigEndian(UInt64.self, at: 16, in: record)) : nil
        default: nil
        }
    }

    // MARK: - Parsing

    /// Reads and checks the header of `record` (magic, format, flags, checksum) in either format;
    /// returns it and the payload, which points into `record`.
    ///
    /// - Throws: ``RecordDamage`` saying what is wrong (the caller names the record).
    public static func parse(
        _ record: UnsafeRawBufferPointer
    ) throws(RecordDamage) -> (RecordHeader, UnsafeRawBufferPointer) {
        guard record.count >= 2 else {
            throw RecordDamage("the record has \(record.count) bytes, fewer than any header")
        }
        guard record[0] == magic else {
            throw RecordDamage("the header does not start with \"H\" (found 0x\(hexString([record[0]])))")
        }
        if record[1] == Legacy.magic1 { return try Legacy.parse(record) }
        guard record[1] == format || record[1] == 2 else {
            throw RecordDamage("record format \(record[1]) is not one of the formats 1 to 3 this code reads")
        }
        guard record.count >= minimumSize else {
            throw RecordDamage("the record has \(record.count) bytes, fewer than the \(minimumSize)-byte header")
        }
        let flags = record[6]
        guard flags & ~1 == 0 else { throw RecordDamage("unknown header flags 0x\(hexString([flags]))") }
        let expires = flags & 1 == 1
        guard !expires || record.count >= 20 else {
            throw RecordDamage("the record has \(record.count) bytes, fewer than the 20-byte header with an expiry")
        }
        let (version, end) = try readVersion(record, at: expires ? 19 : 13)
        let computed = checksum(record)
        let stored = loadBigEndian(UInt32.self, at: 2, in: record)
        guard computed == stored else { throw checksumMismatch(stored: stored, computed: computed) }
        var header = RecordHeader(
            version: Int(version), writtenAt: loadTime(at: 7, in: record),
            expiresAt: expires ? loadTime(at: 13, in: record) : nil)
        header.recordFormat = record[1]
        return (header, UnsafeRawBufferPointer(rebasing: record[end...]))
    }

    /// The checksum of a record of format 2 or 3 (its format byte at offset 1). Format 3 covers its
    /// format byte, which tells how to read the payload's keys: one flipped bit would otherwise
    /// make a record of format 3 one of format 2 with the same checksum.
    @inline(__always)
    private static func checksum(_ record: UnsafeRawBufferPointer) -> UInt32 {
        var crc = CRC32()
        if record[1] >= 3 { crc.update(byte: record[1]) }
        crc.update(UnsafeRawBufferPointer(rebasing: record[6...]))
        return crc.value
    }

    static func checksumMismatch(stored: UInt32, computed: UInt32) -> RecordDamage {
        RecordDamage(
            "checksum mismatch (stored 0x\(String(stored, radix: 16)), computed 0x\(String(computed, radix: 16)))")
    }

    /// The LEB128 version at `offset` and the offset after it.
    private static func readVersion(
        _ record: UnsafeRawBufferPointer, at offset: Int
    ) throws(RecordDamage) -> (value: UInt32, end: Int) {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        var index = offset
        while index < record.count, index < offset + 5 {
            let byte = record[index]
            value |= UInt64(byte & 0x7F) << shift
            index += 1
            if byte & 0x80 == 0 {
                guard value <= UInt32.max else { throw RecordDamage("the key-set version \(value) is out of range") }
                return (UInt32(value), index)
            }
            shift += 7
        }
        throw RecordDamage("the key-set version at offset \(offset) does not end within 5 bytes or the record")
    }

    private static func leb128Size(_ value: UInt32) -> Int {
        switch value {
        case ..<0x80: 1
        case ..<0x4000: 2
        case ..<0x20_0000: 3
        case ..<0x1000_0000: 4
        default: 5
        }
    }

    @inline(__always)
    private static func storeTime(_ time: Int64, at offset: Int, in record: UnsafeMutableRawBufferPointer) {
        let stored = UInt64(min(max(time, 0), latestTime))
        storeBigEndian(UInt16(truncatingIfNeeded: stored >> 32), at: offset, in: record)
        storeBigEndian(UInt32(truncatingIfNeeded: stored), at: offset + 2, in: record)
    }

    @inline(__always)
    private static func loadTime(at offset: Int, in record: UnsafeRawBufferPointer) -> Int64 {
        Int64(loadBigEndian(UInt16.self, at: offset, in: record)) << 32
            | Int64(loadBigEndian(UInt32.self, at: offset + 2, in: record))
    }
}

/// Record format 1, read only: a fixed 28-byte header.
///
/// ```
/// offset size  field
///  0     2     magic "HR" (0x48 0x52)
///  2     1     record format (1)
///  3     1     flags (bit 0: the record expires; other bits 0)
///  4     4     key-set version of the payload, UInt32 big-endian
///  8     8     written at, Int64 big-endian, milliseconds since 1970
/// 16     8     expires at, Int64 big-endian (0 when flag bit 0 is clear)
/// 24     4     CRC-32 of bytes 0..<24 followed by the payload, big-endian
/// 28     …     payload
/// ```
enum Legacy {
    static let size = 28
    static let magic1: UInt8 = 0x52

    static func parse(_ record: UnsafeRawBufferPointer) throws(RecordDamage) -> (RecordHeader, UnsafeRawBufferPointer) {
        guard record.count >= size else {
            throw RecordDamage("the record has \(record.count) bytes, fewer than the \(size)-byte header of format 1")
        }
        guard record[2] == 1 else {
            throw RecordDamage("record format \(record[2]) is not one of the formats 1 to 3 this code reads")
        }
        let flags = record[3]
        guard flags & ~1 == 0 else { throw RecordDamage("unknown header flags 0x\(hexString([flags]))") }
        let payload = UnsafeRawBufferPointer(rebasing: record[size...])
        var crc = CRC32()
        crc.update(header: UnsafeRawBufferPointer(rebasing: record[0..<24]), payload: payload)
        let stored = loadBigEndian(UInt32.self, at: 24, in: record)
        guard crc.value == stored else { throw RecordHeader.checksumMismatch(stored: stored, computed: crc.value) }
        var header = RecordHeader(
            version: Int(loadBigEndian(UInt32.self, at: 4, in: record)),
            writtenAt: Int64(bitPattern: loadBigEndian(UInt64.self, at: 8, in: record)),
            expiresAt: flags & 1 == 1 ? Int64(bitPattern: loadBigEndian(UInt64.self, at: 16, in: record)) : nil)
        header.recordFormat = 1
        return (header, payload)
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
