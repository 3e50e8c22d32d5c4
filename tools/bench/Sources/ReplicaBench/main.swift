// replica-bench: what replicas cost, and how fast a change travels between them over PostgreSQL.
// tools/bench/replicas.sh starts a throwaway PostgreSQL (tools/scripts/postgres.sh) and runs it.
//
//   cost         a get on a store that follows a bus and holds its lease (reset once: every get
//                then also reads the record's write time; and the lease checked against the
//                clock) against a get on a store that never did; an async
//                invalidate of one key against an async delete of one key (durability .cache)
//   propagation  R replicas in this process, each with its own store and PostgresBus on one
//                database; the first --writers replicas take turns to invalidate one key at a
//                fixed rate (each call sent on schedule, not after the previous one returned), and
//                the time from the call to the commit that removed the record on every other
//                replica is taken when that replica's `changes()` delivers the commit (in-process
//                delivery is quick; looking at the record on a short timer gave the same figures,
//                with a timer a look), and so is the first leg, the writer's own commit
//
//   publishing   64 tasks invalidate --publish keys one at a time; keys per second until all are
//                published
//   catch-up     a replica's bus stopped while --catchup keys change, then started: the time until
//                it has applied them all
//
//   consistency  --cycles N times, by --cycle-workers tasks on keys of their own: a write upstream,
//                an invalidation on one of 3 replicas in turn, the wait until applied everywhere, a
//                read through on the 3 replicas (never older than the write), with
//                background read-through of the same keys and fetches that take 0 to 50 ms
//
//   round trips  --roundtrips N times, one after the other: an invalidation on one of 3 replicas,
//                flush, and the wait until all 3 applied it, with readers on every replica
//
//   Every replica's store is `.cache` (one flush a commit); with --flush 0 it flushes nothing
//   (`.riskStoreOnOSCrash`), which leaves the bus's part of a change's path without the disk's.
//
//   replica-bench [--replicas 2] [--writers 1] [--rate 500] [--count 10000] [--rounds 5] [--publish 50000] [--catchup 100000] [--cycles 0] [--cycle-workers 32] [--roundtrips 0] [--flush 1]
import BenchModels
import BenchSupport
import Foundation
import Hoard
import HoardPostgres
import Logging
import PostgresNIO
import Synchronization

let replicaCount = option("replicas", default: 2)
let writers = option("writers", default: 1)
let rate = option("rate", default: 500)
let count = option("count", default: 10_000)
let rounds = option("rounds", default: 5)
let cycleWorkers = option("cycle-workers", default: 32)
let flushing = option("flush", default: 1) != 0

func postgres() -> PostgresClient.Configuration {
    let env = ProcessInfo.processInfo.environment
    guard let port = env["HOARD_PG_PORT"].flatMap(Int.init) else {
        FileHandle.standardError.write(
            Data("replica-bench: HOARD_PG_PORT is not set; run tools/bench/replicas.sh\n".utf8))
        exit(2)
    }
    return PostgresClient.Configuration(
        host: env["HOARD_PG_HOST"] ?? "127.0.0.1", port: port, username: env["HOARD_PG_USER"] ?? "hoard",
        password: nil, database: env["HOARD_PG_DATABASE"] ?? "hoard", tls: .disable)
}

func sample(_ id: Int) -> Member {
    Member(
        id: Int64(id), name: "member \(id)", email: "m\(id)@example.com", age: 20 + id % 50, city: "Lyon", followers: id
    )
}

let quiet: Logger = {
    var logger = Logger(label: "replica-bench")
    logger.logLevel = .critical
    return logger
}()

// MARK: - Cost

