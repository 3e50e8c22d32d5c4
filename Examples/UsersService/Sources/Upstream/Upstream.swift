import ArgumentParser
import Foundation
import Hummingbird
import Logging
import Synchronization
import UsersModel

/// The upstream API the service caches: `GET /users/:id`, `GET /users` (the whole list, or
/// `?ids=1,2,3`), answered after a configurable latency and failing (503) at a configurable rate,
/// which `PUT /admin/error-rate` (a number from 0 to 1 as the body) changes while it runs.
///
/// Users 1…`--users` exist. A user's karma changes each time the whole list is read (every tenth
/// user's, in turn), so that the service's periodic synchronize has updates to make.
///
/// `GET /users/:id` sends the user's entity tag (`ETag`) and, with `--max-age`, `Cache-Control:
/// max-age`; a request whose `If-None-Match` holds the current tag is answered `304 Not Modified`
/// with no body; `GET /admin/not-modified` counts those answers.
///
/// Writes: `PUT /users/:id` makes a new version of the user (its `version` counts them) and answers
/// it; `POST /users/versions` with IDs separated by commas as the body does so for each of them.
///
/// For fault runs: `PUT /admin/hold` with `ID MILLISECONDS` as the body makes the next
/// `GET /users/ID` wait that much longer (a fetch to kill its caller in); `GET /admin/calls` counts
/// the `GET /users/:id` requests that arrived (`?id=ID`: those of one user).
@main
struct Upstream: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "The users API that the example service caches.")

    @Option(help: "The address to listen on.") var host = "127.0.0.1"
    @Option(help: "The port to listen on (0: any free port; see --port-file).") var port = 8081
    @Option(help: "Write the port listened on to this file once listening.") var portFile: String?
    @Option(help: "How many users exist (IDs 1 through this).") var users = 10_000
    @Option(help: "The latency of each answer, in milliseconds.") var latencyMs = 5
    @Option(help: "The share of requests answered with 503 (0 to 1).") var errorRate = 0.0
    @Option(help: "Send `Cache-Control: max-age` with this many seconds with each user; none by default.")
    var maxAge: Int?

    func validate() throws {
        guard (0...1).contains(errorRate) else { throw ValidationError("--error-rate must lie from 0 to 1") }
        guard users > 0 else { throw ValidationError("--users must be positive") }
        guard latencyMs >= 0 else { throw ValidationError("--latency-ms must not be negative") }
        guard (maxAge ?? 0) >= 0 else { throw ValidationError("--max-age must not be negative") }
    }

    func run() async throws {
        let logger = {
            var logger = Logger(label: "upstream")
            logger.logLevel = .notice
            return logger
        }()
        let state = UpstreamState(users: users, errorRate: errorRate, latency: .milliseconds(latencyMs))
        let router = Router()
        let maxAge = maxAge
        router.get("users/:id") { request, context -> Response in
            let id = try context.parameters.require("id", as: Int64.self)
            state.calls.withLock { $0[id, default: 0] += 1 }
            if let hold = state.holds.withLock({ $0.removeValue(forKey: id) }) { try await Task.sleep(for: hold) }
            try await state.answer()
            guard let user = state.user(id) else { return Response(status: .notFound) }
            var headers: HTTPFields = [.eTag: user.entityTag]
            if let maxAge { headers[.cacheControl] = "max-age=\(maxAge)" }
            if request.headers[.ifNoneMatch] == user.entityTag {
                state.notModified.add(1, ordering: .relaxed)
                return Response(status: .notModified, headers: headers)
            }
            var response = try json(user)
            response.headers.append(contentsOf: headers)
            return response
        }
        router.get("users") { request, _ -> Response in
            try await state.answer()
            if let ids = request.uri.queryParameters.get("ids") {
                return try json(ids.split(separator: ",").compactMap { Int64($0) }.compactMap(state.user))
            }
            return try json(state.everyone())
        }
        router.put("users/:id") { _, context -> Response in
            try await state.answer()
            let id = try context.parameters.require("id", as: Int64.self)
            guard let user = state.write(id) else { return Response(status: .notFound) }
            return try json(user)
        }
        router.post("users/versions") { request, _ -> Response in
            try await state.answer()
            let body = try await request.body.collect(upTo: 1 << 20)
            let ids = String(buffer: body).split(separator: ",").compactMap {
                Int64($0.trimmingCharacters(in: .whitespacesAndNewlines))
            }
            return try json(ids.compactMap(state.write))
        }
        router.put("admin/hold") { request, _ -> HTTPResponse.Status in
            let body = try await request.body.collect(upTo: 64)
            let words = String(buffer: body).split(whereSeparator: \.isWhitespace).compactMap { Int64($0) }
            guard words.count == 2, words[1] >= 0 else {
                throw HTTPError(.badRequest, message: "the body must be an ID and milliseconds")
            }
            state.holds.withLock { $0[words[0]] = .milliseconds(words[1]) }
            return .ok
        }
        router.get("admin/calls") { request, _ -> String in
            let id = request.uri.queryParameters.get("id").flatMap { Int64($0) }
            let calls = state.calls.withLock { calls in id.map { calls[$0] ?? 0 } ?? calls.values.reduce(0, +) }
            return "\(calls)\n"
        }
        router.get("admin/not-modified") { _, _ -> String in
            "\(state.notModified.load(ordering: .relaxed))\n"
        }
        router.put("admin/error-rate") { request, context -> HTTPResponse.Status in
            let body = try await request.body.collect(upTo: 64)
            guard let rate = Double(String(buffer: body).trimmingCharacters(in: .whitespacesAndNewlines)),
                (0...1).contains(rate)
            else { throw HTTPError(.badRequest, message: "the body must be a number from 0 to 1") }
            state.errorRate.withLock { $0 = rate }
            context.logger.notice("error rate set", metadata: ["rate": "\(rate)"])
            return .ok
        }
        let portFile = portFile
        let app = Application(
            router: router,
            configuration: .init(address: .hostname(host, port: port), serverName: "upstream"),
            onServerRunning: { channel in
                let bound = channel.localAddress?.port ?? 0
                logger.notice("upstream listening", metadata: ["port": "\(bound)"])
                if let portFile { try? "\(bound)\n".write(toFile: portFile, atomically: true, encoding: .utf8) }
            },
            logger: logger)
        try await app.runService()
    }
}

