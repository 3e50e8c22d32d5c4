@_spi(LMDB) @testable import Hoard
import HoardTestSupport
import HoardTesting
import LMDB
import TestSupport
import Testing

@Suite("Record header and checksum")
struct ChecksumTests {
    /// The CRC-32 of zlib, one bit at a time: the reference the fast table-driven one must match.
    static func referenceCRC(_ bytes: some Collection<UInt8>) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            c ^= UInt32(byte)
            for _ in 0..<8 { c = c & 1 == 1 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        }
        return c ^ 0xFFFF_FFFF
    }

    static func bigEndian(_ bytes: some Collection<UInt8>) -> UInt64 { bytes.reduce(0) { $0 << 8 | UInt64($1) } }

    /// A record of format 1 made the way FORMAT.md describes it, independently of the product's code.
    static func formatOneRecord(version: UInt32, writtenAt: Int64, expiresAt: Int64?, payload: [UInt8]) -> [UInt8] {
        func bytes(_ value: UInt64, _ count: Int) -> [UInt8] {
            (0..<count).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
        }
        var record: [UInt8] = [0x48, 0x52, 1, expiresAt == nil ? 0 : 1]
        record += bytes(UInt64(version), 4) + bytes(UInt64(bitPattern: writtenAt), 8)
        record += bytes(UInt64(bitPattern: expiresAt ?? 0), 8)
        record += bytes(UInt64(referenceCRC(record + payload)), 4)
        return record + payload
    }

    @Test(
        "a header of format 3 (and 2) is laid out as FORMAT.md says, with zlib's CRC-32, for every payload length",
        arguments: [UInt8(3), 2])
    func layout(format: UInt8) throws {
        #expect(Self.referenceCRC(Array("123456789".utf8)) == 0xCBF4_3926)  // the published check value
        var rng = SeededGenerator(seed: SeededGenerator.seedFromEnvironment())
        let versions: [(Int, [UInt8])] = [
            (1, [0x01]), (127, [0x7F]), (128, [0x80, 0x01]), (300, [0xAC, 0x02]),
            (Int(UInt32.max), [0xFF, 0xFF, 0xFF, 0xFF, 0x0F]),
        ]
        for length in 0..<300 {
            let payload = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let (version, leb) = versions[length % versions.count]
            let writtenAt = 1_764_000_000_000 + Int64(length)
            let expiresAt: Int64? = length % 2 == 0 ? nil : writtenAt + 99
            var header = RecordHeader(version: version, writtenAt: writtenAt, expiresAt: expiresAt)
            header.recordFormat = format
            let record = header.record(with: payload)
            let context = "format \(format), payload of \(length) bytes, version \(version) (seed \(rng.seed))"
            #expect(header.size == (expiresAt == nil ? 13 : 19) + leb.count, "\(context)")
            #expect(record.count == header.size + length)
            #expect(record[0] == 0x48 && record[1] == format && record[6] == (expiresAt == nil ? 0 : 1), "\(context)")
            // Format 3's checksum covers its format byte too.
            let covered = (format == 3 ? [format] : []) + record[6...]
            #expect(Self.bigEndian(record[2..<6]) == UInt64(Self.referenceCRC(covered)), "\(context)")
            #expect(Self.bigEndian(record[7..<13]) == UInt64(writtenAt))
            if let expiresAt { #expect(Self.bigEndian(record[13..<19]) == UInt64(expiresAt)) }
            let versionAt = expiresAt == nil ? 13 : 19
            #expect(Array(record[versionAt..<(versionAt + leb.count)]) == leb, "\(context)")
            let parsed = try record.withUnsafeBytes { bytes in
                let (header, payload) = try RecordHeader.parse(bytes)
                return (header, Array(payload))
            }
            #expect(parsed.0 == header && parsed.0.recordFormat == format && parsed.1 == payload, "\(context)")
            #expect(parsed.0.hasNumberedKeys == (format == 3) && parsed.0.isCurrentFormat == (format == 3))
            record.withUnsafeBytes { bytes in
                #expect(RecordHeader.peekVersion(bytes) == version, "\(context)")
                #expect(RecordHeader.peekWrittenAt(bytes) == writtenAt)
                #expect(RecordHeader.peekExpiry(bytes) == expiresAt)
            }
        }
        #expect(RecordHeader(version: 3, writtenAt: 1, expiresAt: nil).size == RecordHeader.minimumSize)
    }

    @Test("times outside what 48 bits hold are written as the nearest they hold, which no clock reading tells apart")
    func clampedTimes() throws {
        let header = RecordHeader(version: 1, writtenAt: -5, expiresAt: .max)
        let parsed = try header.record(with: [0xA0]).withUnsafeBytes { try RecordHeader.parse($0).0 }
        #expect(parsed.writtenAt == 0 && parsed.expiresAt == RecordHeader.latestTime)
    }

    @Test("a record of format 1 is read: its version, times, payload and checksum, told apart from format 2")
    func formatOne() throws {
        var rng = SeededGenerator(seed: SeededGenerator.seedFromEnvironment())
        for length in 0..<200 {
            let payload = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let expiresAt: Int64? = length % 3 == 0 ? nil : 5_000 + Int64(length)
            let record = Self.formatOneRecord(version: 7, writtenAt: 1_000, expiresAt: expiresAt, payload: payload)
            let (header, body) = try record.withUnsafeBytes { bytes in
                let (header, body) = try RecordHeader.parse(bytes)
                return (header, Array(body))
            }
            #expect(header.version == 7 && header.writtenAt == 1_000 && header.expiresAt == expiresAt)
            #expect(header.recordFormat == 1 && !header.isCurrentFormat && body == payload, "seed \(rng.seed)")
            record.withUnsafeBytes { bytes in
                #expect(RecordHeader.peekVersion(bytes) == 7)
                #expect(RecordHeader.peekWrittenAt(bytes) == 1_000)
                #expect(RecordHeader.peekExpiry(bytes) == expiresAt)
            }
            var damaged = record
            damaged[Int.random(in: 0..<damaged.count, using: &rng)] ^= 1 << UInt8.random(in: 0..<8, using: &rng)
            #expect(throws: RecordDamage.self, "seed \(rng.seed)") {
                try damaged.withUnsafeBytes { _ = try RecordHeader.parse($0) }
            }
        }
    }

    @Test(
        "every flipped bit and every cut of a record of format 3 (and 2) is damage, named, never a different record",
        arguments: [UInt8(3), 2])
    func damage(format: UInt8) {
        for length in [0, 1, 7, 40] {
            let payload = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37) }
            for expiresAt in [nil, Int64(9_000)] {
                var header = RecordHeader(version: 200, writtenAt: 8_000, expiresAt: expiresAt)
                header.recordFormat = format
                let record = header.record(with: payload)
                for bit in 0..<(record.count * 8) {
                    var damaged = record
                    damaged[bit / 8] ^= 1 << UInt8(bit % 8)
                    #expect(throws: RecordDamage.self, "bit \(bit) of a \(record.count)-byte record") {
                        try damaged.withUnsafeBytes { _ = try RecordHeader.parse($0) }
                    }
                }
                for cut in 0..<record.count {
                    #expect(throws: RecordDamage.self, "the first \(cut) bytes") {
                        try Array(record.prefix(cut)).withUnsafeBytes { _ = try RecordHeader.parse($0) }
                    }
                }
            }
        }
    }

    @Test("a renewal that gives a record an expiry grows its header; the bytes a bound counts follow")
    func renewalResizes() async throws {
        // A clock that moves only when told: with the system's, a starved test process (all the
        // cooperative pool's threads busy with other suites) resumed from the async touch more
        // than the minute of the new expiry later, and the get rightly found the record expired.
        try await withTemporaryStore(options: .testing(clock: ManualClock())) { store in
            let notes = try store.collection(Note.self, capacity: .bytes(10_000))
            try await notes.put([1, 2, 3].map { Note(id: $0, text: "note \($0)", stars: 1, pinned: false) })
            let before = try #require(try notes.header(of: 2))
            #expect(before.expiresAt == nil)
            #expect(try await notes.touch(2, expiry: .after(.seconds(60))))
            let after = try #require(try notes.header(of: 2))
            #expect(after.version == before.version && after.expiresAt != nil)
            let read = try notes.get(2)
            let now = try notes.header(of: 2)
            #expect(
                read?.text == "note 2",
                "read \(String(describing: read)); header after the touch \(after), now \(String(describing: now))")
            let database = try store.environment.openDatabase("c:Note")
            let stored = try store.environment.read { txn in
                try txn.entries(in: database).reduce(0) { $0 + $1.key.count + $1.value.count }
            }
            #expect(try notes.capacityUsage()?.bytes == stored && stored > 0)
        }
    }
}