func costs() async throws -> [Comparison] {
    let directory = temporaryDirectory("replica-bench-cost")
    defer { removeStore(in: directory) }
    let plain = try Store(path: directory + "/plain", options: .cache)
    let following = try Store(path: directory + "/following", options: .cache)
    let records = 100_000
    let members = (0..<records).map { sample($0) }
    for store in [plain, following] { try await store.collection(Member.self).put(members) }
    // A reset as a bus's first catch-up makes one, then the records written again after it; and
    // the lease a running bus holds, which every get checks against the clock. The plain store's
    // records are written again too, so that both files have the same history.
    try await following.replication.reset(bus: "bench", to: BusPosition(log: "bench", sequence: 0))
    for store in [plain, following] { try await store.collection(Member.self).put(members) }
    following.replication.requireLease()
    try following.replication.beginLease(until: LeaseInstant.now().advanced(by: .seconds(3_600)))
    let (plainMembers, followingMembers) = (try plain.collection(Member.self), try following.collection(Member.self))
    var random = SplitMix64(seed: 7)
    let ids = (0..<200_000).map { _ in Int.random(in: 0..<records, using: &random) }
    // The sides take turns every 20,000 gets: this machine's speed drifts by more than the budget
    // from one second to the next.
    let getSlice = 20_000
    let get = try compareInterleaved(
        "get, store following a bus, lease held", baseline: "get, store without", operations: ids.count, rounds: rounds,
        slices: ids.count / getSlice, budget: 1.02,
        baselineSlice: { index in
            try time {
                for id in ids[index * getSlice..<(index + 1) * getSlice] { _ = try plainMembers.get(Int64(id)) }
            }
        },
        candidateSlice: { index in
            try time {
                for id in ids[index * getSlice..<(index + 1) * getSlice] { _ = try followingMembers.get(Int64(id)) }
            }
        })

    let operations = 2_000
    var deleteTimes: [UInt64] = []
    var invalidateTimes: [UInt64] = []
    // Each a commit and a flush: the two take turns every 100 writes, the disk's speed drifting.
    let slice = 100
    for round in 0..<rounds {
        var (deleting, invalidating): (UInt64, UInt64) = (0, 0)
        for first in stride(from: round * operations, to: (round + 1) * operations, by: slice) {
            for side in (first / slice).isMultiple(of: 2) ? [0, 1] : [1, 0] {
                let start = now()
                for id in first..<(first + slice) {
                    if side == 0 {
                        try await plainMembers.delete(Int64(id))
                    } else {
                        try await followingMembers.invalidate(Int64(id))
                    }
                }
                if side == 0 { deleting += now() - start } else { invalidating += now() - start }
            }
        }
        deleteTimes.append(deleting)
        invalidateTimes.append(invalidating)
        // The outbox emptied as a bus would.
        let pending = try following.replication.pendingAnnouncements(limit: .max)
        try await following.replication.acknowledge(pending)
    }
    let invalidate = Comparison(
        name: "invalidate one key (async)", baseline: "delete one key (async)", operations: operations,
        baselineNanos: median(deleteTimes), candidateNanos: median(invalidateTimes), budget: 1.1)
    return [get, invalidate]
}

// MARK: - Propagation

final class Replica: Sendable {
    let store: Store
    let members: HoardCollection<Member>
    let bus: PostgresBus
    init(_ directory: String, index: Int) throws {
        // The bench watches each replica with changes(), which would also watch the data file
        // for other processes' commits (there are none): a cost of the measuring, not of the bus.
        var options = Store.Options.cache
        options.otherProcesses = .off
        // --flush 0: no flush at all, to tell the disk's share of a change's path from the bus's.
        if !flushing { options.durability = .riskStoreOnOSCrash }
        store = try Store(path: "\(directory)/replica-\(index)", options: options)
        members = try store.collection(Member.self)
        var configuration = PostgresBus.Configuration(postgres: postgres())
        configuration.replicaName = "replica-\(index)"
        bus = PostgresBus(store: store, configuration: configuration, logger: quiet)
    }
}

/// When each invalidation was made, for the watchers.
final class SendTimes: Sendable {
    let times: Mutex<[UInt64]>
    init(count: Int) { times = Mutex(Array(repeating: 0, count: count)) }
}

/// Invalidations that threw.
final class FailureCount: Sendable {
    let count = Atomic<Int>(0)
}

/// Whether the consistency run's background readers should stop.
final class StopFlag: Sendable {
    let stopped = Atomic<Bool>(false)
}

