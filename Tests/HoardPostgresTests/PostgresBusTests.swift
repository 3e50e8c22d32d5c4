#if Postgres
import Foundation
@_spi(LMDB) import Hoard
@testable import HoardPostgres
import HoardTesting
import Logging
import PostgresNIO
import Synchronization
import TestSupport
import Testing

/// A user as the replicas cache it.
struct User: VariablyCodable, Identifiable, Equatable, Sendable {
    var id: Int64
    var name: String
    static let keySets = KeySets<User>(local: [1: [\.id: "ID", \.name: "NAME"]])
    init(id: Int64, name: String) { (self.id, self.name) = (id, name) }
    init(from container: DecodingContainer<User>) throws {
        id = try container.decodeValue(for: \.id)
        name = try container.decodeValue(for: \.name)
    }
    func encode(to container: inout EncodingContainer<User>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(name, for: \.name)
    }
}

struct PgCtlFailed: Error {
    var arguments: [String]
    var status: Int32
    var output: String
}

struct MissingServer: Error, CustomStringConvertible {
    var description: String {
        "HOARD_PG_PORT is not set: run the tests through tools/test.sh, which starts a PostgreSQL for them"
    }
}

/// The PostgreSQL that tools/scripts/postgres.sh started; every test gets a database of its own.
enum TestServer {
    static let logger = Logger(label: "hoard.postgres.tests")

    static func configuration(
        database: String, port: Int? = nil, user: String? = nil
    ) throws
        -> PostgresClient.Configuration
    {
        let env = ProcessInfo.processInfo.environment
        guard let portText = env["HOARD_PG_PORT"], let serverPort = Int(portText) else { throw MissingServer() }
        var configuration = PostgresClient.Configuration(
            host: env["HOARD_PG_HOST"] ?? "127.0.0.1", port: port ?? serverPort,
            username: user ?? env["HOARD_PG_USER"] ?? "hoard", password: nil, database: database, tls: .disable)
        configuration.options.connectTimeout = .seconds(2)
        return configuration
    }

    /// Runs pg_ctl on the test server's cluster, as its owner.
    static func pgCtl(_ arguments: String...) throws {
        let env = ProcessInfo.processInfo.environment
        guard let bin = env["HOARD_PG_BIN"], let data = env["HOARD_PG_DATA"] else { throw MissingServer() }
        let owner = (env["HOARD_PG_AS"] ?? "").split(separator: " ").map(String.init)
        // runProcess (posix_spawn and waitpid), not Foundation's Process, whose waitUntilExit did
        // not return here once pg_ctl had ended.
        // HOARD_PG_AS is a command prefix whose first word is an absolute path (postgres.sh).
        let result = try runProcess(
            owner.first ?? bin + "/pg_ctl",
            (owner.isEmpty ? [] : Array(owner.dropFirst()) + [bin + "/pg_ctl"]) + ["-D", data, "-w"] + arguments)
        guard result.status == 0 else {
            throw PgCtlFailed(arguments: arguments, status: result.status, output: result.stdout + result.stderr)
        }
    }

    /// Starts the test server again with the options tools/scripts/postgres.sh gave it.
    static func startServer() throws {
        let env = ProcessInfo.processInfo.environment
        guard let port = env["HOARD_PG_PORT"], let data = env["HOARD_PG_DATA"] else { throw MissingServer() }
        let sockets = URL(fileURLWithPath: data).deletingLastPathComponent().path
        try pgCtl(
            "-l", sockets + "/server.log", "-o",
            "-p \(port) -k \(sockets) -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off", "start")
    }

    /// A new, empty database.
    static func makeDatabase() async throws -> String {
        let name = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        try await admin { client in
            // The name is made here of hex digits, never of outside text.
            try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: logger)
        }
        return name
    }

    /// Runs `body` with a client of `database` on the test server.
    @discardableResult
    static func admin<R: Sendable>(
        database: String = "postgres", _ body: @Sendable (PostgresClient) async throws -> R
    ) async throws -> R {
        let client = PostgresClient(configuration: try configuration(database: database), backgroundLogger: logger)
        return try await withThrowingTaskGroup(of: R?.self) { group in
            group.addTask {
                await client.run()
                return nil
            }
            defer { group.cancelAll() }
            return try await body(client)
        }
    }
}

/// A store and its bus, running until the test ends.
final class Replica: Sendable {
    let directory: String
    let store: Store
    let bus: PostgresBus
    let users: HoardCollection<User>
    private let task: Task<Void, any Error>

