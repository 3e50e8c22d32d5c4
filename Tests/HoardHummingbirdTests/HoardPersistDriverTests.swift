#if Hummingbird
import Foundation
import Hoard
import HoardHummingbird
import HoardTesting
import Hummingbird
import Testing

/// The PersistDriver protocol's documented behaviour, on a real store in a temporary directory.
@Suite("HoardPersistDriver")
struct HoardPersistDriverTests {
    struct Session: Codable, Equatable, Sendable {
        var userID: Int64
        var roles: [String]
        var since: Date
    }

    @Test("create refuses a key that holds a live value, and leaves that value as it was")
    func createDuplicate() async throws {
        try await withTemporaryStore { store in
            let persist = try HoardPersistDriver(store: store)
            try await persist.create(key: "k", value: "first", expires: nil)
            await #expect(throws: PersistError.duplicate) {
                try await persist.create(key: "k", value: "second", expires: nil)
            }
            #expect(try await persist.get(key: "k", as: String.self) == "first")
        }
    }

    @Test("values of several Codable types round-trip; set overwrites; remove removes")
    func valuesOfSeveralTypes() async throws {
        try await withTemporaryStore { store in
            let persist = try HoardPersistDriver(store: store)
            let session = Session(
                userID: 42, roles: ["admin", "ops"], since: Date(timeIntervalSince1970: 1_700_000_000))
            try await persist.set(key: "session", value: session, expires: nil)
            try await persist.set(key: "count", value: 7, expires: nil)
            try await persist.set(key: "flags", value: ["a": true, "b": false], expires: nil)
            try await persist.set(key: "name", value: "grace", expires: nil)
            #expect(try await persist.get(key: "session", as: Session.self) == session)
            #expect(try await persist.get(key: "count", as: Int.self) == 7)
            #expect(try await persist.get(key: "flags", as: [String: Bool].self) == ["a": true, "b": false])
            try await persist.set(key: "count", value: 8, expires: nil)
            #expect(try await persist.get(key: "count", as: Int.self) == 8)
            try await persist.remove(key: "count")
            #expect(try await persist.get(key: "count", as: Int.self) == nil)
            try await persist.remove(key: "never-there")  // not an error
            #expect(try await persist.get(key: "missing", as: String.self) == nil)
        }
    }

    @Test("a value read as another type is an invalidConversion error")
    func invalidConversion() async throws {
        try await withTemporaryStore { store in
            let persist = try HoardPersistDriver(store: store)
            try await persist.set(key: "name", value: "grace", expires: nil)
            await #expect(throws: PersistError.invalidConversion) {
                try await persist.get(key: "name", as: Session.self)
            }
        }
    }

    @Test("expiry: a value is gone after it, an expired key can be created again, the TTL counts down")
    func expiry() async throws {
        let clock = ManualClock()
        try await withTemporaryStore(options: .testing(clock: clock)) { store in
            let persist = try HoardPersistDriver(store: store)
            try await persist.create(key: "k", value: "short", expires: .seconds(10))
            clock.advance(by: .seconds(4))
            let found = try await persist.getWithTTL(key: "k", as: String.self)
            #expect(found?.object == "short" && found?.ttl == .seconds(6))
            clock.advance(by: .seconds(7))
            #expect(try await persist.get(key: "k", as: String.self) == nil)
            try await persist.create(key: "k", value: "again", expires: nil)
            #expect(try await persist.getWithTTL(key: "k", as: String.self)?.ttl == nil)
        }
    }

    @Test("set without expires keeps the replaced value's expiry; with expires replaces it")
    func setKeepsExpiry() async throws {
        let clock = ManualClock()
        try await withTemporaryStore(options: .testing(clock: clock)) { store in
            let persist = try HoardPersistDriver(store: store)
            try await persist.set(key: "kept", value: 1, expires: .seconds(10))
            try await persist.set(key: "kept", value: 2, expires: nil)
            try await persist.set(key: "replaced", value: 1, expires: .seconds(10))
            try await persist.set(key: "replaced", value: 2, expires: .seconds(100))
            clock.advance(by: .seconds(11))
            #expect(try await persist.get(key: "kept", as: Int.self) == nil)
            #expect(try await persist.get(key: "replaced", as: Int.self) == 2)
            // An expired value's expiry is not inherited: the new value never expires.
            try await persist.set(key: "kept", value: 3, expires: nil)
            clock.advance(by: .seconds(1_000))
            #expect(try await persist.get(key: "kept", as: Int.self) == 3)
        }
    }

    @Test("of 50 concurrent creates of one key, exactly one succeeds")
    func concurrentCreates() async throws {
        try await withTemporaryStore { store in
            let persist = try HoardPersistDriver(store: store)
            let outcomes = await withTaskGroup(of: Bool.self) { group in
                for index in 0..<50 {
                    group.addTask { (try? await persist.create(key: "once", value: index, expires: nil)) != nil }
                }
                return await group.reduce(into: [Bool]()) { $0.append($1) }
            }
            #expect(outcomes.filter { $0 }.count == 1)
            #expect(try await persist.get(key: "once", as: Int.self) != nil)
        }
    }

    @Test("values outlive the store's handle: a reopened store reads them")
    func reopen() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("persist-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        do {
            let persist = try HoardPersistDriver(store: try Store(path: directory.path))
            try await persist.set(key: "k", value: "kept", expires: .hours(1))
        }
        let persist = try HoardPersistDriver(store: try Store(path: directory.path))
        #expect(try await persist.get(key: "k", as: String.self) == "kept")
    }
}
#endif
