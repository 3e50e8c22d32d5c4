import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization
import UsersModel

/// Load and checks for several replicas of the service (scripts/replicas.sh runs it).
@main
struct ReplicaLoad: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replica-load", abstract: "Reads, writes and checks across replicas of the users service.",
        subcommands: [Run.self, Verify.self, Bulk.self])
}

/// The ports of the replicas and of the upstream.
struct Endpoints: ParsableArguments {
    @Option(help: "The replicas' ports, separated by commas.") var services: String
    @Option(help: "The upstream's port.") var upstream: Int

    var ports: [Int] { services.split(separator: ",").compactMap { Int($0) } }
}

/// Reads on every replica at a rate, writes with a wait until every replica applied them, and the
/// count of stale reads: a read that began after a write was acknowledged as applied everywhere
/// and returned an older version of the user.
struct Run: AsyncParsableCommand {
    @OptionGroup var endpoints: Endpoints
    @Option(help: "How long, in seconds.") var seconds = 30
    @Option(help: "Reads a second, over all replicas.") var readsPerSecond = 10_000
    @Option(help: "Concurrent readers: each waits for its answer before its next read.") var readers = 64
    @Option(help: "Threads the readers share.") var readerThreads = 2
    @Option(help: "Writes a second (PUT /users/:id?wait=…), on the replicas in turn.") var writesPerSecond = 100
    @Option(help: "Users read and written: 1 through this.") var users = 1_000
    @Option(help: "How long a write waits for every replica to apply it, in milliseconds.") var waitMs = 2_000
    @Option(help: "How long a read may wait for its answer, in milliseconds.") var readTimeoutMs = 5_000
    @Flag(
        help:
            "A read that a replica does not answer (refused, reset, or past the timeout) is asked of another, as a load balancer would; counted as rerouted, not failed."
    )
    var reroute = false

    func validate() throws {
        guard !endpoints.ports.isEmpty else { throw ValidationError("--services names no port") }
        guard readers > 0, readerThreads > 0, readsPerSecond > 0, writesPerSecond > 0, users > 0 else {
            throw ValidationError(
                "--readers, --reader-threads, --reads-per-second, --writes-per-second and --users must be positive")
        }
    }

    func run() async throws {
        // The writers on a client of their own, the readers on plain connections of their own
        // (PlainConnection and PacedReaders say why): a write that waits must not hold a reader's
        // connection (a read would then fail in this tool, not in the service).
        let writeClient = makeClient(connections: 64)
        let ports = endpoints.ports
        let applied = AppliedVersions()
        let (readers, readerThreads, readsPerSecond, writesPerSecond, users, waitMs, readTimeoutMs, reroute) = (
            readers, readerThreads, readsPerSecond, writesPerSecond, users, waitMs, readTimeoutMs, reroute
        )
        let reads = Tally()
        let writes = Tally()
        let deadline = ContinuousClock.now + .seconds(seconds)
        let started = ContinuousClock.now
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await PacedReaders(
                    readers: readers, threads: readerThreads, readsPerSecond: readsPerSecond, users: users,
                    ports: ports, deadline: deadline, applied: applied, timeout: .milliseconds(readTimeoutMs),
                    reroute: reroute
                ).run(into: reads)
            }
            group.addTask {
                let interval = Duration.seconds(1.0 / Double(writesPerSecond))
                var next = ContinuousClock.now
                var turn = 0
                await withTaskGroup(of: Void.self) { writers in
                    while ContinuousClock.now < deadline {
                        try? await Task.sleep(until: next)
                        next += interval
                        turn += 1
                        let (id, port) = (Int64.random(in: 1...Int64(users)), ports[turn % ports.count])
                        writers.addTask {
                            let begin = ContinuousClock.now
                            do {
                                let (user, everywhere, position) = try await write(
                                    writeClient, port, id, waitMs: waitMs)
                                applied.wrote(id, version: user.version, position: position, applied: everywhere)
                                writes.add(ContinuousClock.now - begin, stale: !everywhere)
                            } catch {
                                writes.fail(error)
                            }
                        }
                    }
                }
            }
        }
        let elapsed = (ContinuousClock.now - started).seconds
        try? await writeClient.shutdown()
        print(
            "reads \(reads.summary(over: elapsed, staleName: "stale")); writes \(writes.summary(over: elapsed, staleName: "not applied everywhere in \(waitMs) ms"))"
        )
    }
}

/// Every replica serves, for each of the users, the version the upstream holds: a lower one is an
/// invalidation lost. With `--expect-stored`, none of the users may be a miss (their records
/// must still be in the replica's store).
struct Verify: AsyncParsableCommand {
    @OptionGroup var endpoints: Endpoints
    @Option(help: "The users to check: FIRST-LAST.") var ids: String
    @Flag(help: "Count the reads that missed the store (from the replicas' metrics).") var expectStored = false

