import AsyncHTTPClient
import Foundation
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

    /// One user, `nil` when the upstream says there is none (404).
    func user(_ id: Int64) async throws -> User? {
        try await get("/users/\(id)", as: User.self)
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
        let response = try await client.execute(request, timeout: timeout)
        let body = try await response.body.collect(upTo: 256 << 20)
        switch response.status.code {
        case 200: return try JSONDecoder().decode(type, from: Data(body.readableBytesView), keySet: .api)
        case 404: return nil
        default: throw Failure(status: Int(response.status.code), url: url)
        }
    }
}
