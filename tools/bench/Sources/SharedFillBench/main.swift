// shared-fill-bench: what shared fills (PostgresBus.SharedFills) save the upstream, with replicas
// over PostgreSQL. tools/bench/shared-fills.sh starts a throwaway PostgreSQL and runs it.
//
// R replicas in this process, each with its own store and PostgresBus on one database, read a hot
// set of K keys at --rate gets a second in all (each get a read-through call, sent on schedule,
// not after the previous one returned), through an upstream that answers after --latency-ms; and
// every key is invalidated about once every --invalidate-ms (one key at a time, on the replicas in
// turn, each announced by its bus). Each run has the same load twice, shared fills off and then
// on, on a database of its own:
//   calls per invalidation  the upstream's calls while the keys are invalidated, over the
//                           invalidations (the store of every replica misses each key once after
//                           each of its invalidations)
//   miss latency            p50 and p99 of the gets that missed their store
//   newcomer                a replica started with an empty store while the others run reads
//                           --newcomer-gets gets at --newcomer-rate a second: the share of them
//                           that reached the upstream
// Then the cost of a hit on a store that shares its fills, against one that does not.
//
//   shared-fill-bench [--replicas 8] [--keys 100] [--rate 2000] [--invalidate-ms 2000] [--seconds 15]
//                     [--rounds 5] [--latency-ms 5] [--newcomer-gets 10000] [--newcomer-rate 1000]
import BenchModels
import BenchSupport
import Foundation
import Hoard
import HoardPostgres
import Logging
import PostgresNIO
import Synchronization

let replicaCount = option("replicas", default: 8)
let keys = option("keys", default: 100)
let rate = option("rate", default: 2_000)
let invalidateMilliseconds = option("invalidate-ms", default: 2_000)
let seconds = option("seconds", default: 15)
let rounds = option("rounds", default: 5)
let latency = Duration.milliseconds(option("latency-ms", default: 5))
let newcomerGets = option("newcomer-gets", default: 10_000)
let newcomerRate = option("newcomer-rate", default: 1_000)

let quiet: Logger = {
    var logger = Logger(label: "shared-fill-bench")
    logger.logLevel = .critical
    return logger
}()

func postgres(database: String) -> PostgresClient.Configuration {
    let env = ProcessInfo.processInfo.environment
    guard let port = env["HOARD_PG_PORT"].flatMap(Int.init) else {
        FileHandle.standardError.write(
            Data("shared-fill-bench: HOARD_PG_PORT is not set; run tools/bench/shared-fills.sh\n".utf8))
        exit(2)
    }
    return PostgresClient.Configuration(
        host: env["HOARD_PG_HOST"] ?? "127.0.0.1", port: port, username: env["HOARD_PG_USER"] ?? "hoard",
        password: nil, database: database, tls: .disable)
}

/// A new database for a phase: the fills and the log of one do not reach the next.
func makeDatabase() async throws -> String {
    let name = "fills_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
    let env = ProcessInfo.processInfo.environment
    let client = PostgresClient(
        configuration: postgres(database: env["HOARD_PG_DATABASE"] ?? "hoard"), backgroundLogger: quiet)
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { await client.run() }
        // The name is made here of hex digits, never of outside text.
        try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: quiet)
        group.cancelAll()
    }
    return name
}

func member(_ id: Int, version: Int) -> Member {
    Member(
        id: Int64(id), name: "member \(id) v\(version)", email: "m\(id)@example.com", age: 30, city: "Lyon",
        followers: 0)
}

/// The source of truth: each key's version, and the calls it answered.
final class Upstream: Sendable {
    let versions: Mutex<[Int]>
    let calls = Atomic<Int>(0)

    init() { versions = Mutex(Array(repeating: 0, count: keys)) }

    func fetch(_ id: Int64) async throws -> Member? {
        calls.add(1, ordering: .relaxed)
        try await Task.sleep(for: latency)
        return member(Int(id), version: versions.withLock { $0[Int(id)] })
    }
}

final class Replica: Sendable {
    let store: Store
    let members: HoardCollection<Member>
    let bus: PostgresBus
    let run: Task<Void, any Error>
    /// The upstream's calls this replica made.
    let calls = Atomic<Int>(0)

    init(_ directory: String, index: Int, database: String, sharing: Bool) throws {
        var options = Store.Options.cache
        options.otherProcesses = .off
        options.durability = .riskStoreOnOSCrash
        store = try Store(path: "\(directory)/replica-\(index)", options: options)
        members = try store.collection(Member.self)
        var configuration = PostgresBus.Configuration(postgres: postgres(database: database))
        configuration.replicaName = "replica-\(index)"
        configuration.sharedFills = sharing ? .init(collections: [members.name]) : nil
        let bus = PostgresBus(store: store, configuration: configuration, logger: quiet)
        self.bus = bus
        run = Task { try await bus.run() }
    }