    init(
        database: String, directory: String? = nil, port: Int? = nil, user: String? = nil,
        lease: Duration = .seconds(30), heartbeat: Duration = .milliseconds(200),
        operationTimeout: Duration = .seconds(10), sharedFills: PostgresBus.SharedFills? = nil
    ) throws {
        let directory =
            directory
            ?? FileManager.default.temporaryDirectory.appendingPathComponent(
                "hoard-replica-\(UUID().uuidString)"
            ).path
        self.directory = directory
        store = try Store(path: directory + "/store", options: .testing())
        users = try store.collection(User.self)
        var configuration = PostgresBus.Configuration(
            postgres: try TestServer.configuration(database: database, port: port, user: user),
            heartbeat: heartbeat, lease: lease, backoff: (.milliseconds(20), .milliseconds(200)),
            operationTimeout: operationTimeout)
        configuration.replicaName = directory
        configuration.sharedFills = sharedFills
        let bus = PostgresBus(store: store, configuration: configuration, logger: TestServer.logger)
        self.bus = bus
        task = Task { try await bus.run() }
    }

    /// Stops the bus; fails the test if it has not stopped within 20 s (and goes on: awaiting a
    /// task's value cannot be cancelled, so the wait is raced without a task group).
    func stop() async {
        task.cancel()
        let task = self.task
        do {
            try await withStopLimit { _ = try? await task.value }
        } catch {
            Issue.record("the bus did not stop within 20 s of its cancellation: \(bus.status)")
        }
    }

    /// Waits, without sleeping, until the bus has applied through `sequence` and the store holds
    /// its lease (or fails the test after `limit`).
    func waitApplied(_ sequence: Int64, limit: Duration = .seconds(20)) async throws {
        let start = ContinuousClock.now
        while bus.status.applied < sequence || !store.replication.holdsLease {
            if ContinuousClock.now - start > limit {
                Issue.record("replica did not apply through \(sequence) within \(limit): \(bus.status)")
                return
            }
            await Task.yield()
        }
    }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }

    /// Waits until the bus is connected, has caught up once and holds its lease.
    func ready() async throws {
        try await until("the bus connected and caught up") {
            let position = try store.replication.position(of: bus.configuration.name)
            return bus.status.connected && position != nil && store.replication.leaseDeadline != nil
        }
    }
}

