import AsyncHTTPClient
import Foundation
import Hoard
import NIOCore
import NIOHTTP1
import UsersModel

/// The upstream users API over HTTP (AsyncHTTPClient).
struct UpstreamClient: Sendable {
    /// What went wrong upstream: an answer other than 200 or 404.
    struct Failure: Error, CustomStringConvertible {
        var status: Int
        var url: String
        var description: String { "upstream answered \(status) for \(url)" }
    }

    let base: String
    let client: HTTPClient
    let timeout: TimeAmount

    /// User `id`, asked for with the entity tag of `stored` (the user the service holds, fresh or
    /// expired) in `If-None-Match`: the upstream answers `304` while `stored` is current, and the
    /// service renews its record without rewriting it. The upstream's `Cache-Control: max-age`,
    /// when it sends one, becomes the record's expiry in place of the collection's time to live.
    func user(_ id: Int64, revalidating stored: User?) async throws -> Revalidation<User> {
        var request = HTTPClientRequest(url: base + "/users/\(id)")
        if let stored { request.headers.add(name: "If-None-Match", value: stored.entityTag) }
        let (status, headers, body) = try await execute(request)
        let expiry = Self.maxAge(in: headers).map { Expiry.after(.seconds($0)) } ?? .collectionDefault
        switch status {
        case 200: return .model(try Self.decode(User.self, body), expiry: expiry)
        case 304: return .notModified(expiry: expiry)
        case 404: return .absent
        default: throw Failure(status: status, url: request.url)
        }
    }

    /// The users among `ids` that exist.
    func users(_ ids: [Int64]) async throws -> [User] {
        try await get("/users?ids=" + ids.map(String.init).joined(separator: ","), as: [User].self) ?? []
    }

    /// Every user: the upstream's whole list.
    func everyone() async throws -> [User] {
        try await get("/users", as: [User].self) ?? []
    }

    /// Writes a new version of user `id`; `nil` when there is no such user.
    func write(_ id: Int64) async throws -> User? {
        try await get("/users/\(id)", method: .PUT, as: User.self)
    }

    /// Writes a new version of each of `ids` that exists; returns them.
    func write(_ ids: [Int64]) async throws -> [User] {
        try await get(
            "/users/versions", method: .POST, body: ids.map(String.init).joined(separator: ","), as: [User].self) ?? []
    }

    private func get<T: Decodable>(
        _ path: String, method: HTTPMethod = .GET, body: String? = nil, as type: T.Type
    ) async throws -> T? {
        let url = base + path
        var request = HTTPClientRequest(url: url)
        request.method = method
        if let body { request.body = .bytes(ByteBuffer(string: body)) }
        let (status, _, answer) = try await execute(request)
        switch status {
        case 200: return try Self.decode(type, answer)
        case 404: return nil
        default: throw Failure(status: status, url: url)
        }
    }

    private func execute(_ request: HTTPClientRequest) async throws -> (Int, HTTPHeaders, ByteBuffer) {
        let response = try await client.execute(request, timeout: timeout)
        let body = try await response.body.collect(upTo: 256 << 20)
        return (Int(response.status.code), response.headers, body)
    }

    private static func decode<T: Decodable>(_ type: T.Type, _ body: ByteBuffer) throws -> T {
        try JSONDecoder().decode(type, from: Data(body.readableBytesView), keySet: .api)
    }

    /// The seconds of a `Cache-Control: max-age` directive; `nil` without one. (This upstream sends
    /// no other directive, so the service reads none.)
    static func maxAge(in headers: HTTPHeaders) -> Int64? {
        let directives = headers["Cache-Control"].flatMap { $0.split(separator: ",") }.map {
            $0.trimmingCharacters(in: .whitespaces).lowercased()
        }
        for directive in directives where directive.hasPrefix("max-age=") {
            if let seconds = Int64(directive.dropFirst("max-age=".count)), seconds >= 0 { return seconds }
        }
        return nil
    }
}
