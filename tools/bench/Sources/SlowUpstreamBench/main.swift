// slow-upstream-bench: read-through against an upstream that is slow or does not answer.
//
// 1. Refresh-ahead: an upstream that answers in 1 s, 20 hot keys read 1,000 times a second in
//    all (time to live 10 s, refresh-ahead at 0.8). After the warm-up (each key fetched once),
//    how long gets take (p50, p99, max, and how many took over 2 ms), and how many upstream calls
//    each key made per time to live.
// 2. An upstream that hangs: gets of records past their expiry (within stale-if-error) with a
//    soft timeout of 50 ms, and gets of absent records with a hard timeout of 100 ms; how long
//    each took, against the timeout + 5 ms.
// 3. An upstream that fails in 1 ms: one hot key read 20 times a millisecond for `--failing`
//    seconds (default 2) past its refresh point, then expired within stale-while-revalidate, then
//    past it within stale-if-error; upstream calls a second in each phase, without a retry period
//    (`retryFailedFetchAfter: .zero`, as read-through was before it had one) and with the default
//    period of 1 s. The store's clock runs with real time, moved on to put the record in each phase.
//
//   swift run -c release --package-path tools/bench slow-upstream-bench [--seconds 60] [--rate 1000]
import BenchModels
import BenchSupport
import Hoard
import Foundation
import Synchronization

let seconds = option("seconds", default: 60)
let rate = option("rate", default: 1_000)
let hotKeys = 20
let timeToLive = Duration.seconds(10)

func member(_ id: Int64, _ version: Int) -> Member {
    Member(id: id, name: "Member \(id)", email: "member\(id)@example.com", age: version, city: "Lisbon", followers: 0)
}

func percentile(_ sorted: [Double], _ p: Double) -> Double {
    sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1_000 + Double(duration.components.attoseconds) / 1e15
}

func summary(_ latencies: [Double]) -> String {
    let sorted = latencies.sorted()
    return
        "p50 \(format(percentile(sorted, 0.5), 3)) ms, p99 \(format(percentile(sorted, 0.99), 3)) ms, max \(format(sorted.last ?? .nan, 3)) ms"
}

struct NothingRead: Error {
    var key: Int
}

/// The upstream of part 1: 1 s a call, counted per key.
final class SlowUpstream: Sendable {
    let calls = Mutex<[Int64: Int]>([:])
    let latency: Duration
    init(latency: Duration) { self.latency = latency }

    func fetch(_ id: Int64) async throws -> Member? {
        let call = calls.withLock { calls -> Int in
            calls[id, default: 0] += 1
            return calls[id, default: 0]
        }
        try await Task.sleep(for: latency)
        return member(id, call)
    }
}

nonisolated func refreshAhead() async throws {
    let directory = temporaryDirectory("slow-upstream")
    defer { removeStore(in: directory) }
    let store = try Store(path: directory + "/store", options: .cache)
    let members = try store.collection(
        Member.self, timeToLive: timeToLive, freshness: Freshness(refreshAhead: 0.8))
    let upstream = SlowUpstream(latency: .seconds(1))
    let fetch: @Sendable (Int64) async throws -> Member? = { try await upstream.fetch($0) }

    // The warm-up: every key fetched once, together.
    try await withThrowingTaskGroup(of: Void.self) { group in
        for key in 0..<Int64(hotKeys) { group.addTask { _ = try await members.get(key, orFetch: fetch) } }
        try await group.waitForAll()
    }
    let callsBefore = upstream.calls.withLock { $0.values.reduce(0, +) }

    // Paced gets: the i-th at start + i / rate, keys in turn.
    var latencies: [Double] = []
    latencies.reserveCapacity(seconds * rate)
    let clock = ContinuousClock()
    let start = clock.now
    let interval = Duration.seconds(1) / rate
    for i in 0..<(seconds * rate) {
        try await clock.sleep(until: start + interval * i)
        let began = clock.now
        guard try await members.get(Int64(i % hotKeys), orFetch: fetch) != nil else {
            throw NothingRead(key: i % hotKeys)
        }
        latencies.append(milliseconds(clock.now - began))
    }
    let elapsed = clock.now - start
    let calls = upstream.calls.withLock { $0.values.reduce(0, +) } - callsBefore
    let statistics = members.statistics()
    let lives = milliseconds(elapsed) / milliseconds(timeToLive)
    print(
        """
        refresh-ahead: \(latencies.count) gets of \(hotKeys) keys in \(format(milliseconds(elapsed) / 1_000, 1)) s, \
        upstream 1 s a call, time to live 10 s, refresh at 0.8
          gets: \(summary(latencies)); over 2 ms: \(latencies.filter { $0 > 2 }.count)
          upstream calls after the warm-up: \(calls), \(format(Double(calls) / Double(hotKeys) / lives, 2)) per key per time to live \
        (refreshes ahead \(statistics.refreshesAhead), misses \(statistics.misses))
        """)
}

/// An upstream that never answers (until its task is cancelled).
let hanging: @Sendable (Int64) async throws -> Member? = { _ in
    try await Task.sleep(for: .seconds(3_600))
    return nil
}

/// `read` of each of `keys`, `concurrency` at a time; the milliseconds of each, and how many
/// threw or returned nothing.
nonisolated func timed(
    _ keys: [Int64], concurrency: Int, _ read: @escaping @Sendable (Int64) async throws -> Member?
) async -> (latencies: [Double], failed: Int) {
    await withTaskGroup(of: (Double, Bool).self) { group in
        var results: [(Double, Bool)] = []
        var next = 0
        func add() {
            let key = keys[next]
            next += 1
            group.addTask {
                let clock = ContinuousClock()
                let began = clock.now
                let failed: Bool
                do { failed = try await read(key) == nil } catch { failed = true }
                return (milliseconds(clock.now - began), failed)
            }
        }
        while next < min(concurrency, keys.count) { add() }
        while let result = await group.next() {
            results.append(result)
            if next < keys.count { add() }
        }
        return (results.map(\.0), results.filter(\.1).count)
    }
}

