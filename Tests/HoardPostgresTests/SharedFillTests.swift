#if Postgres
import Foundation
import Hoard
@testable import HoardPostgres
import Logging
import PostgresNIO
import Synchronization
import Testing

/// A gate an upstream waits at until the test opens it.
final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiting: [CheckedContinuation<Void, Never>])>((false, []))

    func wait() async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Bool in
                if state.open { return true }
                state.waiting.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    func open() {
        let waiting = state.withLock { state in
            state.open = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }
}

/// Shared fills over a real PostgreSQL: one fetch for all the replicas, fenced by the log.
@Suite(.serialized, .timeLimit(.minutes(3))) struct SharedFillTests {
    static let sharing = PostgresBus.SharedFills(collections: ["User"], lease: .seconds(2))

    static func replicas(_ count: Int, _ database: String) async throws -> [Replica] {
        let replicas = try (0..<count).map { _ in try Replica(database: database, sharedFills: sharing) }
        for replica in replicas { try await replica.ready() }
        try await eventuallyLive(replicas[0].bus, count: count)
        return replicas
    }

    /// The records `hoard_fills` holds, by name, for the test to look at.
    static func storedFills(_ database: String) async throws -> Int {
        try await TestServer.admin(database: database) { client in
            var count = 0
            let rows = try await client.query(
                "SELECT count(*)::int FROM hoard_fills WHERE record IS NOT NULL", logger: TestServer.logger)
            for try await (found) in rows.decode(Int.self) { count = found }
            return count
        }
    }

    @Test func theReplicasFetchAKeyOnceForAll() async throws {
        let database = try await TestServer.makeDatabase()
        let replicas = try await Self.replicas(3, database)
        defer { replicas.forEach { $0.remove() } }
        #expect(replicas[0].users.name == "User")
        let calls = Mutex(0)
        let gate = Gate()
        let fetch: @Sendable (Int64) async throws -> User? = { id in
            calls.withLock { $0 += 1 }
            await gate.wait()
            return User(id: id, name: "fetched")
        }
        let first = Task { try await replicas[0].users.get(1, orFetch: fetch) }
        try await until("the first replica calls the upstream") { calls.withLock { $0 } == 1 }
        let others = replicas[1...].map { replica in Task { try await replica.users.get(1, orFetch: fetch) } }
        try await until("the others wait for its fill") {
            replicas[1...].allSatisfy { $0.bus.sharedFillStatistics.waits == 1 }
        }
        gate.open()
        #expect(try await first.value?.name == "fetched")
        for task in others { #expect(try await task.value?.name == "fetched") }
        #expect(calls.withLock { $0 } == 1, "one call of the upstream for three replicas")
        for replica in replicas { #expect(try replica.users.get(1)?.name == "fetched", "stored in every replica") }
        #expect(replicas[0].bus.sharedFillStatistics.leases == 1)
        #expect(replicas[1...].allSatisfy { $0.bus.sharedFillStatistics.hits == 1 })

        // A replica that starts with an empty store takes the record from the table.
        let late = try Replica(database: database, sharedFills: Self.sharing)
        defer { late.remove() }
        try await late.ready()
        #expect(try await late.users.get(1, orFetch: fetch)?.name == "fetched")
        #expect(calls.withLock { $0 } == 1)
        let statistics = late.bus.sharedFillStatistics
        #expect(statistics.hits == 1 && statistics.waits == 0 && statistics.leases == 0, "\(statistics)")
        #expect(try await Self.storedFills(database) == 1)
        for replica in replicas + [late] { await replica.stop() }
    }

    /// A fill whose fetch began before an invalidation (by ID, by tag, by clear) is returned to
    /// the read that asked for it and stored nowhere; one stored before it is deleted with it:
    /// once the invalidation's wait returned, no replica gets the old record from the table.
    @Test(arguments: ["id", "tag", "all"]) func aFillIsFencedByTheLog(_ kind: String) async throws {
        let database = try await TestServer.makeDatabase()
        let replicas = try await Self.replicas(3, database)
        defer { replicas.forEach { $0.remove() } }
        let (a, b, c) = (replicas[0], replicas[1], replicas[2])
        let source = Mutex("v1")
        let readSource = Mutex(0)
        let gate = Gate()
        // Reads the source of truth, then waits: the change overtakes the fetch.
        let slow: @Sendable (Int64, User?) async throws -> Revalidation<User> = { id, _ in
            let name = source.withLock { $0 }
            readSource.withLock { $0 += 1 }
            await gate.wait()
            return .model(User(id: id, name: name), tags: ["team"])
        }
        let fresh: @Sendable (Int64, User?) async throws -> Revalidation<User> = { id, _ in
            .model(User(id: id, name: source.withLock { $0 }), tags: ["team"])
        }
        func change(to name: String) async throws {
            source.withLock { $0 = name }
            switch kind {
            case "id": try await b.users.invalidate(1)
            case "tag": _ = try await b.users.invalidate(tag: "team")
            default: _ = try await b.users.invalidateAll()
            }
            let position = try await b.bus.flush()
            #expect(try await b.bus.waitUntilApplied(through: position, timeout: .seconds(20)))
        }

        let reading = Task { try await a.users.get(1, orRevalidate: slow) }
        try await until("a's fetch read the source") { readSource.withLock { $0 } == 1 }
        #expect(a.bus.sharedFillStatistics.leases == 1)
        try await change(to: "v2")
        gate.open()
        #expect(try await reading.value?.name == "v1", "the read that began before the change gets its fetch")
        try await until("a's lease was voided") { a.bus.sharedFillStatistics.voided == 1 }
        #expect(try await Self.storedFills(database) == 0, "\(kind): the voided fill is stored nowhere")
        #expect(try await c.users.get(1, orRevalidate: fresh)?.name == "v2", "\(kind): c fetches, it is not served v1")
        #expect(try await a.users.get(1, orRevalidate: fresh)?.name == "v2", "\(kind): a did not keep v1")

        // A fill stored before a change goes with it.
        try await until("c's fill is stored") { c.bus.sharedFillStatistics.leases == 1 }
        while try await Self.storedFills(database) == 0 { await Task.yield() }
        try await change(to: "v3")
        #expect(try await Self.storedFills(database) == 0, "\(kind): the change deleted the fill")
        let late = try Replica(database: database, sharedFills: Self.sharing)
        defer { late.remove() }
        try await late.ready()
        #expect(try await late.users.get(1, orRevalidate: fresh)?.name == "v3")
        for replica in replicas + [late] { await replica.stop() }
    }

    /// A holder that died with the lease (taken here as a killed replica leaves it: a lease row
    /// nobody ends) holds its waiters until the lease runs out, and no longer: one of them then
    /// takes the lease and fetches.
    @Test func theWaitersOfADeadHolderGoOnWhenItsLeaseRunsOut() async throws {
        let database = try await TestServer.makeDatabase()
        let replicas = try await Self.replicas(2, database)
        defer { replicas.forEach { $0.remove() } }
        let lease = Duration.seconds(1)
        let key = ByteBuffer(bytes: Int64(1).keyBytes)
        let taken = ContinuousClock.now
        try await TestServer.admin(database: database) { client in
            _ = try await client.query(
                "SELECT * FROM hoard_fill_begin('User', ARRAY[\(key)], \(Int64(1_000)))", logger: TestServer.logger)
        }
        let calls = Mutex(0)
        let fetch: @Sendable (Int64) async throws -> User? = { id in
            calls.withLock { $0 += 1 }
            return User(id: id, name: "fetched")
        }
        let reads = replicas.map { replica in Task { try await replica.users.get(1, orFetch: fetch) } }
        for read in reads { #expect(try await read.value?.name == "fetched") }
        let elapsed = ContinuousClock.now - taken
        #expect(elapsed >= lease - .milliseconds(50), "they waited for the lease (\(elapsed))")
        #expect(elapsed < lease + .seconds(3), "and went on once it ran out (\(elapsed))")
        #expect(calls.withLock { $0 } == 1, "one of them fetched, for both")
        let statistics = replicas.map(\.bus.sharedFillStatistics)
        #expect(statistics.map(\.waits).reduce(0, +) >= 1 && statistics.map(\.leases).reduce(0, +) == 1)
        for replica in replicas { await replica.stop() }
    }

    /// PostgreSQL out of reach (a partition the bus has not noticed yet, then a connection gone):
    /// a read fetches by itself, within the tier's timeout, and does not fail.
    @Test func withoutPostgreSQLAReadFetchesByItself() async throws {
        let database = try await TestServer.makeDatabase()
        let proxy = try TCPProxy(target: try TestServer.port())
        let replica = try Replica(database: database, port: proxy.port, sharedFills: Self.sharing)
        defer { replica.remove() }
        try await replica.ready()
        let fetch: @Sendable (Int64) async throws -> User? = { id in User(id: id, name: "fetched") }
        proxy.forward([])
        let start = ContinuousClock.now
        #expect(try await replica.users.get(1, orFetch: fetch)?.name == "fetched")
        let elapsed = ContinuousClock.now - start
        #expect(elapsed < Self.sharing.timeout + .seconds(2), "bounded by the tier's timeout (\(elapsed))")
        #expect(replica.bus.sharedFillStatistics.bypassed == 1)
        proxy.stop()
        try await until("the bus sees PostgreSQL gone") { !replica.bus.status.connected }
        #expect(try await replica.users.get(2, orFetch: fetch)?.name == "fetched")
        #expect(replica.bus.sharedFillStatistics.bypassed == 2)
        await replica.stop()
    }
}
#endif
