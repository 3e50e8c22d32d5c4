#if Postgres
import Foundation
import Hoard
@testable import HoardPostgres
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The lease (docs/REPLICAS.md, "The lease"): a replica cut off from PostgreSQL, one way or both,
/// or paused, must not serve as fresh what a writer's wait says is gone; it serves its store again
/// once it has caught up; and a store runs one bus at a time. In the suite of the other bus
/// tests, which runs one test at a time: some of those stop PostgreSQL.
extension PostgresBusTests {
    /// Which way a partition cuts the replica's traffic with PostgreSQL.
    enum Cut: String, Sendable, CustomTestStringConvertible {
        case both, toPostgres, fromPostgres
        var testDescription: String { rawValue }
        /// What the proxy still forwards.
        var forwarded: TCPProxy.Directions {
            switch self {
            case .both: []
            case .toPostgres: .toClient
            case .fromPostgres: .toServer
            }
        }
    }

    @Test(arguments: [Cut.both, .toPostgres, .fromPostgres])
    func aPartitionedReplicaStopsServingWithinItsLeaseAndServesAgainOnceHealed(_ cut: Cut) async throws {
        let database = try await TestServer.makeDatabase()
        let proxy = try TCPProxy(target: try TestServer.port())
        defer { proxy.stop() }
        let lease = Duration.milliseconds(1_500)
        let (a, b) = (
            try Replica(database: database, lease: lease, heartbeat: .milliseconds(250), operationTimeout: .seconds(2)),
            try Replica(
                database: database, port: proxy.port, lease: lease, heartbeat: .milliseconds(250),
                operationTimeout: .seconds(2))
        )
        defer { [a, b].forEach { $0.remove() } }
        try await a.ready()
        try await b.ready()
        let ids = Array(Int64(1)...100)
        try await b.users.put(ids.map { User(id: $0, name: "v1") })
        try await eventuallyLive(a.bus, count: 2)
        let before = try ids.filter { try b.users.get($0) != nil }.count
        #expect(before == ids.count)

        let cutAt = ContinuousClock.now
        proxy.forward(cut.forwarded)
        // A writer changes user 1, and waits for every replica.
        try await a.users.invalidate(1)
        let sequence = try await a.bus.flush()
        let waiting = Task { () -> (applied: Bool, at: ContinuousClock.Instant) in
            (try await a.bus.waitUntilApplied(through: sequence, timeout: .seconds(20)), ContinuousClock.now)
        }
        try await until("B stopped serving its records") { try b.users.get(2) == nil }
        let stopped = cutAt.duration(to: .now)
        let wait = try await waiting.value
        #expect(wait.applied, "the wait did not return true while B was cut off")
        #expect(try b.users.get(1) == nil, "B served the changed record after the writer's wait returned")
        #expect(stopped <= lease + .seconds(1), "B served its records \(stopped) after the cut")
        let waited = cutAt.duration(to: wait.at)
        let margin = b.bus.configuration.leaseMargin
        #expect(waited <= lease + margin + .seconds(1), "the wait returned \(waited) after the cut")
        guard case .out = b.bus.status.lease else {
            Issue.record("B's status shows a lease while it is cut off: \(b.bus.status.lease)")
            return
        }
        #expect(b.store.replication.readsWithoutLease > 0)

        proxy.forward(.both)
        let healedAt = ContinuousClock.now
        try await until("B serves its records again") { try b.users.get(2) != nil }
        let back = healedAt.duration(to: .now)
        let after = try ids.filter { try b.users.get($0) != nil }.count
        #expect(try b.users.get(1) == nil, "B caught up: the changed record is gone")
        #expect(after == ids.count - 1 && Double(after) >= 0.9 * Double(before))
        #expect(back <= .seconds(2), "B served its records again \(back) after the partition healed")
        print(
            "lease (cut \(cut.rawValue)): B stopped serving \(stopped) after the cut; the wait returned after \(waited); B served again \(back) after healing"
        )
        await a.stop()
        await b.stop()
    }