    /// A get as a service makes it; how long it took when the store missed, `nil` for a hit.
    func get(_ key: Int, _ upstream: Upstream) async throws -> UInt64? {
        if try members.get(Int64(key)) != nil { return nil }
        let start = now()
        _ = try await members.get(Int64(key)) { id in
            self.calls.add(1, ordering: .relaxed)
            return try await upstream.fetch(id)
        }
        return now() - start
    }

    /// Waits until the bus is connected, the store has caught up once and holds its lease.
    func following() async throws {
        func ready() throws -> Bool {
            try bus.status.connected && store.replication.position(of: bus.configuration.name) != nil
                && store.replication.leaseDeadline != nil
        }
        while try !ready() { try await Task.sleep(for: .milliseconds(10)) }
    }

    func stop() async {
        run.cancel()
        _ = await run.result
    }
}

/// Whether the readers stop.
final class Flag: Sendable {
    let raised = Atomic<Bool>(false)
}

/// The latencies of the gets that missed.
final class Latencies: Sendable {
    let values = Mutex<[UInt64]>([])
}

/// Gets of random hot keys on `replica` at `perSecond`, each in a task of its own, until `stop`
/// (or `count` of them); the latencies of the misses go to `misses`.
func load(
    _ replica: Replica, _ upstream: Upstream, perSecond: Int, count: Int = .max, seed: UInt64, stop: Flag,
    misses: Latencies
) async {
    let interval = UInt64(1_000_000_000 / max(perSecond, 1))
    var random = SplitMix64(seed: seed)
    let start = now()
    await withDiscardingTaskGroup { group in
        var sent = 0
        while sent < count && !stop.raised.load(ordering: .relaxed) {
            let due = start + UInt64(sent) * interval
            let current = now()
            if current < due { try? await Task.sleep(for: .nanoseconds(due - current)) }
            let key = Int(random.next() % UInt64(keys))
            group.addTask {
                if let nanos = try? await replica.get(key, upstream) { misses.values.withLock { $0.append(nanos) } }
            }
            sent += 1
        }
    }
}

struct Phase {
    var callsPerInvalidation: Double
    var missP50: Double
    var missP99: Double
    var newcomerShare: Double
    var statistics: [PostgresBus.SharedFillStatistics]
}

func percentile(_ sorted: [UInt64], _ p: Double) -> Double {
    sorted.isEmpty ? .nan : Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]) / 1e6
}

/// One invalidation every --invalidate-ms / --keys, for `duration`: the keys in turn from `first`,
/// on the replicas in turn, each key about once every --invalidate-ms. The upstream changes first,
/// as a service writes it first. Returns how many it made.
func invalidate(
    _ replicas: [Replica], _ upstream: Upstream, from first: Int, for duration: Duration
) async throws -> Int {
    let step = UInt64(invalidateMilliseconds) * 1_000_000 / UInt64(keys)
    let start = now()
    let end = start + UInt64(duration.components.seconds) * 1_000_000_000
    var made = 0
    while now() < end {
        let due = start + UInt64(made) * step
        let current = now()
        if current < due { try await Task.sleep(for: .nanoseconds(due - current)) }
        let key = (first + made) % keys
        upstream.versions.withLock { $0[key] += 1 }
        try await replicas[(first + made) % replicas.count].members.invalidate(Int64(key))
        made += 1
    }
    return made
}

func phase(sharing: Bool, run: Int) async throws -> Phase {
    let database = try await makeDatabase()
    let directory = temporaryDirectory("shared-fill-bench")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let upstream = Upstream()
    let replicas = try (0..<replicaCount).map {
        try Replica(directory, index: $0, database: database, sharing: sharing)
    }
    for replica in replicas { try await replica.following() }
    // Every replica holds every key before the invalidations begin.
    for replica in replicas { for key in 0..<keys { _ = try await replica.get(key, upstream) } }

    let stop = Flag()
    let misses = Latencies()
    let readers = Task {
        await withDiscardingTaskGroup { group in
            for (index, replica) in replicas.enumerated() {
                group.addTask {
                    await load(
                        replica, upstream, perSecond: rate / replicaCount, seed: UInt64(run * 100 + index),
                        stop: stop, misses: misses)
                }
            }
        }
    }
    misses.values.withLock { $0 = [] }
    let callsBefore = upstream.calls.load(ordering: .relaxed)
    let madeInvalidations = try await invalidate(replicas, upstream, from: 0, for: .seconds(seconds))
    // The refills of the last invalidations: the reads go on for a second without any.
    try await Task.sleep(for: .seconds(1))
    let calls = upstream.calls.load(ordering: .relaxed) - callsBefore
    let missed = misses.values.withLock { $0.sorted() }

    // A replica with an empty store joins while the others read and the keys change.
    let newcomer = try Replica(directory, index: replicaCount, database: database, sharing: sharing)
    try await newcomer.following()
    async let changing = invalidate(
        replicas, upstream, from: madeInvalidations, for: .seconds(newcomerGets / max(newcomerRate, 1) + 1))
    await load(
        newcomer, upstream, perSecond: newcomerRate, count: newcomerGets, seed: UInt64(run * 100 + 99), stop: Flag(),
        misses: Latencies())
    _ = try await changing
    let newcomerShare = Double(newcomer.calls.load(ordering: .relaxed)) / Double(newcomerGets)

    stop.raised.store(true, ordering: .relaxed)
    await readers.value
    let statistics = (replicas + [newcomer]).map(\.bus.sharedFillStatistics)
    for replica in replicas + [newcomer] { await replica.stop() }
    return Phase(
        callsPerInvalidation: Double(calls) / Double(madeInvalidations), missP50: percentile(missed, 0.5),
        missP99: percentile(missed, 0.99), newcomerShare: newcomerShare, statistics: statistics)
}

