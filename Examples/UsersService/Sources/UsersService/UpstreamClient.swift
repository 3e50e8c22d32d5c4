import AsyncHTTPClient
import Foundation
import NIOCore
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

    private func get<T: Decodable>(_ path: String, as type: T.Type) async throws -> T? {
        let url = base + path
        let response = try await client.execute(HTTPClientRequest(url: url), timeout: timeout)
        let body = try await response.body.collect(upTo: 256 << 20)
        switch response.status.code {
        case 200: return try JSONDecoder().decode(type, from: Data(body.readableBytesView), keySet: .api)
        case 404: return nil
        default: throw Failure(status: Int(response.status.code), url: url)
        }
    }
}