    func run() async throws {
        let client = makeClient(connections: 16)
        defer { _ = client.shutdown() as EventLoopFuture<Void> }
        let range = try parseRange(ids)
        var lost = 0
        var checked = 0
        var misses = 0
        for port in endpoints.ports {
            let missesBefore = try await missCount(client, port)
            for batch in stride(from: range.lowerBound, through: range.upperBound, by: 100) {
                let ids = (batch...min(batch + 99, range.upperBound)).map(String.init).joined(separator: ",")
                let truth = try await get(client, endpoints.upstream, "/users?ids=\(ids)", as: [User].self)
                let served = try await get(client, port, "/users?ids=\(ids)", as: [User].self)
                let version = Dictionary(served.map { ($0.id, $0.version) }, uniquingKeysWith: max)
                for user in truth {
                    checked += 1
                    if (version[user.id] ?? -1) < user.version { lost += 1 }
                }
            }
            misses += try await missCount(client, port) - missesBefore
        }
        print(
            "verify \(ids) on \(endpoints.ports.count) replicas: \(checked) reads, \(lost) older than the upstream"
                + (expectStored ? ", \(misses) not in the store" : ""))
        if lost > 0 || (expectStored && misses > 0) { throw ExitCode(1) }
    }
}

/// New versions of many users through one replica, in batches spread over a time.
struct Bulk: AsyncParsableCommand {
    @Option(help: "The replica's port.") var service: Int
    @Option(help: "The users to write: FIRST-LAST.") var ids: String
    @Option(help: "Spread over this many seconds.") var seconds = 60
    @Option(help: "Users a request.") var batch = 1_000

    func run() async throws {
        let client = makeClient(connections: 4)
        defer { _ = client.shutdown() as EventLoopFuture<Void> }
        let range = try parseRange(ids)
        let batches = stride(from: range.lowerBound, through: range.upperBound, by: batch).map {
            $0...min($0 + Int64(batch) - 1, range.upperBound)
        }
        let interval = Duration.seconds(Double(seconds) / Double(max(1, batches.count)))
        var next = ContinuousClock.now
        var written = 0
        for ids in batches {
            try? await Task.sleep(until: next)
            next += interval
            var request = HTTPClientRequest(url: "http://127.0.0.1:\(service)/users/versions")
            request.method = .POST
            request.body = .bytes(ByteBuffer(string: ids.map(String.init).joined(separator: ",")))
            let response = try await client.execute(request, timeout: .seconds(30))
            _ = try await response.body.collect(upTo: 1 << 20)
            guard response.status == .ok else { throw ValidationError("POST /users/versions: \(response.status)") }
            written += ids.count
        }
        print("bulk: \(written) users written through :\(service) in \(batches.count) requests")
    }
}

// MARK: - HTTP

func makeClient(connections: Int) -> HTTPClient {
    var configuration = HTTPClient.Configuration()
    configuration.connectionPool = .init(
        idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: connections)
    return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
}

struct Unexpected: Error, CustomStringConvertible {
    var description: String
}

func get<T: Decodable>(_ client: HTTPClient, _ port: Int, _ path: String, as type: T.Type) async throws -> T {
    let response = try await client.execute(
        HTTPClientRequest(url: "http://127.0.0.1:\(port)\(path)"), timeout: .seconds(5))
    let body = try await response.body.collect(upTo: 16 << 20)
    guard response.status == .ok else { throw Unexpected(description: "GET \(path) on :\(port): \(response.status)") }
    return try JSONDecoder().decode(type, from: Data(body.readableBytesView), keySet: .api)
}

/// A write through replica `port`: the new version, and whether every replica applied it in time.
/// A write through replica `port`: the user's new version, whether every live replica applied it
/// within `waitMs`, and the log position that was waited for (the service's `Hoard-Position`).
func write(_ client: HTTPClient, _ port: Int, _ id: Int64, waitMs: Int) async throws -> (User, Bool, Int64?) {
    var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/users/\(id)?wait=\(waitMs)")
    request.method = .PUT
    let response = try await client.execute(request, timeout: .seconds(Int64(waitMs / 1000 + 10)))
    let body = try await response.body.collect(upTo: 1 << 20)
    guard response.status == .ok else {
        throw Unexpected(description: "PUT /users/\(id) on :\(port): \(response.status)")
    }
    let user = try JSONDecoder().decode(User.self, from: Data(body.readableBytesView), keySet: .api)
    return (
        user, response.headers.first(name: "Hoard-Applied") == "true",
        response.headers.first(name: "Hoard-Position").flatMap { Int64($0) }
    )
}

/// The replica's `hoard_gets_total` misses of users so far.
func missCount(_ client: HTTPClient, _ port: Int) async throws -> Int {
    let response = try await client.execute(
        HTTPClientRequest(url: "http://127.0.0.1:\(port)/metrics"), timeout: .seconds(5))
    let text = String(buffer: try await response.body.collect(upTo: 16 << 20))
    return text.split(separator: "\n").filter {
        $0.hasPrefix("hoard_gets_total{") && $0.contains(#"collection="User""#) && $0.contains(#"result="miss""#)
    }.compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }.reduce(0) { $0 + Int($1) }
}

