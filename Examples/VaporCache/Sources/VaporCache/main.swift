import Foundation
import HoardVapor
import Logging
import Vapor

// The cache to run with: `hoard` (the default), `memory` (Vapor's) or `none`.
let cacheKind = ProcessInfo.processInfo.environment["HOARD_EXAMPLE_CACHE"] ?? "hoard"
// The store's directory (hoard and sessions); `./hoard` by default.
let storePath = ProcessInfo.processInfo.environment["HOARD_EXAMPLE_STORE"]
// How long the slow route's work takes, in milliseconds (a query or an upstream call, played here).
let workMilliseconds = Int(ProcessInfo.processInfo.environment["HOARD_EXAMPLE_WORK_MS"] ?? "") ?? 5

var environment = try Environment.detect()
try LoggingSystem.bootstrap(from: &environment)
let app = try await Application.make(environment)

do {
    try configure(app)
    try await app.execute()
} catch {
    app.logger.report(error: error)
    try? await app.asyncShutdown()
    throw error
}
try await app.asyncShutdown()

func configure(_ app: Application) throws {
    // One store for the cache and the sessions, opened once; the application runs its maintenance
    // and lets go of it at shutdown.
    let path = storePath ?? app.directory.workingDirectory + "hoard"
    try app.hoard.open(at: path)
    switch cacheKind {
    case "hoard":
        app.caches.use(.hoard(capacity: .records(100_000), timeToLive: .seconds(3600)))
    case "memory", "none":
        app.caches.use(.memory)
    default:
        throw Abort(.internalServerError, reason: "HOARD_EXAMPLE_CACHE is \(cacheKind): hoard, memory or none")
    }
    // Sessions are Hoard's in every mode: the comparison is of the cache.
    app.sessions.use(.hoard(idleTimeout: .seconds(30 * 60)))
    app.logger.notice("cache: \(cacheKind), store: \(path)")

    app.get("health") { _ in "ok" }

    // A slow answer (the work is a wait of HOARD_EXAMPLE_WORK_MS), cached for an hour under its
    // number. The header says whether the cache had it.
    app.get("quotes", ":number") { req async throws -> Response in
        let number = try req.parameters.require("number", as: Int.self)
        let key = "quote:\(number)"
        if cacheKind != "none", let quote = try await req.cache.get(key, as: Quote.self) {
            return try await quote.encodeResponse(status: .ok, headers: ["X-Cache": "hit"], for: req)
        }
        try await Task.sleep(for: .milliseconds(workMilliseconds))
        let quote = Quote(number: number, text: "Quote number \(number)", computedAt: Date())
        if cacheKind != "none" { try await req.cache.set(key, to: quote, expiresIn: .hours(1)) }
        return try await quote.encodeResponse(status: .ok, headers: ["X-Cache": "miss"], for: req)
    }

    // A session that counts this client's visits, kept in the store across restarts.
    let sessions = app.grouped(app.sessions.middleware)
    sessions.post("visits") { req -> Visits in
        let count = (Int(req.session.data["visits"] ?? "") ?? 0) + 1
        req.session.data["visits"] = String(count)
        return Visits(visits: count)
    }
    // Reads the session without changing it (no write: the driver sees it unchanged).
    sessions.get("visits") { req -> Visits in
        Visits(visits: Int(req.session.data["visits"] ?? "") ?? 0)
    }
    sessions.delete("visits") { req -> HTTPStatus in
        req.session.destroy()
        return .noContent
    }
}

struct Quote: Content {
    var number: Int
    var text: String
    var computedAt: Date
}

struct Visits: Content {
    var visits: Int
}
