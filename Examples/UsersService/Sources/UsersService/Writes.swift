import Foundation
import Hoard
import HTTPTypes
import Hummingbird
import Synchronization
import UsersModel

#if Replicas
import HoardPostgres
#endif

// The write path: the upstream first (the source of truth), then the invalidation, which removes
// the user from this replica's store and, with replicas, is announced to the others.

#if Replicas
typealias Bus = PostgresBus
#else
/// Built without the Replicas trait: no bus.
enum Bus {}
#endif

extension HTTPField.Name {
    /// Whether every live replica applied the write's invalidation (with `?wait=MS`).
    static let hoardApplied = HTTPField.Name("Hoard-Applied")!
    /// The bus's log position the wait was for: the write's announcement is at or before it.
    static let hoardPosition = HTTPField.Name("Hoard-Position")!
}

func addWriteRoutes(
    to router: Router<BasicRequestContext>, users: HoardCollection<User>, api: UpstreamClient, bus: Bus?
) {
    // `?wait=MS`: answer once every live replica has applied the invalidation (read-your-writes on
    // any replica), or after MS milliseconds; the header `Hoard-Applied` says which.
    router.put("users/:id") { request, context -> Response in
        let id = try context.parameters.require("id", as: Int64.self)
        let written = try await upstreamErrorsAsBadGateway { try await api.write(id) }
        guard let written else { throw HTTPError(.notFound, message: "no user \(id)") }
        try await users.invalidate(id)
        var response = try json(written)
        if let (applied, position) = try await waitUntilApplied(bus, request) {
            response.headers[.hoardApplied] = applied ? "true" : "false"
            if let position { response.headers[.hoardPosition] = String(position) }
        }
        return response
    }
    // Many users at once (an import, a batch job): a new version of each upstream, then one
    // invalidation of them all. The body: IDs separated by commas, at most 10,000.
    router.post("users/versions") { request, context -> Response in
        let body = try await request.body.collect(upTo: 1 << 20)
        let ids = try String(buffer: body).split(separator: ",").map { part in
            guard let id = Int64(part.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw HTTPError(.badRequest, message: "not an ID: \(part)")
            }
            return id
        }
        guard ids.count <= 10_000 else { throw HTTPError(.badRequest, message: "at most 10,000 IDs a request") }
        let written = try await upstreamErrorsAsBadGateway { try await api.write(ids) }
        try await users.invalidate(written.map(\.id))
        var response = Response(
            status: .ok, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: #"{"written":\#(written.count)}"#)))
        if let (applied, position) = try await waitUntilApplied(bus, request) {
            response.headers[.hoardApplied] = applied ? "true" : "false"
            if let position { response.headers[.hoardPosition] = String(position) }
        }
        return response
    }
    #if Replicas
    if let bus { addReplicationRoute(to: router, bus: bus) }
    #endif
}

/// With `?wait=MS` and a bus: whether every live replica applied this replica's announcements
/// within MS milliseconds (`false` too when PostgreSQL cannot be reached: the write is stored
/// upstream and its announcement waits in the outbox), and the log position waited for (`nil` when
/// the announcements could not be published); `nil` without either.
func waitUntilApplied(_ bus: Bus?, _ request: Request) async throws -> (Bool, Int64?)? {
    #if Replicas
    guard let bus, let wait = request.uri.queryParameters.get("wait").flatMap(Int.init) else { return nil }
    let deadline = ContinuousClock.now + .milliseconds(wait)
    let published = Published()
    let applied = await withTaskGroup(of: Bool.self) { group in
        group.addTask {
            guard let sequence = try? await bus.flush() else { return false }
            published.position.withLock { $0 = sequence }
            let left = deadline - ContinuousClock.now
            return (try? await bus.waitUntilApplied(through: sequence, timeout: max(left, .zero))) ?? false
        }
        group.addTask {
            try? await Task.sleep(until: deadline)
            return false
        }
        let first = await group.next() ?? false
        group.cancelAll()
        return first
    }
    return (applied, published.position.withLock { $0 })
    #else
    return nil
    #endif
}

/// The position a write's flush returned, once it did.
final class Published: Sendable {
    let position = Mutex<Int64?>(nil)
}