func parseRange(_ text: String) throws -> ClosedRange<Int64> {
    let parts = text.split(separator: "-").compactMap { Int64($0) }
    guard parts.count == 2, parts[0] <= parts[1] else { throw ValidationError("a range is FIRST-LAST: \(text)") }
    return parts[0]...parts[1]
}

// MARK: - Figures

/// The highest version of each user that a write saw applied on every replica.
final class AppliedVersions: Sendable {
    private struct State {
        /// The lowest version a read of each user may return.
        var floors: [Int64: Int] = [:]
        /// The highest log position a write's wait returned `true` for: every replica applied
        /// every announcement up to it.
        var frontier: Int64 = 0
        /// Writes whose position is past the frontier: they raise a floor once it passes them.
        var pending: [(position: Int64, id: Int64, version: Int)] = []
    }
    private let state = Mutex(State())

    func floor(_ id: Int64) -> Int {
        state.withLock { $0.floors[id] ?? 0 }
    }

    /// A write of `version` of user `id`, announced at or before `position` (its flush's answer),
    /// whose wait for the replicas returned `applied`. A read that begins after a wait for a
    /// position returned `true` must see every write announced up to it: this write's once the
    /// frontier reaches its position, whichever write's wait moved it there.
    func wrote(_ id: Int64, version: Int, position: Int64?, applied: Bool) {
        state.withLock { state in
            guard let position else {
                // A service that does not say its position: the write's own wait alone.
                if applied { state.floors[id] = max(state.floors[id] ?? 0, version) }
                return
            }
            if applied && position > state.frontier {
                state.frontier = position
                state.pending.removeAll { write in
                    guard write.position <= position else { return false }
                    state.floors[write.id] = max(state.floors[write.id] ?? 0, write.version)
                    return true
                }
            }
            if position <= state.frontier {
                state.floors[id] = max(state.floors[id] ?? 0, version)
            } else {
                state.pending.append((position, id, version))
            }
        }
    }
}

/// Latencies, failures and a count of bad outcomes, from many tasks.
final class Tally: Sendable {
    /// What one task or thread saw: a reader thread keeps its own, and adds it once at its end.
    struct Part {
        var latencies: [Double] = []
        var failed = 0
        var stale = 0
        /// Outcomes that had something to be checked against (a read with a floor).
        var checked = 0
        /// Reads answered by another replica than the one first asked.
        var rerouted = 0
        var firstError: String?
        /// The first stale outcomes, each described, to find them in the replicas' logs.
        var staleOnes: [String] = []

        mutating func add(_ latency: Duration, stale: Bool, checked: Bool = false) {
            latencies.append(latency.seconds * 1_000)
            if stale { self.stale += 1 }
            if checked { self.checked += 1 }
        }

        /// A stale outcome, described by `what` (kept for the first 20).
        mutating func addStale(_ latency: Duration, _ what: @autoclosure () -> String) {
            add(latency, stale: true, checked: true)
            if staleOnes.count < 20 { staleOnes.append(what()) }
        }

        mutating func fail(_ error: any Error) {
            failed += 1
            if firstError == nil { firstError = "\(error)" }
        }
    }
    private let state = Mutex(Part())

    func add(_ latency: Duration, stale: Bool) {
        state.withLock { $0.add(latency, stale: stale) }
    }

    func fail(_ error: any Error) {
        state.withLock { $0.fail(error) }
    }

    func add(_ part: Part) {
        state.withLock {
            $0.latencies += part.latencies
            $0.failed += part.failed
            $0.stale += part.stale
            $0.checked += part.checked
            $0.rerouted += part.rerouted
            $0.staleOnes += part.staleOnes.prefix(max(0, 20 - $0.staleOnes.count))
            if $0.firstError == nil { $0.firstError = part.firstError }
        }
    }

    func summary(over seconds: Double, staleName: String) -> String {
        state.withLock { state in
            let sorted = state.latencies.sorted()
            func percentile(_ p: Double) -> String {
                sorted.isEmpty
                    ? "-" : String(format: "%.2f", sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))])
            }
            let total = sorted.count + state.failed
            return
                "\(total) (\(Int(Double(total) / seconds))/s), failed \(state.failed), \(staleName) \(state.stale), p50 \(percentile(0.5)) ms, p99 \(percentile(0.99)) ms"
                + (state.checked > 0 ? ", \(state.checked) checked against a write applied everywhere" : "")
                + (state.rerouted > 0 ? ", \(state.rerouted) rerouted to another replica" : "")
                + (state.firstError.map { " (first failure: \($0))" } ?? "")
                + state.staleOnes.map { "\n  stale: \($0)" }.joined()
        }
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
