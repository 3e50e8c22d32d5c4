#if Postgres
import Foundation
import Hoard
@testable import HoardPostgres
import Testing

/// The changes notifications carry (no PostgreSQL needed): the payload `hoard_publish` makes, and
/// the inbox that holds them for the applier.
@Suite struct BusNoticeTests {
    static let log = UUID()
    static let origin = UUID()

    static func payload(
        previous: Int64 = 4, id: Int64 = 5, origin: String = BusNoticeTests.origin.uuidString.lowercased(),
        keys: String = "0001,ff", collection: String = "User"
    ) -> String {
        "d|\(log.uuidString.lowercased())|\(previous)|\(id)|\(origin)|\(keys)|\(collection)"
    }

    @Test func aPayloadGivesItsChange() throws {
        let notice = try #require(BusNotice(payload: Self.payload(collection: "A|B")))
        #expect(notice.log == Self.log && notice.previous == 4 && notice.id == 5)
        #expect(notice.change.origin == Self.origin)
        #expect(notice.change.keys == [[0x00, 0x01], [0xFF]])
        #expect(notice.change.collection == "A|B", "the collection is the rest of the payload")

        let fromTheSource = try #require(BusNotice(payload: Self.payload(origin: "", keys: "")))
        #expect(fromTheSource.change.origin == nil && fromTheSource.change.keys.isEmpty)
    }

    @Test(arguments: [
        "c", "a", "w100", payload(previous: 5), payload(previous: 6), payload(id: -1), payload(keys: "0g"),
        payload(keys: "001"), payload(keys: "00,,01"), payload(keys: "0A"), payload(origin: "nobody"),
        payload(origin: String(origin.uuidString.lowercased().dropLast()) + "g"), payload(previous: -1),
        payload().replacingOccurrences(of: "-", with: "+"),
        "d|\(log)|4|5|", "x" + payload().dropFirst(),
    ])
    func anythingElseIsNotANotice(_ payload: String) {
        #expect(BusNotice(payload: payload) == nil)
    }

    @Test func anInboxPastItsLimitHasTheLogReadInstead() throws {
        let inbox = NoticeInbox(limit: 2)
        #expect(inbox.take().readLog, "the first turn reads the log")
        let notice = try #require(BusNotice(payload: Self.payload()))
        inbox.add(notice)
        inbox.add(notice)
        let taken = inbox.take()
        #expect(taken.notices.count == 2 && !taken.readLog)
        for _ in 0..<3 { inbox.add(notice) }
        let overflowed = inbox.take()
        #expect(overflowed.notices.isEmpty && overflowed.readLog)
        inbox.readLog()
        inbox.add(notice)
        #expect(inbox.take().notices.isEmpty, "what the log holds is not kept twice")
    }
}
#endif