/// Waits until `bus` is connected, its store has caught up once and holds its lease.
func waitUntilFollowing(_ bus: PostgresBus) async throws {
    func following() throws -> Bool {
        let replication = bus.store.replication
        return try bus.status.connected && replication.position(of: bus.configuration.name) != nil
            && replication.leaseDeadline != nil
    }
    while try !following() { try await Task.sleep(for: .milliseconds(10)) }
}

/// Stops the buses of a section and waits until each has left: its row marked as left and its
/// lease ended. A bus only cancelled when its section returns (the `defer`s, for a section that
/// throws) stays live in `hoard_replicas` until its lease runs out, and the next section's or the
/// next process's waits would wait for it, seconds, on the same database.
func stopBuses(_ runs: [Task<Void, any Error>]) async {
    for run in runs { run.cancel() }
    for run in runs { _ = await run.result }
}

func percentile(_ sorted: [Double], _ p: Double) -> Double {
    sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

func propagation() async throws -> String {
    let directory = temporaryDirectory("replica-bench-propagation")
    defer { removeStore(in: directory) }
    let replicas = try (0..<replicaCount).map { try Replica(directory, index: $0) }
    let runs = replicas.map { replica in Task { try await replica.bus.run() } }
    defer { runs.forEach { $0.cancel() } }
    for replica in replicas {
        try await waitUntilFollowing(replica.bus)
        try await replica.members.put((0..<count).map { sample($0) })
    }
    // Invalidation `id` is made on replica `id % writers`, and watched on every other replica.
    let writing = max(1, min(writers, replicaCount))
    let sent = SendTimes(count: count)
    let committed = SendTimes(count: count)
    let watchers = replicas.enumerated().map { index, replica in
        let watched = (0..<count).filter { $0 % writing != index }
        // Subscribed here, before the first invalidation is sent.
        let changes = watched.isEmpty ? nil : replica.members.changes(limit: count)
        return Task { () -> [Double] in
            guard let changes else { return [] }
            var waiting = Set(watched)
            var latencies: [Double] = []
            for await batch in changes {
                let at = now()
                let gone: [Int]
                switch batch.content {
                case .records(let records), .cleared(then: let records):
                    gone = records.compactMap { id, kind in kind == .stored ? nil : Int(id) }
                case .unknown:  // more changes than the limit at once: look at each record
                    gone = try waiting.filter { try !replica.members.contains(Int64($0)) }
                }
                for id in gone where waiting.remove(id) != nil {
                    latencies.append(Double(at - sent.times.withLock { $0[id] }) / 1e6)
                }
                if waiting.isEmpty { break }
            }
            return latencies
        }
    }
    // Sent on schedule without waiting for each commit (a service's requests do not queue behind
    // each other's), so that group commit gathers those that overlap.
    let interval = 1e9 / Double(rate)
    let processBefore = processCPUSeconds()
    let commitsBefore = replicas.map(\.store.writeStatistics.commits).reduce(0, +)
    let start = now()
    let failures = FailureCount()
    await withTaskGroup(of: Void.self) { group in
        for id in 0..<count {
            let due = start + UInt64(Double(id) * interval)
            while case let current = now(), current < due {
                try? await Task.sleep(for: .nanoseconds(Int(due - current)))
            }
            sent.times.withLock { $0[id] = now() }
            let writer = replicas[id % writing].members
            group.addTask {
                do {
                    try await writer.invalidate(Int64(id))
                    let at = now()
                    committed.times.withLock { $0[id] = at }
                } catch { failures.count.add(1, ordering: .relaxed) }
            }
        }
    }
    var lines: [String] = []
    var all: [Double] = []
    var watched: [[Double]] = []
    for watcher in watchers { watched.append(try await watcher.value.sorted()) }
    let sendSeconds = Double(now() - start) / 1e9
    let processCPU = processCPUSeconds() - processBefore
    let commits = replicas.map(\.store.writeStatistics.commits).reduce(0, +) - commitsBefore
    for (index, latencies) in watched.enumerated() {
        guard !latencies.isEmpty else { continue }  // a writer with nothing of the others to watch
        all += latencies
        lines.append(
            "replica \(index): \(latencies.count) watched, p50 \(format(percentile(latencies, 0.5), 2)) ms, p99 \(format(percentile(latencies, 0.99), 2)) ms, max \(format(latencies.last ?? .nan, 2)) ms"
        )
    }
    all.sort()
    // The first leg: the call on the writer until its commit (with the outbox entry) returned.
    let local = zip(sent.times.withLock { $0 }, committed.times.withLock { $0 }).compactMap { sentAt, at in
        at == 0 ? nil : Double(at - sentAt) / 1e6
    }.sorted()
    // Replicas report what they applied lazily (at their heartbeat) unless one waits for them:
    // the lag is read once every replica has reported the log's head, which must come at once.
    var head: Int64 = 0
    for replica in replicas.prefix(writing) { head = max(head, try await replica.bus.flush()) }
    let reportStart = now()
    let reported = try await replicas[0].bus.waitUntilApplied(through: head, timeout: .seconds(10))
    let reportedAfter = Double(now() - reportStart) / 1e6
    let lags = try await replicas[0].bus.replicas().filter(\.live).map(\.lagChanges)
    await stopBuses(runs)
    return """
        propagation, \(replicaCount) replicas (\(writing) writing), \(count) invalidations at \(rate)/s, stores \(flushing ? "flushing each commit" : "not flushing") (sent and delivered in \(format(sendSeconds, 2)) s, \(failures.count.load(ordering: .relaxed)) failed)
        all: p50 \(format(percentile(all, 0.5), 2)) ms, p99 \(format(percentile(all, 0.99), 2)) ms, max \(format(all.last ?? .nan, 2)) ms (of which the writer's own commit: p50 \(format(percentile(local, 0.5), 2)) ms, p99 \(format(percentile(local, 0.99), 2)) ms); every replica reported the head \(reported ? "after \(format(reportedAfter, 2)) ms" : "NOT within 10 s"), lag of the live replicas then (changes): \(lags.map(String.init).joined(separator: " "))
        CPU meanwhile: this process \(format(processCPU, 1)) s; the stores' commits meanwhile: \(commits)
        \(lines.joined(separator: "\n"))
        """
}

// MARK: - Publishing

/// 64 tasks invalidate `keys` keys, one at a time (group commit gathers them), while the bus
/// publishes; the rate is keys over the time from the first write to the outbox empty and published.
func publishing(keys: Int) async throws -> String {
    let directory = temporaryDirectory("replica-bench-publish")
    defer { removeStore(in: directory) }
    let replica = try Replica(directory, index: 0)
    let run = Task { try await replica.bus.run() }
    defer { run.cancel() }
    while !replica.bus.status.connected { try await Task.sleep(for: .milliseconds(10)) }
    let commitsBefore = replica.store.writeStatistics.commits
    // The log's head before and after: each publication is one statement (one transaction) that
    // adds one row per collection, and this bench has one collection.
    let headBefore = try await replica.bus.flush()
    let began = now()
    try await withThrowingTaskGroup(of: Void.self) { group in
        for writer in 0..<64 {
            group.addTask {
                for id in stride(from: writer, to: keys, by: 64) { try await replica.members.invalidate(Int64(id)) }
            }
        }
        try await group.waitForAll()
    }
    let written = Double(now() - began) / 1e9
    while try replica.store.replication.pendingCount() > 0 { try await Task.sleep(for: .microseconds(200)) }
    let headAfter = try await replica.bus.flush()
    let seconds = Double(now() - began) / 1e9
    // The invalidations' commits, and the bus's own (the acknowledgements of what it published).
    let commits = replica.store.writeStatistics.commits - commitsBefore
    await stopBuses([run])
    return
        "publishing: \(keys) keys invalidated by 64 tasks, all published after \(format(seconds, 2)) s (invalidations done after \(format(written, 2)) s): \(format(Double(keys) / seconds, 0)) keys/s; \(headAfter - headBefore) PostgreSQL transactions for \(commits) group commits (invalidations and acknowledgements)"
}

// MARK: - Catch-up

/// A replica whose bus is stopped while `changes` keys change, then started again: the time from
/// its start to the record of every changed key gone, and a check that nothing else went.
func catchUp(changes: Int) async throws -> String {
    let directory = temporaryDirectory("replica-bench-catchup")
    defer { removeStore(in: directory) }
    let writer = try Replica(directory, index: 0)
    let writerRun = Task { try await writer.bus.run() }
    defer { writerRun.cancel() }
    let store = try Store(path: "\(directory)/returning", options: .cache)
    let members = try store.collection(Member.self)
    func start() -> (PostgresBus, Task<Void, any Error>) {
        var configuration = PostgresBus.Configuration(postgres: postgres())
        configuration.replicaName = "returning"
        let bus = PostgresBus(store: store, configuration: configuration, logger: quiet)
        return (bus, Task { try await bus.run() })
    }
    var (bus, run) = start()
    try await waitUntilFollowing(bus)
    let total = changes * 2
    for start in stride(from: 0, to: total, by: 20_000) {
        try await members.put((start..<min(total, start + 20_000)).map { sample($0) })
    }
    await stopBuses([run])
    // Every other key changes while the replica is away, in writes of 1,000 keys.
    for start in stride(from: 0, to: total, by: 2_000) {
        try await writer.members.invalidate(stride(from: start, to: min(total, start + 2_000), by: 2).map { Int64($0) })
    }
    let head = try await writer.bus.flush()
    let began = now()
    (bus, run) = start()
    while bus.status.applied < head { try await Task.sleep(for: .microseconds(200)) }
    let seconds = Double(now() - began) / 1e9
    await stopBuses([run, writerRun])
    let left = try members.count()
    var wrong = 0
    for id in 0..<total where try members.contains(Int64(id)) != (id % 2 == 1) { wrong += 1 }
    return
        "catch-up: \(changes) keys changed while a replica was stopped; applied \(format(seconds, 3)) s after it started (connecting included); \(left) records left, \(wrong) wrong"
}

// MARK: - Consistency

/// The upstream the replicas read through: a version per user, and fetches that take the value,
/// then wait 0 to 50 ms before returning it (so that a fetch can overlap a later write).
final class VersionedUpstream: Sendable {
    let versions = Mutex<[Int64: Int]>([:])
    func write(_ id: Int64) -> Int {
        versions.withLock { versions in
            let next = (versions[id] ?? 0) + 1
            versions[id] = next
            return next
        }
    }
    func fetch(_ id: Int64) async throws -> Member? {
        let version = versions.withLock { $0[id, default: 0] }
        try await Task.sleep(for: .milliseconds(Int.random(in: 0...50)))
        return Member(id: id, name: "v\(version)", email: "", age: 0, city: "", followers: version)
    }
}

/// `cycles` times: a write upstream, an invalidation on replica 0, the wait until every replica has
/// applied it, then a read through on every replica, which must not return an older version; readers
/// in the background read the same keys through all along.
func consistency(cycles: Int) async throws -> String {
    let directory = temporaryDirectory("replica-bench-consistency")
    defer { removeStore(in: directory) }
    let replicas = try (0..<3).map { try Replica(directory, index: $0) }
    let runs = replicas.map { replica in Task { try await replica.bus.run() } }
    defer { runs.forEach { $0.cancel() } }
    for replica in replicas {
        try await waitUntilFollowing(replica.bus)
    }
    let upstream = VersionedUpstream()
    let keys: Int64 = 256
    let stop = StopFlag()
    let readers = replicas.map { replica in
        Task {
            while !stop.stopped.load(ordering: .relaxed) {
                _ = try? await replica.members.get(Int64.random(in: 0..<keys), orFetch: upstream.fetch)
                // A hit does not suspend: without this, three readers hold the cooperative pool's
                // threads (one per core here) and nothing else runs.
                await Task.yield()
            }
        }
    }
    // Workers own disjoint keys (a cycle's check is about its own key), and take turns at writing
    // on each replica.
    let workers = min(cycleWorkers, Int(keys))
    let began = now()
    let outcomes = try await withThrowingTaskGroup(of: (stale: Int, failure: String?).self) { group in
        for worker in 0..<workers {
            group.addTask {
                var stale = 0
                for cycle in stride(from: worker, to: cycles, by: workers) {
                    let id = Int64(cycle) % keys
                    let writer = replicas[cycle % replicas.count]
                    let written = upstream.write(id)
                    try await writer.members.invalidate(id)
                    let position = try await writer.bus.flush()
                    guard try await writer.bus.waitUntilApplied(through: position, timeout: .seconds(10)) else {
                        return (stale, "cycle \(cycle) was not applied everywhere within 10 s")
                    }
                    for replica in replicas {
                        let read = try await replica.members.get(id, orFetch: upstream.fetch)
                        if (read?.followers ?? -1) < written { stale += 1 }
                    }
                }
                return (stale, nil)
            }
        }
        var outcomes: [(stale: Int, failure: String?)] = []
        for try await outcome in group { outcomes.append(outcome) }
        return outcomes
    }
    let stale = outcomes.map(\.stale).reduce(0, +)
    if let failure = outcomes.compactMap(\.failure).first {
        stop.stopped.store(true, ordering: .relaxed)
        return "consistency: \(failure)"
    }
    stop.stopped.store(true, ordering: .relaxed)
    for reader in readers { _ = await reader.result }
    await stopBuses(runs)
    let discarded = replicas.map(\.store.replication.discardedFills).reduce(0, +)
    return
        "consistency: \(cycles) cycles by \(workers) workers (write, invalidate, wait until applied, read through on 3 replicas) in \(format(Double(now() - began) / 1e9, 1)) s: \(stale) stale reads; \(discarded) fills discarded by the race guard"
}

// MARK: - Round trips

/// `trips` times, one after the other: an invalidation on replica 0, `flush`, and the wait until
/// the 3 replicas applied it; readers get records on every replica meanwhile (1,000 gets a second
/// each, 10 every 10 ms). Each trip is timed from the invalidation's call to the wait's return.
func roundTrips(_ trips: Int) async throws -> String {
    let directory = temporaryDirectory("replica-bench-roundtrips")
    defer { removeStore(in: directory) }
    let replicas = try (0..<3).map { try Replica(directory, index: $0) }
    let runs = replicas.map { replica in Task { try await replica.bus.run() } }
    defer { runs.forEach { $0.cancel() } }
    let records = 10_000
    for replica in replicas {
        try await waitUntilFollowing(replica.bus)
        try await replica.members.put((0..<records).map { sample($0) })
    }
    let stop = StopFlag()
    let readers = replicas.map { replica in
        Task {
            while !stop.stopped.load(ordering: .relaxed) {
                for _ in 0..<10 { _ = try? replica.members.get(Int64.random(in: 0..<Int64(records))) }
                try? await Task.sleep(for: .milliseconds(10))
            }
        }
    }
    var times: [Double] = []
    var notApplied = 0
    for trip in 0..<trips {
        let began = now()
        try await replicas[0].members.invalidate(Int64(trip % records))
        let position = try await replicas[0].bus.flush()
        if try await !replicas[0].bus.waitUntilApplied(through: position, timeout: .seconds(10)) { notApplied += 1 }
        times.append(Double(now() - began) / 1e6)
    }
    stop.stopped.store(true, ordering: .relaxed)
    for reader in readers { _ = await reader.result }
    await stopBuses(runs)
    times.sort()
    return
        "round trips: \(trips) of invalidate, flush and wait until 3 replicas applied it, readers running: p50 \(format(percentile(times, 0.5), 2)) ms, p99 \(format(percentile(times, 0.99), 2)) ms, max \(format(times.last ?? .nan, 2)) ms; \(notApplied) not applied within 10 s"
}

let ok = report("replica-bench: costs (medians of \(rounds) alternating rounds)", try await costs())
print(try await propagation())
let publishKeys = option("publish", default: 50_000)
if publishKeys > 0 { print(try await publishing(keys: publishKeys)) }
let catchUpKeys = option("catchup", default: 100_000)
if catchUpKeys > 0 { print(try await catchUp(changes: catchUpKeys)) }
let cycles = option("cycles", default: 0)
if cycles > 0 { print(try await consistency(cycles: cycles)) }
let trips = option("roundtrips", default: 0)
if trips > 0 { print(try await roundTrips(trips)) }
exit(ok ? 0 : 1)