nonisolated func hangingUpstream() async throws {
    let directory = temporaryDirectory("hanging-upstream")
    defer { removeStore(in: directory) }
    let store = try Store(path: directory + "/store", options: .cache)
    let soft = Duration.milliseconds(50)
    let hard = Duration.milliseconds(100)
    let members = try store.collection(
        Member.self, timeToLive: .hours(1),
        freshness: Freshness(staleIfError: .hours(1), timeouts: FetchTimeouts(soft: soft, hard: hard)))
    // Records that expired a moment ago: stale, within stale-if-error.
    try await members.put((0..<Int64(hotKeys)).map { member($0, 0) }, expiry: .after(.milliseconds(1)))
    try await Task.sleep(for: .milliseconds(5))
    let concurrency = option("concurrency", default: 10)
    let staleKeys = (0..<400).map { Int64($0 % hotKeys) }
    let stale = await timed(staleKeys, concurrency: concurrency) { try await members.get($0, orFetch: hanging) }
    let absentKeys = (0..<400).map { Int64(1_000 + $0) }
    let absent = await timed(absentKeys, concurrency: concurrency) { try await members.get($0, orFetch: hanging) }
    // The baseline: the same waits as plain `Task.sleep`s in this process, which show what the
    // platform's timers add.
    let sleeps = await timed(staleKeys, concurrency: concurrency) { _ in
        try await Task.sleep(for: soft)
        return nil
    }
    let statistics = members.statistics()
    print(
        """
        an upstream that hangs, \(concurrency) gets at a time:
          \(stale.latencies.count) gets of stale records, soft timeout 50 ms: \(summary(stale.latencies)); \
        not served \(stale.failed) (budget p99 ≤ 55 ms)
          \(absent.latencies.count) gets of absent records, hard timeout 100 ms: \(summary(absent.latencies)); \
        errors \(absent.failed) (budget p99 ≤ 105 ms)
          the same number of plain 50 ms Task.sleeps: \(summary(sleeps.latencies))
          soft timeouts \(statistics.softTimeouts), hard timeouts \(statistics.hardTimeouts), upstream calls \(statistics.fetches)
        """)
}

/// Part 3's upstream: fails 1 ms after each call, counted.
final class FailingUpstream: Sendable {
    struct Down: Error {}
    let calls = Atomic<Int>(0)
    func fetch(_ id: Int64) async throws -> Member? {
        calls.add(1, ordering: .relaxed)
        try await Task.sleep(for: .milliseconds(1))
        throw Down()
    }
}

/// Upstream calls a second for one hot key in each phase, with the retry period `retry`.
nonisolated func failingUpstream(
    retry: Duration, seconds: Int
) async throws -> [(phase: String, callsPerSecond: Double)] {
    let directory = temporaryDirectory("failing-upstream")
    defer { removeStore(in: directory) }
    let offset = Mutex<Double>(0)
    var options = Store.Options.cache
    options.clock = { Date(timeIntervalSinceNow: offset.withLock { $0 }) }
    let store = try Store(path: directory + "/store", options: options)
    let members = try store.collection(
        Member.self, timeToLive: timeToLive,
        freshness: Freshness(
            staleWhileRevalidate: .seconds(60), staleIfError: .hours(1), refreshAhead: 0.5,
            retryFailedFetchAfter: retry))
    let upstream = FailingUpstream()
    let fetch: @Sendable (Int64) async throws -> Member? = { try await upstream.fetch($0) }
    let clock = ContinuousClock()
    var results: [(String, Double)] = []
    // Seconds after the write: past the refresh point (5 s), expired by 1 s, past the 60 s of
    // stale-while-revalidate (the reads then fetch, and serve the stale record when it fails).
    for (phase, age) in [("refresh-ahead", 6.0), ("stale-while-revalidate", 11.0), ("stale-if-error", 80.0)] {
        offset.withLock { $0 = 0 }
        try await members.put(member(1, 0))
        offset.withLock { $0 = age }
        let before = upstream.calls.load(ordering: .relaxed)
        let start = clock.now
        var tick = 0
        while clock.now - start < .seconds(seconds) {
            for _ in 0..<20 {
                guard try await members.get(1, orFetch: fetch) != nil else { throw NothingRead(key: 1) }
            }
            tick += 1
            try await clock.sleep(until: start + .milliseconds(tick))
        }
        let elapsed = milliseconds(clock.now - start) / 1_000
        results.append((phase, Double(upstream.calls.load(ordering: .relaxed) - before) / elapsed))
    }
    return results
}

nonisolated func failing() async throws {
    let seconds = option("failing", default: 2)
    let without = try await failingUpstream(retry: .zero, seconds: seconds)
    let with = try await failingUpstream(retry: .seconds(1), seconds: seconds)
    print("failing upstream (1 ms a failed call), one key read 20 times a millisecond for \(seconds) s a phase:")
    for (before, after) in zip(without, with) {
        print(
            "  \(before.phase): upstream calls a second \(format(before.callsPerSecond, 1)) without a retry period, "
                + "\(format(after.callsPerSecond, 2)) with 1 s")
    }
}

try await failing()
try await hangingUpstream()
try await refreshAhead()