@Suite(.serialized, .timeLimit(.minutes(3))) struct PostgresBusTests {
    @Test func anInvalidationReachesTheOtherReplica() async throws {
        let database = try await TestServer.makeDatabase()
        let (a, b) = (try Replica(database: database), try Replica(database: database))
        defer { [a, b].forEach { $0.remove() } }
        // Both replicas registered and caught up once before the change (a first catch-up resets).
        try await a.ready()
        try await b.ready()
        try await a.users.put([User(id: 1, name: "ada"), User(id: 2, name: "grace")])
        try await b.users.put([User(id: 1, name: "ada"), User(id: 2, name: "grace")])
        #expect(try b.users.get(1) != nil)
        try await eventuallyLive(a.bus, count: 2)

        try await a.users.invalidate(1)
        let sequence = try await a.bus.flush()
        #expect(sequence > 0)
        #expect(try await a.bus.waitUntilApplied(through: sequence, timeout: .seconds(20)))
        #expect(try b.users.get(1) == nil)
        #expect(try b.users.get(2)?.name == "grace")
        #expect(try a.replication(pending: 0))
        let replicas = try await a.bus.replicas()
        #expect(replicas.count == 2 && replicas.allSatisfy { $0.applied >= sequence && $0.lagChanges == 0 })

        // A replica that stops leaves: nobody waits for it (its lease would be waited out).
        await b.stop()
        #expect(try await a.bus.replicas().filter(\.live).map(\.store) == [try a.store.replication.identity()])
        try await a.users.invalidate(2)
        let next = try await a.bus.flush()
        #expect(try await a.bus.waitUntilApplied(through: next, timeout: .seconds(5)))
        await a.stop()
    }

    /// The rule of what an invalidation leaves, over PostgreSQL: in a collection that serves stale
    /// records on a failed fetch, the writer and the other replica keep the records marked
    /// expired, and a read through a failing upstream answers the same on both, by ID, by tag and
    /// for a clear; with the upstream back, both fetch.
    @Test func invalidationsLeaveTheSameOnEveryReplica() async throws {
        let database = try await TestServer.makeDatabase()
        let (a, b) = (try Replica(database: database), try Replica(database: database))
        defer { [a, b].forEach { $0.remove() } }
        try await a.ready()
        try await b.ready()
        try await eventuallyLive(a.bus, count: 2)
        let upstreamUp = Mutex(false)
        let fetch: @Sendable (Int64) async throws -> User? = { id in
            guard upstreamUp.withLock({ $0 }) else {
                throw PgCtlFailed(arguments: ["upstream down"], status: 1, output: "")
            }
            return User(id: id, name: "new")
        }
        let freshness = Freshness(
            staleWhileRevalidate: .seconds(5), staleIfError: .seconds(600), retryFailedFetchAfter: .zero)
        for kind in ["id", "tag", "all"] {
            let (usersA, usersB) = (
                try a.store.collection(User.self, named: "users-\(kind)", freshness: freshness),
                try b.store.collection(User.self, named: "users-\(kind)", freshness: freshness)
            )
            for users in [usersA, usersB] {
                try await users.put((1...3).map { User(id: $0, name: "old") }, tags: ["team"])
            }
            switch kind {
            case "id": try await usersA.invalidate([1, 2, 3])
            case "tag": try await usersA.invalidate(tag: "team")
            default: try await usersA.invalidateAll()
            }
            let sequence = try await a.bus.flush()
            #expect(try await a.bus.waitUntilApplied(through: sequence, timeout: .seconds(20)))
            let kept = (try usersA.count(), try usersB.count())
            #expect(kept == (0, 0), "\(kind): records kept \(kept)")
            func answers(_ users: HoardCollection<User>) async -> [String] {
                var names: [String] = []
                for id in Int64(1)...3 { names.append((try? await users.get(id, orFetch: fetch))??.name ?? "error") }
                return names
            }
            upstreamUp.withLock { $0 = false }
            let down = (await answers(usersA), await answers(usersB))
            #expect(down.0 == ["error", "error", "error"] && down.1 == down.0, "\(kind), upstream down: \(down)")
            upstreamUp.withLock { $0 = true }
            let up = (await answers(usersA), await answers(usersB))
            #expect(up.0 == ["new", "new", "new"] && up.1 == up.0, "\(kind), upstream up: \(up)")
        }
        await a.stop()
        await b.stop()
    }

    @Test func aStoppedReplicaCatchesUpExactlyWhenItReturns() async throws {
        let database = try await TestServer.makeDatabase()
        let a = try Replica(database: database)
        var first: Replica? = try Replica(database: database)
        let directory = first!.directory
        defer { try? FileManager.default.removeItem(atPath: directory) }
        defer { a.remove() }
        try await first!.ready()
        try await a.ready()
        let all = (1...2_000).map { User(id: $0, name: "v1") }
        try await first!.users.put(all)
        #expect(try first!.users.count() == 2_000)
        await first!.stop()
        first = nil

        // 1,000 of the 2,000 change while B is down, in batches of different sizes.
        var changed: [Int64] = []
        for start in stride(from: 1, through: 2_000, by: 50) {
            let ids = (Int64(start)..<Int64(start + 25)).map { $0 }
            changed += ids
            try await a.users.invalidate(ids)
        }
        let sequence = try await a.bus.flush()
        let b = try Replica(database: database, directory: directory)
        try await b.waitApplied(sequence)
        let left = try Set(b.users.scan().map(\.id))
        #expect(left == Set(1...2_000).subtracting(changed), "B kept exactly the records that did not change")
        #expect(b.store.replication.resets == 0, "B caught up from its position, without a reset")
        #expect(try b.users.get(1999)?.name == "v1")
        await a.stop()
        await b.stop()
    }

    /// An operating-system crash may undo a store's last commit (durability `.cache`), after the
    /// bus had published the invalidation it held: the log has the change, the store has the old
    /// record back. Once it returns, the store must not serve that record.
    @Test func anOwnInvalidationThatACrashUndidIsAppliedFromTheLog() async throws {
        let database = try await TestServer.makeDatabase()
        let b = try Replica(database: database)
        var first: Replica? = try Replica(database: database)
        let directory = first!.directory
        defer { try? FileManager.default.removeItem(atPath: directory) }
        defer { b.remove() }
        try await first!.ready()
        try await b.ready()
        try await first!.users.put([User(id: 1, name: "v1"), User(id: 2, name: "v1")])
        // The store as the undone commit leaves it: as it was before the invalidation.
        try first!.store.environment.copy(to: directory + "/before-the-crash")
        try await first!.users.invalidate(1)
        let sequence = try await first!.bus.flush()
        #expect(try await first!.bus.waitUntilApplied(through: sequence, timeout: .seconds(20)))
        await first!.stop()
        first = nil
        try FileManager.default.removeItem(atPath: directory + "/store")
        try FileManager.default.moveItem(atPath: directory + "/before-the-crash", toPath: directory + "/store")

        let a = try Replica(database: database, directory: directory)
        try await a.waitApplied(sequence)
        #expect(try a.users.get(1) == nil, "the invalidation the crash undid is applied again from the log")
        #expect(try a.users.get(2)?.name == "v1")
        #expect(a.store.replication.resets == 0, "caught up exactly")
        // Later catch-ups skip the store's own changes again: a record written after its own
        // invalidation stays.
        try await a.users.invalidate(2)
        try await a.users.put(User(id: 2, name: "v2"))
        let next = try await a.bus.flush()
        try await a.waitApplied(next)
        try await until("the store's position passed its own change") {
            (try a.store.replication.position(of: a.bus.configuration.name)?.sequence ?? 0) >= next
        }
        #expect(try a.users.get(2)?.name == "v2")
        await a.stop()
        await b.stop()
    }

    @Test("a tag and a clear reach the other replica through the log, live and after it was stopped")
    func tagsAndClearsTravel() async throws {
        let database = try await TestServer.makeDatabase()
        let a = try Replica(database: database)
        var first: Replica? = try Replica(database: database)
        let directory = first!.directory
        defer { try? FileManager.default.removeItem(atPath: directory) }
        defer { a.remove() }
        try await a.ready()
        try await first!.ready()
        for id in Int64(1)...10 {
            try await first!.users.put(User(id: id, name: "v1"), tags: id <= 5 ? ["team:1"] : ["team:2"])
        }
        try await first!.store.collection(User.self, named: "other").put(User(id: 1, name: "v1"))
        try await eventuallyLive(a.bus, count: 2)

        let version = { @Sendable () async throws -> Int in
            try await TestServer.admin(database: database) { client in
                var found = 0
                let rows = try await client.query("SELECT schema_version FROM hoard_bus", logger: TestServer.logger)
                for try await (version) in rows.decode(Int.self) { found = version }
                return found
            }
        }
        #expect(try await version() == 2, "a bus without tags stays readable by replicas of version 2")
        #expect(try await a.users.invalidate(tag: "team:1") == 0, "the writer holds none of them")
        let sequence = try await a.bus.flush()
        #expect(try await a.bus.waitUntilApplied(through: sequence, timeout: .seconds(20)))
        #expect(try first!.users.scan().map(\.id) == Array(6...10))
        #expect(try first!.users.ids(taggedWith: "team:1").isEmpty)
        #expect(try await version() == 3, "a tag makes the schema one that replicas of version 2 refuse")
        await first!.stop()
        first = nil

        // While the replica is stopped: a tag and a clear of another collection.
        try await a.users.invalidate(tag: "team:2")
        try await a.store.collection(User.self, named: "other").invalidateAll()
        let next = try await a.bus.flush()
        let b = try Replica(database: database, directory: directory)
        try await b.waitApplied(next)
        #expect(try b.users.count() == 0)
        #expect(try b.store.collection(User.self, named: "other").count() == 0)
        #expect(b.store.replication.resets == 0, "caught up from its position, without a reset")
        await a.stop()
        await b.stop()
    }

    @Test func aTriggerAnnouncesWritesThatHoardDidNotMake() async throws {
        let database = try await TestServer.makeDatabase()
        let b = try Replica(database: database)
        defer { b.remove() }
        try await b.ready()
        try await b.users.put([User(id: 7, name: "seven"), User(id: -3, name: "minus three")])
        #expect(try b.users.get(7) != nil)
        try await TestServer.admin(database: database) { client in
            try await client.query("CREATE TABLE users (id bigint PRIMARY KEY, name text)", logger: TestServer.logger)
            try await client.query(
                """
                CREATE TRIGGER users_announce AFTER INSERT OR UPDATE OR DELETE ON users
                FOR EACH ROW EXECUTE FUNCTION hoard_announce_row('User', 'id', 'int')
                """, logger: TestServer.logger)
            try await client.query(
                "INSERT INTO users VALUES (7, 'seven'), (-3, 'minus three')", logger: TestServer.logger)
        }
        let head = try await TestServer.admin(database: database) { client in
            try await client.query("SELECT max(id) FROM hoard_changes", logger: TestServer.logger)
                .decode(Int64.self).reduce(0) { max($0, $1) }
        }
        try await b.waitApplied(head)
        #expect(try b.users.get(7) == nil)
        #expect(try b.users.get(-3) == nil, "hoard_key_int encodes negative IDs as Hoard does")
        await b.stop()
    }

    @Test func rowsThatDoNotDecodeAreSkippedAndThePositionAdvances() async throws {
        let database = try await TestServer.makeDatabase()
        let b = try Replica(database: database)
        defer { b.remove() }
        try await b.ready()
        try await b.users.put([User(id: 1, name: "one"), User(id: 2, name: "two")])
        let head = try await TestServer.admin(database: database) { client in
            // A key array with a NULL in it, a collection the store does not have, then a good change.
            try await client.query(
                "SELECT hoard_publish(NULL, 'User', ARRAY[NULL::bytea])", logger: TestServer.logger)
            try await client.query(
                "SELECT hoard_publish(NULL, 'Nowhere', ARRAY[hoard_key_int(1)])", logger: TestServer.logger)
            return try await client.query(
                "SELECT hoard_publish(NULL, 'User', ARRAY[hoard_key_int(2)])", logger: TestServer.logger
            ).decode(Int64.self).reduce(0) { max($0, $1) }
        }
        try await b.waitApplied(head)
        #expect(b.bus.status.skippedRows == 1)
        #expect(try b.users.get(1)?.name == "one")
        #expect(try b.users.get(2) == nil)
        await b.stop()
    }

    @Test func aChangeItsNotificationCarriesIsAppliedWithoutReadingTheLog() async throws {
        let database = try await TestServer.makeDatabase()
        // Heartbeats (which read the log) far apart: every log read here is one the test caused.
        let (a, b) = (try Replica(database: database, heartbeat: .seconds(60)), try Replica(database: database))
        defer { [a, b].forEach { $0.remove() } }
        try await a.ready()
        try await b.ready()
        try await a.users.put([User(id: 1, name: "one"), User(id: 2, name: "two"), User(id: 3, name: "three")])
        // A first change, which A may still read from the log (its first reading may not be over).
        try await b.users.invalidate(3)
        try await a.waitApplied(try await b.bus.flush())
        let readsBefore = a.bus.logReads
        try await b.users.invalidate([1, 2])
        let sequence = try await b.bus.flush()
        try await a.waitApplied(sequence)
        #expect(try a.users.get(1) == nil && a.users.get(2) == nil && a.users.get(3) == nil)
        #expect(a.bus.logReads == readsBefore, "applied from the notifications alone")
        #expect(try a.store.replication.position(of: "postgres")?.sequence == sequence)
        await a.stop()
        await b.stop()
    }

    @Test func aWaitForReplicasIsAnsweredWithoutReadingTheLog() async throws {
        let database = try await TestServer.makeDatabase()
        // Heartbeats (which read the log) far apart: every log read here is one the test caused.
        let (a, b) = (
            try Replica(database: database, heartbeat: .seconds(60)),
            try Replica(database: database, heartbeat: .seconds(60))
        )
        defer { [a, b].forEach { $0.remove() } }
        try await a.ready()
        try await b.ready()
        try await a.users.put([User(id: 1, name: "one"), User(id: 2, name: "two")])
        // A first change and wait, which either replica may still answer by reading the log (its
        // first reading may not be over).
        try await b.users.invalidate(2)
        #expect(try await b.bus.waitUntilApplied(through: try await b.bus.flush(), timeout: .seconds(20)))
        let (readsA, readsB) = (a.bus.logReads, b.bus.logReads)
        try await b.users.invalidate(1)
        let sequence = try await b.bus.flush()
        #expect(try await b.bus.waitUntilApplied(through: sequence, timeout: .seconds(20)))
        #expect(try a.users.get(1) == nil)
        #expect(a.bus.logReads == readsA && b.bus.logReads == readsB, "answered from the notifications alone")
        // B reported a position past its own change, which its store must hold (the log is
        // trimmed to the lowest position reported).
        #expect(try b.store.replication.position(of: "postgres")?.sequence == sequence)
        await a.stop()
        await b.stop()
    }

    @Test func aChangeWithoutItsNotificationIsFoundInTheLog() async throws {
        let database = try await TestServer.makeDatabase()
        let b = try Replica(database: database, heartbeat: .seconds(60))
        defer { b.remove() }
        try await b.ready()
        try await b.users.put((1...4).map { User(id: $0, name: "\($0)") })
        let readsBefore = b.bus.logReads
        struct RolledBack: Error {}
        let head = try await TestServer.admin(database: database) { client in
            // A change appended without a notification (as if B had missed it), and a publication
            // rolled back (its number taken, no row); then one announced as usual, whose
            // notification's previous number is neither B's position nor the missed change's.
            try await client.query(
                """
                INSERT INTO hoard_changes (id, origin, collection, keys)
                VALUES (nextval('hoard_change_ids'), NULL, 'User', ARRAY[hoard_key_int(1)])
                """, logger: TestServer.logger)
            await #expect(throws: PostgresTransactionError.self) {
                try await client.withTransaction(logger: TestServer.logger) { connection in
                    try await connection.query(
                        "SELECT hoard_publish(NULL, 'User', ARRAY[hoard_key_int(2)])", logger: TestServer.logger)
                    throw RolledBack()
                }
            }
            return try await client.query(
                "SELECT hoard_publish(NULL, 'User', ARRAY[hoard_key_int(3)])", logger: TestServer.logger
            ).decode(Int64.self).reduce(0) { max($0, $1) }
        }
        try await b.waitApplied(head)
        #expect(try b.users.get(1) == nil, "the change without a notification was applied")
        #expect(try b.users.get(2)?.name == "2", "the rolled-back one was not")
        #expect(try b.users.get(3) == nil && b.users.get(4)?.name == "4")
        #expect(b.bus.logReads > readsBefore)
        await b.stop()
    }

    @Test func aRecreatedLogResetsTheReplica() async throws {
        let database = try await TestServer.makeDatabase()
        var first: Replica? = try Replica(database: database)
        let directory = first!.directory
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await first!.ready()
        try await first!.users.put((1...50).map { User(id: $0, name: "old") })
        #expect(try first!.users.get(50) != nil)
        let logBefore = try first!.store.replication.position(of: "postgres")?.log
        await first!.stop()
        first = nil
        try await TestServer.admin(database: database) { client in
            try await client.query("DROP TABLE hoard_bus, hoard_changes, hoard_replicas", logger: TestServer.logger)
        }
        let b = try Replica(database: database, directory: directory)
        try await until("the replica reset") { b.store.replication.resets == 1 }
        let logAfter = try b.store.replication.position(of: "postgres")?.log
        #expect(logAfter != nil && logAfter != logBefore)
        let fresh = try (1...50).filter { try b.users.get($0) != nil }
        #expect(fresh.isEmpty, "served as fresh after the log was recreated: \(fresh)")
        await b.stop()
    }

    /// After a reset, the store's own changes past the reset's position are the running bus's, even
    /// when a recreated log numbers them below the head its first publication had read.
    @Test func afterARecreatedLogABusSkipsItsOwnChangesAgain() async throws {
        let database = try await TestServer.makeDatabase()
        let (a, b) = (try Replica(database: database), try Replica(database: database))
        defer { [a, b].forEach { $0.remove() } }
        try await a.ready()
        try await b.ready()
        // The others' changes first, so that the head before A's first publication is past 1.
        for id in Int64(1)...5 { try await b.users.invalidate(id) }
        try await a.waitApplied(try await b.bus.flush())
        try await a.users.invalidate(100)
        _ = try await a.bus.flush()
        await a.stop()
        await b.stop()
        try await TestServer.admin(database: database) { client in
            try await client.query("DROP TABLE hoard_bus, hoard_changes, hoard_replicas", logger: TestServer.logger)
            try await client.query("DROP SEQUENCE hoard_change_ids", logger: TestServer.logger)
        }
        // The same bus runs again, and resets on the new log, which numbers from 1 again.
        let resetsBefore = a.store.replication.resets
        let again = Task { try await a.bus.run() }
        try await until("A reset on the new log") { a.store.replication.resets > resetsBefore }
        try await a.users.invalidate(7)
        let own = try await a.bus.flush()
        try await a.users.put(User(id: 7, name: "written after its own invalidation"))
        try await until("A's position passed its own change") {
            (try a.store.replication.position(of: a.bus.configuration.name)?.sequence ?? 0) >= own
        }
        #expect(try a.users.get(7)?.name == "written after its own invalidation")
        again.cancel()
        _ = await again.result
    }

    /// PostgreSQL stopped (immediate shutdown) and started again: writes made while it is down
    /// commit locally and wait in the outbox, reads go on, and once it is back every replica
    /// reconnects and applies them, no more and no fewer.
    @Test func postgresStoppedAndStartedLosesNoInvalidation() async throws {
        let database = try await TestServer.makeDatabase()
        let (a, b) = (try Replica(database: database), try Replica(database: database))
        defer { [a, b].forEach { $0.remove() } }
        try await a.ready()
        try await b.ready()
        try await b.users.put((1...100).map { User(id: $0, name: "v1") })

        try TestServer.pgCtl("-m", "immediate", "stop")
        try await a.users.invalidate((1...50).map { $0 })
        #expect(try a.store.replication.pendingCount() == 50)
        #expect(try b.users.get(1)?.name == "v1", "reads go on while PostgreSQL is down")
        try await until("the buses noticed") { !a.bus.status.connected && !b.bus.status.connected }
        try TestServer.startServer()

        try await b.ready()
        try await until("the outbox was published") { try a.store.replication.pendingCount() == 0 }
        var flushed: Int64?
        for _ in 0..<10 where flushed == nil { flushed = try? await a.bus.flush() }
        let sequence = try #require(flushed, "flush failed ten times after PostgreSQL came back")
        try await b.waitApplied(sequence)
        let left = try Set(b.users.scan().map(\.id))
        #expect(left == Set(51...100))
        #expect(b.bus.status.reconnects >= 1)
        #expect(b.store.replication.resets == 1, "caught up from its position, without a reset")
        await a.stop()
        await b.stop()
    }

    /// PostgreSQL away for longer than the lease: every lease runs out meanwhile. A replica whose
    /// process stopped during the outage, without being able to say so, is not waited for once
    /// PostgreSQL is back (its lease ran out), and its store serves nothing as fresh until its bus
    /// runs again and has caught up: no moment at which it serves the record that changed.
    @Test func afterAnOutageAReplicaServesNothingUntilItHasCaughtUp() async throws {
        let database = try await TestServer.makeDatabase()
        let lease = Duration.seconds(2)
        let (a, b) = (try Replica(database: database, lease: lease), try Replica(database: database, lease: lease))
        defer { [a, b].forEach { $0.remove() } }
        try await a.ready()
        try await b.ready()
        try await b.users.put([User(id: 1, name: "v1"), User(id: 2, name: "v1")])

        try TestServer.pgCtl("-m", "fast", "stop")
        let stopped = ContinuousClock.now
        try await until("the buses noticed") { !a.bus.status.connected && !b.bus.status.connected }
        try await until("A's lease ran out") { !a.store.replication.holdsLease }
        #expect(ContinuousClock.now - stopped < lease + .seconds(1), "A's lease outlived the outage's start")
        // (Stopped after that measure, which its stop's own time must not lengthen.)
        await b.stop()  // it cannot record that it left: PostgreSQL is down
        #expect(try b.users.get(2) == nil, "a store whose bus stopped serves nothing as fresh")
        try TestServer.startServer()
        try await until("A connected again") { a.bus.status.connected }

        try await a.users.invalidate(1)
        var flushed: Int64?
        for _ in 0..<10 where flushed == nil { flushed = try? await a.bus.flush() }
        let sequence = try #require(flushed, "flush failed ten times after PostgreSQL came back")
        #expect(try await a.bus.waitUntilApplied(through: sequence, timeout: .seconds(20)))
        let again = PostgresBus(store: b.store, configuration: b.bus.configuration, logger: TestServer.logger)
        let run = Task { try await again.run() }
        var served = false
        try await until("B serves its store again") {
            #expect(try b.users.get(1) == nil, "B served the record that changed")
            served = try b.users.get(2) != nil
            return served
        }
        let position = try b.store.replication.position(of: "postgres")?.sequence ?? 0
        #expect(served && position >= sequence)
        run.cancel()
        _ = await run.result
        await a.stop()
    }

    /// PostgreSQL away for 20 s: postgres-nio's pool by then retries only every 3 to 4 s (its
    /// backoff grows to a minute). Every replica replaces its failed pool by a fresh one, which
    /// tries at once (the test's longest backoff is 200 ms), and must be connected again within
    /// 2 s of PostgreSQL accepting connections: 0.04 to 0.16 s measured on a quiet machine, up to
    /// 1.23 s with a build running beside the tests. With the pool's own backoff the replicas took
    /// 1.5 to 1.9 s in two runs, and can take up to its interval.
    @Test func afterALongOutageEveryReplicaReconnectsWithinTwoSeconds() async throws {
        let database = try await TestServer.makeDatabase()
        let replicas = try (0..<4).map { _ in try Replica(database: database) }
        defer { replicas.forEach { $0.remove() } }
        for replica in replicas { try await replica.ready() }

        try TestServer.pgCtl("-m", "fast", "stop")
        let stopped = ContinuousClock.now
        try await until("the buses noticed") { replicas.allSatisfy { !$0.bus.status.connected } }
        try await Task.sleep(until: stopped + .seconds(20))  // the fault's length
        try TestServer.startServer()
        let up = ContinuousClock.now
        var connected: [Duration?] = Array(repeating: nil, count: replicas.count)
        while connected.contains(where: { $0 == nil }) && ContinuousClock.now - up < .seconds(30) {
            for (index, replica) in replicas.enumerated()
            where connected[index] == nil && replica.bus.status.connected {
                connected[index] = ContinuousClock.now - up
            }
            await Task.yield()
        }
        #expect(connected.allSatisfy { ($0 ?? .seconds(60)) <= .seconds(2) }, "connected again after \(connected)")
        let replaced = replicas.map(\.bus.pools.generation)
        #expect(replaced.allSatisfy { $0 >= 1 }, "pools replaced during the outage: \(replaced)")
        for replica in replicas { await replica.stop() }
    }

    @Test func anOlderSchemaIsBroughtUpANewerOneRefused() async throws {
        let database = try await TestServer.makeDatabase()
        let b = try Replica(database: database)
        defer { b.remove() }
        // Connected, so its listening connection has run its own migration: none runs again (that
        // happens at a reconnection) while the schema is changed below.
        try await b.ready()
        try await b.bus.migrate()
        try await b.bus.migrate()  // idempotent
        // A database of version 1 (before replicas said that they stopped) is brought up to 2 (it
        // becomes 3 with its first tag: tagsAndClearsTravel).
        let schema = { @Sendable () async throws -> (Int, Int) in
            try await TestServer.admin(database: database) { client in
                let rows = try await client.query(
                    """
                    SELECT schema_version, (SELECT count(*)::int FROM information_schema.columns
                        WHERE table_name = 'hoard_replicas' AND column_name = 'left_at') FROM hoard_bus
                    """, logger: TestServer.logger)
                var found = (0, 0)
                for try await row in rows.decode((Int, Int).self) { found = row }
                return found
            }
        }
        try await TestServer.admin(database: database) { client in
            try await client.query("ALTER TABLE hoard_replicas DROP COLUMN left_at", logger: TestServer.logger)
            try await client.query("UPDATE hoard_bus SET schema_version = 1", logger: TestServer.logger)
        }
        #expect(try await schema() == (1, 0))
        try await b.bus.migrate()
        #expect(try await schema() == (2, 1))

        try await TestServer.admin(database: database) { client in
            try await client.query("UPDATE hoard_bus SET schema_version = 99", logger: TestServer.logger)
        }
        await #expect {
            try await b.bus.migrate()
        } throws: { error in
            "\(error)".contains("version 99") && "\(error)".contains("Nothing was changed")
        }
        await b.stop()
    }

    /// A server that refuses, a role that does not exist: run() reports it and goes on trying;
    /// reads and local writes go on, and the announcements wait in the outbox.
    @Test(arguments: ["refused", "no such role"])
    func withoutPostgresReadsAndWritesGoOn(_ failure: String) async throws {
        let database = try await TestServer.makeDatabase()
        let closedPort = try closedLoopbackPort()
        let b =
            failure == "refused"
            ? try Replica(database: database, port: closedPort)
            : try Replica(database: database, user: "nobody_here")
        defer { b.remove() }
        try await b.users.put(User(id: 1, name: "kept"))
        try await b.users.invalidate(2)
        try await until("the bus reported an error") { b.bus.status.lastError != nil }
        // Never connected, so never a lease: the store does not vouch for what it holds. A get
        // answers as for an expired record, read-through asks the upstream; the record stays.
        #expect(try b.users.get(1) == nil)
        #expect(try await b.users.get(1, orFetch: { User(id: $0, name: "fetched") })?.name == "fetched")
        #expect(try b.users.header(of: 1) != nil)
        #expect(b.store.replication.readsWithoutLease >= 2)
        guard case .out = b.bus.status.lease else {
            Issue.record("a bus that never connected shows a lease: \(b.bus.status.lease)")
            return
        }
        #expect(try b.store.replication.pendingCount() == 1)
        #expect(!b.bus.status.connected)
        if failure != "refused" {
            #expect(b.bus.status.lastError?.contains("nobody_here") == true, "\(b.bus.status.lastError ?? "")")
        }
        await b.stop()
    }
}

