@testable import Hoard
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

    @Test(
        "a renewed record has the new times, the old version and payload, and zlib's checksum; a damaged one is refused"
    )
    func renewal() throws {
        var rng = SeededGenerator(seed: SeededGenerator.seedFromEnvironment())
        for length in 0..<300 {
            let payload = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let record = RecordHeader(version: 7, writtenAt: 1, expiresAt: length % 3 == 0 ? nil : 5).record(
                with: payload)
            let renewal = RecordHeader(
                version: 1, writtenAt: 1_000 + Int64(length), expiresAt: length % 2 == 0 ? nil : 2_000)
            func renew(_ record: [UInt8]) -> [UInt8]? {
                var renewed = [UInt8](repeating: 0, count: record.count)
                let done = record.withUnsafeBytes { old in
                    renewed.withUnsafeMutableBytes { renewal.renew(old, into: $0) }
                }
                return done ? renewed : nil
            }
            let renewed = try #require(renew(record), "payload of \(length) bytes (seed \(rng.seed))")
            let stored = renewed[24..<28].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            #expect(stored == referenceCRC(Array(renewed[0..<24]) + payload), "payload of \(length) bytes")
            let parsed = try renewed.withUnsafeBytes { bytes in
                let (header, body) = try RecordHeader.parse(bytes)
                return (header, Array(body))
            }
            #expect(parsed.0 == RecordHeader(version: 7, writtenAt: renewal.writtenAt, expiresAt: renewal.expiresAt))
            #expect(parsed.1 == payload)
            // One flipped bit, in the payload or (without one) in the header's times.
            var damaged = record
            damaged[length > 0 ? RecordHeader.size + length / 2 : 12] ^= 0x20
            #expect(renew(damaged) == nil, "a damaged record of \(length) bytes is not renewed")
            #expect(renew(Array(record.prefix(RecordHeader.size - 1))) == nil)
        }
    }
}
