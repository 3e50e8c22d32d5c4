import Foundation
import Hoard
import HoardTestSupport
import Synchronization
import TestSupport
import Testing

/// A clock the test moves by hand: no sleeps.

@Suite("Expiry and damaged records in scans")
struct ExpiryTests {
    @Test("minutes, hours and days are durations of seconds; an hour's time to live is 3,600,000 ms in the header")
    func durationUnits() throws {
        #expect(Duration.minutes(5) == .seconds(300))
        #expect(Duration.hours(24) == .seconds(86_400))
        #expect(Duration.days(2) == .seconds(172_800))
        #expect(Duration.hours(-1) == .seconds(-3_600))
        let clock = ManualClock()
        try withTemporaryStore(options: .testing(clock: clock)) { store in
            let notes = try store.collection(Note.self, timeToLive: .hours(1))
            try notes.put(Note(id: 1, text: "an hour", stars: 1, pinned: false))
            try notes.put(Note(id: 2, text: "five minutes", stars: 1, pinned: false), expiry: .after(.minutes(5)))
            #expect(try notes.header(of: 1)?.expiresAt == clock.nowMilliseconds + 3_600_000)
            #expect(try notes.header(of: 2)?.expiresAt == clock.nowMilliseconds + 300_000)
            clock.advance(by: .minutes(60))
            #expect(try notes.scan().isEmpty)
        }
    }

    @Test("a collection's time to live and per-put expiry hide records, and purgeExpired removes them")
    func expiry() throws {
        let clock = ManualClock()
        try withTemporaryDirectory { dir in
            let store = try Store(
                path: dir + "/store", options: .init(durability: .riskStoreOnOSCrash, clock: clock.read))
            let notes = try store.collection(Note.self, timeToLive: .seconds(1))
            try notes.put(Note(id: 1, text: "default ttl", stars: 1, pinned: false))
            try notes.put(Note(id: 2, text: "forever", stars: 1, pinned: false), expiry: .never)
            try notes.put(Note(id: 3, text: "short", stars: 1, pinned: false), expiry: .after(.milliseconds(10)))
            try notes.put(
                Note(id: 4, text: "fixed", stars: 1, pinned: false), expiry: .at(Date(timeIntervalSince1970: 1_000.5)))
            #expect(try notes.header(of: 1)?.expiresAt == 1_001_000)
            #expect(try notes.header(of: 2)?.expiresAt == nil)
            #expect(try notes.scan().map(\.id) == [1, 2, 3, 4])

            clock.advance(by: .milliseconds(10))  // id 3 expires exactly now
            #expect(try notes.get(3) == nil)
            #expect(try notes.contains(3) == false)
            #expect(try notes.scan().map(\.id) == [1, 2, 4])
            #expect(try notes.count() == 4)  // not purged yet

            clock.advance(by: .seconds(5))
            #expect(try notes.scan().map(\.id) == [2])
            #expect(try notes.purgeExpired() == 3)
            #expect(try notes.count() == 1)
            #expect(try notes.get(2)?.text == "forever")
            #expect(try notes.purgeExpired() == 0)
        }
    }

    @Test("a scan can skip damaged records and report each by key; nothing is deleted")
    func skipAndReport() throws {
        try withStore { store, _ in
            let notes = try store.collection(Note.self)
            try notes.put((1...5).map { Note(id: $0, text: "n\($0)", stars: 1, pinned: false) })
            try writeRecord(Note(id: 2, text: "bad", stars: 1, pinned: false), version: 3, in: store) {
                $0[$0.count - 1] ^= 1
            }
            try writeRecord(Note(id: 4, text: "future", stars: 1, pinned: false), version: 7, in: store)
            #expect(throws: HoardError.self) { try notes.scan() }
            let result = try notes.scanSkippingDamaged()
            #expect(result.models.map(\.id) == [1, 3, 5])
            #expect(result.damaged.count == 2)
            #expect(result.damaged.map(\.kind) == [.corruptRecord, .newerRecord])
            #expect(result.damaged.map { $0.key?.id(as: Int64.self) } == [2, 4])
            #expect("\(result.damaged[0])".contains("checksum") && "\(result.damaged[1])".contains("version 7"))
            #expect(try notes.count() == 5)
            // purgeExpired leaves damaged records alone.
            #expect(try notes.purgeExpired() == 0)
            #expect(try notes.count() == 5)
        }
    }
}