/// A read-through hit on a store that shares its fills, against the same store sharing none: a
/// hit does not reach the tier, which this tier would fail if it did.
struct RefusingTier: SharedFillTier {
    struct Reached: Error {}
    func fill<Fetched: Sendable>(
        collection: String, keys: [[UInt8]],
        upstream: @escaping @Sendable ([[UInt8]]) async throws -> (fetched: Fetched, records: [[UInt8]: SharedRecord])
    ) async throws -> SharedFill<Fetched> {
        throw Reached()
    }
}

func hitCost() async throws -> (ratio: Double, runs: [Double]) {
    let directory = temporaryDirectory("shared-fill-bench-hit")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let store = try Store(path: directory + "/store", options: .cache)
    let members = try store.collection(Member.self)
    try await members.put((0..<10_000).map { member($0, version: 0) })
    let fetch: @Sendable (Int64) async throws -> Member? = { _ in nil }
    var random = SplitMix64(seed: 11)
    let ids = (0..<20_000).map { _ in Int64(random.next() % 10_000) }
    func slice() async throws -> UInt64 {
        let start = now()
        for id in ids { _ = try await members.get(id, orFetch: fetch) }
        return now() - start
    }
    var ratios: [Double] = []
    for round in 0..<(rounds + 1) {
        var (plain, sharing): (UInt64, UInt64) = (0, 0)
        // Ten slices a side, taking turns: the machine's speed drifts.
        for turn in 0..<20 {
            let shares = turn.isMultiple(of: 2) == round.isMultiple(of: 2)
            let generation = shares ? store.replication.shareFills(of: [members.name], through: RefusingTier()) : nil
            let nanos = try await slice()
            if let generation { store.replication.stopSharingFills(generation) }
            if shares { sharing += nanos } else { plain += nanos }
        }
        if round > 0 { ratios.append(Double(sharing) / Double(plain)) }  // the first warms up
    }
    return (median(ratios), ratios)
}

print(
    "shared-fill-bench: \(replicaCount) replicas, \(keys) hot keys, \(rate) gets/s in all, each key invalidated"
        + " about every \(invalidateMilliseconds) ms, upstream \(latency), \(seconds) s a phase, \(rounds) runs")
let two = { (value: Double) in String(format: "%.2f", value) }
var results: [(off: Phase, on: Phase)] = []
for run in 0..<rounds {
    let off = try await phase(sharing: false, run: run)
    let on = try await phase(sharing: true, run: run)
    results.append((off, on))
    print(
        "run \(run + 1): calls per invalidation off \(two(off.callsPerInvalidation))"
            + " on \(two(on.callsPerInvalidation)); miss p50/p99 off \(two(off.missP50))/\(two(off.missP99)) ms"
            + " on \(two(on.missP50))/\(two(on.missP99)) ms;"
            + " newcomer's gets to the upstream off \(two(off.newcomerShare * 100))% on \(two(on.newcomerShare * 100))%"
    )
    let all = on.statistics
    let sum = { (counter: KeyPath<PostgresBus.SharedFillStatistics, Int>) in
        all.map { $0[keyPath: counter] }.reduce(0, +)
    }
    print(
        "       shared fills: hits \(sum(\.hits)) misses \(sum(\.misses)) waits \(sum(\.waits))"
            + " leases \(sum(\.leases)) voided \(sum(\.voided)) bypassed \(sum(\.bypassed))")
}
func row(_ name: String, _ value: (Phase) -> Double) {
    print("| \(name) | \(two(median(results.map { value($0.off) }))) | \(two(median(results.map { value($0.on) }))) |")
}
print("")
print("| | off (median of \(rounds)) | on (median of \(rounds)) |")
print("| --- | ---: | ---: |")
row("upstream calls per invalidation", \.callsPerInvalidation)
row("miss latency p50 (ms)", \.missP50)
row("miss latency p99 (ms)", \.missP99)
row("a newcomer's gets that reach the upstream (%)") { $0.newcomerShare * 100 }
let hit = try await hitCost()
print("")
print(
    "a hit, sharing fills against not: \(String(format: "%.3f", hit.ratio))×"
        + " (runs \(hit.runs.map { String(format: "%.3f", $0) }.joined(separator: ", ")))")