extension Replica {
    func replication(pending: Int) throws -> Bool { try store.replication.pendingCount() == pending }
}

struct StopLimit: Error {}

/// Runs `body`, or throws after 20 s without waiting for it.
func withStopLimit(_ body: @escaping @Sendable () async -> Void) async throws {
    let done = AsyncStream<Bool>.makeStream()
    Task {
        await body()
        done.continuation.yield(true)
    }
    Task {
        try? await Task.sleep(for: .seconds(20))
        done.continuation.yield(false)
    }
    for await stopped in done.stream {
        if stopped { return }
        throw StopLimit()
    }
}

/// Waits until `count` replicas are live in `hoard_replicas`.
func eventuallyLive(_ bus: PostgresBus, count: Int) async throws {
    let start = ContinuousClock.now
    while ContinuousClock.now - start < .seconds(20) {
        if let replicas = try? await bus.replicas(), replicas.filter(\.live).count >= count { return }
        await Task.yield()
    }
    Issue.record("fewer than \(count) live replicas after 20 s")
}

/// Waits, yielding, until `condition` holds; fails the test after 20 s.
func until(_ what: String, _ condition: () throws -> Bool) async throws {
    let start = ContinuousClock.now
    while try !condition() {
        if ContinuousClock.now - start > .seconds(20) {
            Issue.record("never happened within 20 s: \(what)")
            return
        }
        await Task.yield()
    }
}

/// A loopback port nothing listens on: one the kernel gave and took back.
func closedLoopbackPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
    }
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}
#endif
