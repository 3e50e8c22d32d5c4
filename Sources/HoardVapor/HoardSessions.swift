#if Vapor
import Hoard
public import Vapor
import Foundation

extension Application.Sessions.Provider {
    /// Sessions kept in the application's Hoard store (``Vapor/Application/hoard``): they survive
    /// a restart, every process that opens the store shares them, and they need no database.
    ///
    /// ```swift
    /// app.sessions.use(.hoard(idleTimeout: .seconds(30 * 60)))
    /// app.middleware.use(app.sessions.middleware)
    /// ```
    ///
    /// - Parameters:
    ///   - collection: the collection that holds the sessions.
    ///   - idleTimeout: how long a session lives without a request (see ``HoardSessions`` for how
    ///     it slides).
    public static func hoard(collection: String = "vapor-sessions", idleTimeout: Duration = .seconds(30 * 60)) -> Self {
        .init { app in
            let sessions = Result {
                try app.hoard.handle { store in (store, try store.collection(StoredSession.self, named: collection)) }
            }
            if case .failure(let error) = sessions {
                app.logger.error("hoard: the sessions' collection did not open: \(error)")
            }
            let driver = HoardSessions(sessions: sessions, idleTimeout: idleTimeout)
            app.sessions.use { _ in driver }
        }
    }
}

/// Vapor's `SessionDriver` over a Hoard collection; ``Vapor/Application/Sessions/Provider/hoard(collection:idleTimeout:)`` makes it.
///
/// - IDs are 32 bytes from the system's cryptographically secure generator, in base64url
///   (43 characters); a new session is stored only if its ID is not taken (checked and stored in
///   one transaction, so two processes cannot hand out one ID twice).
/// - The idle timeout slides: a session expires `idleTimeout` after the last write of it. Vapor's
///   middleware calls `updateSession` after every request that touched a session; this driver
///   writes then only when the data changed or less than half of the timeout is left. An
///   unchanged session therefore costs no commit on most requests, and a session with no
///   requests expires after between half of `idleTimeout` and all of it.
/// - An expired session reads as absent (the middleware then starts a new one); the store's
///   maintenance deletes it later.
public struct HoardSessions: AsyncSessionDriver {
    let sessions: Result<ApplicationHandle<(Store, HoardCollection<StoredSession>)>, any Error>
    /// How long a session lives without a request.
    public let idleTimeout: Duration

    /// Stores `data` as a new session and returns its ID.
    ///
    /// - Throws: a storage error; an ID already taken is drawn again, not thrown.
    public func createSession(_ data: SessionData, for request: Request) async throws -> SessionID {
        let (store, sessions) = try sessions.get().get()
        let idleTimeout = idleTimeout
        while true {
            let id = Self.newID()
            let stored = try await store.write { txn in
                guard try sessions.get(id, in: txn) == nil else { return false }
                try sessions.put(StoredSession(id: id, data: data.snapshot), expiry: .after(idleTimeout), in: txn)
                return true
            }
            if stored { return SessionID(string: id) }
        }
    }

    /// The session's data, or `nil` when there is no such session or it has expired.
    ///
    /// - Throws: a storage error.
    public func readSession(_ sessionID: SessionID, for request: Request) async throws -> SessionData? {
        try sessions.get().get().1.get(sessionID.string).map { SessionData(initialData: $0.data) }
    }

    /// Stores `data` as the session's, unless it is what is stored and more than half of the
    /// idle timeout is left; then nothing is written.
    ///
    /// - Throws: a storage error.
    public func updateSession(
        _ sessionID: SessionID, to data: SessionData, for request: Request
    ) async throws
        -> SessionID
    {
        let (store, sessions) = try sessions.get().get()
        let id = sessionID.string
        if try isCurrent(id, data.snapshot, in: sessions, of: store) { return sessionID }
        try await sessions.put(StoredSession(id: id, data: data.snapshot), expiry: .after(idleTimeout))
        return sessionID
    }

    /// Removes the session.
    ///
    /// - Throws: a storage error.
    public func deleteSession(_ sessionID: SessionID, for request: Request) async throws {
        _ = try await sessions.get().get().1.delete(sessionID.string)
    }

    /// Whether the stored session holds `data` and expires more than half of the timeout from now.
    private func isCurrent(
        _ id: String, _ data: [String: String], in sessions: HoardCollection<StoredSession>, of store: Store
    ) throws -> Bool {
        try store.read { txn in
            guard let stored = try sessions.get(id, in: txn), stored.data == data,
                let expiresAt = try sessions.header(of: id, in: txn)?.expiresAt
            else { return false }
            let now = (store.options.clock?() ?? Date()).timeIntervalSince1970
            let left = Double(expiresAt) / 1000 - now
            let (seconds, attoseconds) = idleTimeout.components
            return left > (Double(seconds) + Double(attoseconds) / 1e18) / 2
        }
    }

    /// 32 random bytes in base64url without padding.
    static func newID() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// One session: its ID and its data.
struct StoredSession: Identifiable, Sendable {
    var id: String
    var data: [String: String]
}

// Written out rather than by `@VariablyCoded`: HoardVapor builds without swift-syntax.
extension StoredSession: VariablyCodable {
    static let keySets = KeySets<StoredSession>(local: [1: [\.id: "ID", \.data: "DATA"]])

    init(from container: DecodingContainer<StoredSession>) throws {
        id = try container.decodeValue(for: \.id)
        data = try container.decodeValue(for: \.data)
    }

    func encode(to container: inout EncodingContainer<StoredSession>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(data, for: \.data)
    }
}
#endif