/// The upstream's users and fault settings, shared by the request handlers.
final class UpstreamState: Sendable {
    let users: Int
    let latency: Duration
    let errorRate: Mutex<Double>
    /// How many times the whole list was read: which users' karma has moved on.
    let generation = Atomic<Int>(0)
    /// The version of each user written since the upstream started (0 for the others).
    let versions = Mutex<[Int64: Int]>([:])
    /// How many requests were answered `304 Not Modified`.
    let notModified = Atomic<Int>(0)
    /// How many `GET /users/:id` requests arrived, by user.
    let calls = Mutex<[Int64: Int]>([:])
    /// How much longer the next `GET /users/:id` of a user waits (`PUT /admin/hold`).
    let holds = Mutex<[Int64: Duration]>([:])

    init(users: Int, errorRate: Double, latency: Duration) {
        self.users = users
        self.errorRate = Mutex(errorRate)
        self.latency = latency
    }

    /// Waits the latency, then fails at the error rate.
    func answer() async throws {
        if latency > .zero { try await Task.sleep(for: latency) }
        if Double.random(in: 0..<1) < errorRate.withLock({ $0 }) {
            throw HTTPError(.serviceUnavailable, message: "upstream failing on purpose")
        }
    }

    func user(_ id: Int64) -> User? {
        guard id >= 1 && id <= users else { return nil }
        let generation = generation.load(ordering: .relaxed)
        // Every tenth user (in turn, by generation) gains a point each time the list is read.
        let raises = generation / 10 + (Int(id % 10) < generation % 10 ? 1 : 0)
        let version = versions.withLock { $0[id] ?? 0 }
        return User(
            id: id, name: "user\(id)", email: "user\(id)@example.com", karma: Int(id % 97) + raises, version: version)
    }

    /// A new version of user `id` (nil when there is no such user).
    func write(_ id: Int64) -> User? {
        guard id >= 1 && id <= users else { return nil }
        versions.withLock { $0[id, default: 0] += 1 }
        return user(id)
    }

    func everyone() -> [User] {
        generation.add(1, ordering: .relaxed)
        return (1...Int64(users)).compactMap(user)
    }
}

func json(_ value: some Encodable) throws -> Response {
    let data = try JSONEncoder().encode(value, keySet: .api)
    return Response(
        status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
}
