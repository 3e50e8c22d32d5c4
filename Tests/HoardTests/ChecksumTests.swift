import Hoard
import TestSupport
import Testing

@Suite("Record checksum")
struct ChecksumTests {
    /// The CRC-32 of zlib, one bit at a time: the reference the fast table-driven one must match.
    func referenceCRC(_ bytes: [UInt8]) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            c ^= UInt32(byte)
            for _ in 0..<8 { c = c & 1 == 1 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        }
        return c ^ 0xFFFF_FFFF
    }

    @Test("the header's CRC-32 equals zlib's for every payload length and content")
    func matchesReference() {
        #expect(referenceCRC(Array("123456789".utf8)) == 0xCBF4_3926)  // the published check value
        var rng = SeededGenerator(seed: SeededGenerator.seedFromEnvironment())
        for length in 0..<300 {
            let payload = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let record = RecordHeader(version: 3, writtenAt: Int64(length), expiresAt: length % 2 == 0 ? nil : 99)
                .record(with: payload)
            let stored = record[24..<28].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            #expect(
                stored == referenceCRC(Array(record[0..<24]) + payload), "payload of \(length) bytes (seed \(rng.seed))"
            )
            let parsed = record.withUnsafeBytes { try? RecordHeader.parse($0).0 }
            #expect(parsed?.writtenAt == Int64(length))
        }
    }
}
