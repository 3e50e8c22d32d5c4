#if Vapor
import Foundation
import Hoard
import HoardTesting
@testable import HoardVapor
import NIOHTTP1
import TestSupport
import Testing
import Vapor
import VaporTesting

/// Vapor's own session cases (destroy, an invalid cookie) against the Hoard driver, then Hoard's.
@Suite("HoardVapor sessions")
struct HoardSessionsTests {
    /// Routes that set, read and destroy `foo` in the session, behind the sessions middleware.
    static func sessionRoutes(_ app: Application) {
        let sessions = app.routes.grouped(app.sessions.middleware)
        sessions.get("set") { req -> String in
            req.session.data["foo"] = "bar"
            return "set"
        }
        sessions.get("get") { req -> String in
            guard let foo = req.session.data["foo"] else { throw Abort(.badRequest) }
            return foo
        }
        sessions.get("del") { req -> String in
            req.session.destroy()
            return "del"
        }
    }

    static func cookieHeaders(_ cookie: HTTPCookies.Value) -> HTTPHeaders {
        var headers = HTTPHeaders()
        headers.cookie = ["vapor-session": cookie]
        return headers
    }

    static func sessionCount(_ app: Application) throws -> Int {
        try app.hoard.store.collection(StoredSession.self, named: "vapor-sessions").count()
    }

    @Test("destroy deletes the stored session and expires the cookie")
    func destroy() async throws {
        try await withTemporaryDirectory { directory in
            try await withApp(storeAt: directory + "/store") { app in
                app.sessions.use(.hoard())
                Self.sessionRoutes(app)
                var cookie: HTTPCookies.Value?
                try await app.testing().test(.GET, "set") { response in
                    #expect(response.body.string == "set")
                    cookie = response.headers.setCookie?["vapor-session"]
                }
                let sent = try #require(cookie)
                #expect(try Self.sessionCount(app) == 1)
                try await app.testing().test(.GET, "del", headers: Self.cookieHeaders(sent)) { response in
                    #expect(response.body.string == "del")
                    let expired = try #require(response.headers.setCookie?["vapor-session"])
                    #expect(expired.expires.map { $0 < Date() } == true, "the cookie is expired")
                }
                #expect(try Self.sessionCount(app) == 0)
                try await app.testing().test(.GET, "get", headers: Self.cookieHeaders(sent)) { response in
                    #expect(response.status == .badRequest, "the destroyed session is gone")
                }
            }
        }
    }

    @Test("an invalid cookie gets a new session with a new ID, which the next request finds")
    func invalidCookie() async throws {
        try await withTemporaryDirectory { directory in
            try await withApp(storeAt: directory + "/store") { app in
                app.sessions.use(.hoard())
                Self.sessionRoutes(app)
                try await app.testing().test(.GET, "get") { response in
                    #expect(response.status == .badRequest)
                }
                var newCookie: HTTPCookies.Value?
                try await app.testing().test(.GET, "set", headers: Self.cookieHeaders("foo")) { response in
                    newCookie = response.headers.setCookie?["vapor-session"]
                    #expect(newCookie != nil && newCookie?.string != "foo")
                    #expect(response.status == .ok)
                }
                let cookie = try #require(newCookie)
                #expect(cookie.string.count == 43, "32 random bytes in base64url")
                try await app.testing().test(.GET, "get", headers: Self.cookieHeaders(cookie)) { response in
                    #expect(response.status == .ok)
                    #expect(response.body.string == "bar")
                }
            }
        }
    }

    @Test("a request that leaves its session unchanged makes no commit; a change does, and so does a late request")
    func unchangedSessionMakesNoCommit() async throws {
        try await withTemporaryDirectory { directory in
            let clock = ManualClock()
            try await withApp(storeAt: directory + "/store", clock: clock) { app in
                app.sessions.use(.hoard(idleTimeout: .seconds(600)))
                Self.sessionRoutes(app)
                let store = try app.hoard.store
                func lastCommit() throws -> Int { try store.read { $0.id } }

                var cookie: HTTPCookies.Value?
                try await app.testing().test(.GET, "set") { cookie = $0.headers.setCookie?["vapor-session"] }
                let headers = Self.cookieHeaders(try #require(cookie))
                let afterCreate = try lastCommit()
                for _ in 0..<5 {
                    try await app.testing().test(.GET, "get", headers: headers) { #expect($0.body.string == "bar") }
                }
                #expect(try lastCommit() == afterCreate, "five unchanged requests made no commit")

                try await app.testing().test(.GET, "set", headers: headers) { #expect($0.status == .ok) }
                #expect(try lastCommit() == afterCreate, "setting the same value is no change either")

                clock.advance(by: .seconds(301))
                try await app.testing().test(.GET, "get", headers: headers) { #expect($0.body.string == "bar") }
                #expect(try lastCommit() == afterCreate + 1, "less than half of the timeout left: renewed")
                clock.advance(by: .seconds(599))
                try await app.testing().test(.GET, "get", headers: headers) {
                    #expect($0.body.string == "bar", "the renewal slid the timeout")
                }
            }
        }
    }

    @Test("a session expires after its idle timeout and then reads as absent")
    func idleTimeout() async throws {
        try await withTemporaryDirectory { directory in
            let clock = ManualClock()
            try await withApp(storeAt: directory + "/store", clock: clock) { app in
                app.sessions.use(.hoard(idleTimeout: .seconds(60)))
                Self.sessionRoutes(app)
                var cookie: HTTPCookies.Value?
                try await app.testing().test(.GET, "set") { cookie = $0.headers.setCookie?["vapor-session"] }
                clock.advance(by: .seconds(60))
                try await app.testing().test(.GET, "get", headers: Self.cookieHeaders(try #require(cookie))) {
                    #expect($0.status == .badRequest)
                }
            }
        }
    }

    @Test("1,000 created sessions have 1,000 distinct IDs, and 1,000 records")
    func distinctIDs() async throws {
        try await withTemporaryDirectory { directory in
            try await withApp(storeAt: directory + "/store") { app in
                app.sessions.use(.hoard())
                let driver = app.sessions.driver
                let request = Request(application: app, on: app.eventLoopGroup.any())
                let ids = try await withThrowingTaskGroup(of: SessionID.self) { group in
                    for index in 0..<1_000 {
                        group.addTask { try await driver.createSession(["n": "\(index)"], for: request).get() }
                    }
                    return try await group.reduce(into: Set<SessionID>()) { $0.insert($1) }
                }
                #expect(ids.count == 1_000)
                #expect(try Self.sessionCount(app) == 1_000)
            }
        }
    }

    @Test("sessions survive a restarted app")
    func survivesRestart() async throws {
        try await withTemporaryDirectory { directory in
            var cookie: HTTPCookies.Value?
            try await withApp(storeAt: directory + "/store") { app in
                app.sessions.use(.hoard())
                Self.sessionRoutes(app)
                try await app.testing().test(.GET, "set") { cookie = $0.headers.setCookie?["vapor-session"] }
            }
            let headers = Self.cookieHeaders(try #require(cookie))
            try await withApp(storeAt: directory + "/store") { app in
                app.sessions.use(.hoard())
                Self.sessionRoutes(app)
                try await app.testing().test(.GET, "get", headers: headers) { #expect($0.body.string == "bar") }
            }
        }
    }
}

#endif