    /// A replica's process stopped (SIGSTOP) past its lease: the writer's wait returns without it,
    /// and when the process resumes, its reads — which begin before any timer of its own has run —
    /// find no old value: the lease is checked on the read path against the clock.
    @Test func aPausedReplicaServesNoOldValueWhenItResumes() async throws {
        let database = try await TestServer.makeDatabase()
        let a = try Replica(database: database, lease: .seconds(1), heartbeat: .milliseconds(200))
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hoard-paused-\(UUID())").path
        defer {
            a.remove()
            try? FileManager.default.removeItem(atPath: directory)
        }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let child = try ChildProcess(
            try builtExecutable("BusReplica"),
            [directory + "/store", database, String(try TestServer.port()), "1000", "200"])
        #expect(try child.readLine() == "started")
        // Written once the bus holds its lease: the first catch-up resets the store, after which
        // what was written before it is not served as fresh.
        #expect(try child.ask("ready") == "ready")
        #expect(try child.ask("put 1 v1") == "ok")
        try await a.ready()
        try await eventuallyLive(a.bus, count: 2)
        #expect(try child.ask("watch 1 v1") == "watching")
        // Until the child has read the value (it is current: nothing changed it yet).
        var before = try report(child)
        while before.lastOldBegan == 0 { before = try report(child) }
        let gets = before.gets

        child.kill(SIGSTOP)
        let pausedAt = ContinuousClock.now
        try await a.users.invalidate(1)
        let sequence = try await a.bus.flush()
        #expect(try await a.bus.waitUntilApplied(through: sequence, timeout: .seconds(20)))
        let returned = monotonicNanoseconds()
        let waited = pausedAt.duration(to: .now)
        child.kill(SIGCONT)
        // Until the child has read for half a second after the wait returned.
        var last = try report(child)
        while last.lastBegan < returned + 500_000_000 { last = try report(child) }
        #expect(last.lastOldBegan < returned, "a get that began after the wait returned found the old value")
        #expect(last.gets > gets)
        #expect(waited <= .seconds(1) + a.bus.configuration.leaseMargin + .seconds(1), "the wait took \(waited)")
        _ = try? child.send("exit")
        _ = child.wait()
        await a.stop()
    }

    /// A store follows one bus at a time: a second, in this process or another, is refused with an
    /// error that names the store, and leaves the first one's lease alone; a bus whose process was
    /// killed leaves nothing behind that refuses the next.
    @Test func aSecondBusOnAStoreIsRefused() async throws {
        let database = try await TestServer.makeDatabase()
        let a = try Replica(database: database)
        defer { a.remove() }
        try await a.ready()
        let path = a.store.path
        let refusal = { (error: any Error) -> Bool in
            guard case PostgresBusError.storeHasABus(let store, _) = error else { return false }
            return store == path && "\(error)".contains(path)
        }
        let second = PostgresBus(store: a.store, configuration: a.bus.configuration, logger: TestServer.logger)
        await #expect(performing: { try await second.run() }, throws: refusal)
        #expect(a.store.replication.holdsLease, "the refused bus took the first one's lease")

        let arguments = [path, database, String(try TestServer.port()), "30000", "200"]
        let refused = try ChildProcess(try builtExecutable("BusReplica"), arguments)
        #expect(try refused.readLine() == "started")
        let answer = try refused.readLine() ?? ""
        #expect(answer.hasPrefix("refused ") && answer.contains(path), "\(answer)")
        #expect(refused.wait() == 3)
        await a.stop()

        // The other way round: a bus in another process holds the store.
        let holder = try ChildProcess(try builtExecutable("BusReplica"), arguments)
        #expect(try holder.readLine() == "started")
        #expect(try holder.ask("ready") == "ready")
        let third = PostgresBus(store: a.store, configuration: a.bus.configuration, logger: TestServer.logger)
        await #expect(performing: { try await third.run() }, throws: refusal)
        holder.kill()
        _ = holder.wait()
        let fourth = PostgresBus(store: a.store, configuration: a.bus.configuration, logger: TestServer.logger)
        let run = Task { try await fourth.run() }
        try await until("the bus of this process runs once the other was killed") {
            fourth.status.connected && a.store.replication.holdsLease
        }
        run.cancel()
        _ = await run.result
    }

    /// `report` of a BusReplica child: its gets, and when the last one and the last that found the old value began.
    private func report(_ child: ChildProcess) throws -> (gets: Int, lastBegan: Int64, lastOldBegan: Int64) {
        let words = try child.ask("report").split(separator: " ")
        guard words.count == 4, words[0] == "report", let gets = Int(words[1]), let last = Int64(words[2]),
            let old = Int64(words[3])
        else { throw TestSupportError("unexpected report: \(words)") }
        return (gets, last, old)
    }
}

/// CLOCK_MONOTONIC in nanoseconds: the clock BusReplica notes its gets on.
func monotonicNanoseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
}

extension TestServer {
    /// The test server's port.
    static func port() throws -> Int {
        guard let text = ProcessInfo.processInfo.environment["HOARD_PG_PORT"], let port = Int(text) else {
            throw MissingServer()
        }
        return port
    }
}
#endif
