@_spi(LMDB) @testable import Hoard
import HoardTestSupport
import LMDB
import HoardTesting
import TestSupport
import Testing

/// The read rule (Records/ReadRule.swift): what every read path may serve of a record.
@Suite("The read rule")
struct ReadRuleTests {
    @Test("an expired record that is damaged is an error on every read path, never a miss")
    func expiredAndDamaged() throws {
        let clock = ManualClock()
        try withTemporaryStore(options: .testing(clock: clock)) { store in
            let notes = try store.collection(Note.self, timeToLive: .seconds(10))
            try notes.put(Note(id: 1, text: "one", stars: 1, pinned: false))
            // One payload byte flipped: the checksum no longer matches; the expiry is still readable.
            let database = try store.environment.openDatabase("c:Note")
            try store.environment.write { txn in
                guard var record = try txn.value(forKey: Int64(1).keyBytes, in: database) else {
                    throw TestSupportError("the record was not written")
                }
                record[record.count - 1] ^= 0x01
                try txn.put(record, forKey: Int64(1).keyBytes, in: database)
            }
            clock.advance(by: .seconds(11))
            expectHoardError(.corruptRecord, ["Note"]) { _ = try notes.get(1) }
            expectHoardError(.corruptRecord, ["Note"]) { _ = try notes.scan() }
            #expect(try notes.scanSkippingDamaged().damaged.count == 1)
        }
    }

    @Test("the stale windows: fresh, served while refreshing, kept for a failed fetch, fetched")
    func staleWindows() {
        let expiry: Int64 = 1_000
        // staleWhileRevalidate 100 ms, staleIfError 500 ms.
        let both = Freshness(staleWhileRevalidate: .milliseconds(100), staleIfError: .milliseconds(500))
        #expect(both.serving(expiry: nil, now: 5_000) == .fresh)
        #expect(both.serving(expiry: expiry, now: 999) == .fresh)
        #expect(both.serving(expiry: expiry, now: 1_000) == .staleWhileRefreshing)
        #expect(both.serving(expiry: expiry, now: 1_099) == .staleWhileRefreshing)
        #expect(both.serving(expiry: expiry, now: 1_100) == .fetchKeepingForError)
        #expect(both.serving(expiry: expiry, now: 1_499) == .fetchKeepingForError)
        #expect(both.serving(expiry: expiry, now: 1_500) == .fetch)
        // A staleIfError shorter than staleWhileRevalidate keeps nothing past the latter.
        let short = Freshness(staleWhileRevalidate: .milliseconds(500), staleIfError: .milliseconds(100))
        #expect(short.serving(expiry: expiry, now: 1_200) == .staleWhileRefreshing)
        #expect(short.serving(expiry: expiry, now: 1_500) == .fetch)
        #expect(Freshness().serving(expiry: expiry, now: 1_000) == .fetch)
    }

    @Test("a reset expires what was written before it, and the lease's absence expires everything")
    func resetAndLease() {
        let plain = ReadRule(resetAt: 0, unvouchedExpiry: nil)
        #expect(plain.expiry(writtenAt: 5, expiresAt: nil) == nil)
        #expect(plain.expiry(writtenAt: 5, expiresAt: 900) == 900)
        let reset = ReadRule(resetAt: 100, unvouchedExpiry: nil)
        #expect(reset.expiry(writtenAt: 99, expiresAt: nil) == 99)
        #expect(reset.expiry(writtenAt: 99, expiresAt: 50) == 50)
        #expect(reset.expiry(writtenAt: 100, expiresAt: nil) == nil)
        let unvouched = ReadRule(resetAt: 0, unvouchedExpiry: 700)
        #expect(unvouched.expiry(writtenAt: 5, expiresAt: nil) == 700)
        #expect(unvouched.expiry(writtenAt: 5, expiresAt: 600) == 600)
        #expect(unvouched.expiry(writtenAt: 5, expiresAt: 900) == 700)
        // From a record's bytes as from its parsed header.
        let record = RecordHeader(version: 1, writtenAt: 99, expiresAt: 900).record(with: [0xA0])
        #expect(record.withUnsafeBytes { reset.expiry(of: $0) } == 99)
    }
}
