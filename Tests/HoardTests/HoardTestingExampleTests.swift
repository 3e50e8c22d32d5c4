// An application's test written with HoardTesting, as the Testing article shows it (the marked
// lines are checked against Testing.md by ReadmeSnippetTests). It uses the README's `User`.
import Foundation  // FileManager, for the second test only
// README begin: testing; only Testing.md
import Hoard
import HoardTesting
import Testing

@Test func expiredUsersAreGone() throws {
    let clock = ManualClock()
    try withTemporaryStore(options: .testing(clock: clock)) { store in
        let users = try store.collection(User.self, timeToLive: .seconds(60))
        try users.put([User(id: 1, name: "ada"), User(id: 2, name: "grace")])
        #expect(try users.difference(from: [User(id: 1, name: "ada"), User(id: 2, name: "grace")]) == nil)
        clock.advance(by: .seconds(61))
        #expect(try users.scan().isEmpty)
    }
}
// README end

@Suite("HoardTesting")
struct HoardTestingTests {
    @Test("difference(from:) names the missing, unexpected and different IDs; the temporary store is removed")
    func difference() throws {
        var path = ""
        try withTemporaryStore { store in
            path = store.path
            let users = try store.collection(User.self)
            try users.put([User(id: 1, name: "ada"), User(id: 2, name: "grace"), User(id: 3, name: "alan")])
            let difference = try users.difference(from: [
                User(id: 1, name: "ada"), User(id: 2, name: "GRACE"), User(id: 4, name: "edsger"),
            ])
            #expect(difference == ContentsDifference(missing: [4], unexpected: [3], different: [2]))
        }
        #expect(!path.isEmpty && !FileManager.default.fileExists(atPath: path))
    }
}
