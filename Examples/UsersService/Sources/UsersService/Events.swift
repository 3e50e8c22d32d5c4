import Foundation
import Hoard
import Hummingbird
import ServiceLifecycle
import UsersModel

/// `GET /users/:id/events`: server-sent events of a user as the store holds it: `event: user`
/// with the user's JSON, first the stored value and then each new one (a fetch that stored it, a
/// synchronize, another replica's invalidation), and `event: absent` when there is none (not
/// stored yet, invalidated by a write, expired). Fed by `observe`, so it reports what this
/// process and any other process writing the store commit, and never reads upstream itself.
///
/// The stream ends when the service begins a graceful shutdown, or at the next change after
/// the client has gone (a write to a closed connection fails).
func addEventRoutes(to router: Router<BasicRequestContext>, users: HoardCollection<User>) {
    router.get("users/:id/events") { _, context -> Response in
        let id = try context.parameters.require("id", as: Int64.self)
        let values = try users.observe(id)
        return Response(
            status: .ok, headers: [.contentType: "text/event-stream", .cacheControl: "no-cache"],
            body: ResponseBody { writer in
                for try await user in values.cancelOnGracefulShutdown() {
                    try await writer.write(ByteBuffer(string: try event(user, id: id)))
                }
                try await writer.finish(nil)
            })
    }
}

/// One server-sent event: the user in the API's key names, or its absence.
func event(_ user: User?, id: Int64) throws -> String {
    guard let user else { return "event: absent\ndata: {\"id\":\(id)}\n\n" }
    let data = try JSONEncoder().encode(user, keySet: .api)
    return "event: user\ndata: \(String(decoding: data, as: UTF8.self))\n\n"
}
