// readthrough-bench: the hit path of read-through, what metrics cost on the get path, and what
// spans cost with no tracer (at the end of this file). First `get(_:orFetch:)` of a fresh record
// against a plain `get` of the same record, each a read transaction of its own, in random order.
// Budget: ≤ 1.2×. The two alternate every 2,000 gets (a round is 100 such pairs of slices, each
// pair in the other order than the last), so that the machine's drift, which moves a whole round
// by ±20% here, and the pages the first pass warms, favour neither.
//
//   swift run -c release --package-path tools/bench readthrough-bench [--records N] [--rounds R]
import BenchModels
import BenchSupport
import Hoard

let count = option("records", default: 200_000)
let rounds = option("rounds", default: 5)
var rng = SplitMix64(seed: 24)
let members = (0..<count).map { i in
    Member(
        id: Int64(i) &* 7_919, name: "Member \(i)", email: "member\(i)@example.com",
        age: Int(rng.next() % 90), city: "Lisbon", followers: Int(rng.next() % 100_000))
}
let order = members.indices.shuffled(using: &rng).map { members[$0].id }
let slice = 2_000

let directory = temporaryDirectory("readthrough")
let store = try Store(path: directory + "/store", options: .cache)
let users = try store.collection(Member.self, timeToLive: .hours(24))
try users.put(members)

/// One round off the main actor, as a service's request handlers run (top-level code is the
/// main actor's, and each call from it to a nonisolated async method would hop executors):
/// the nanoseconds of the plain gets and of the read-through gets, slice by slice in turn.
nonisolated func round(
    _ users: HoardCollection<Member>, _ order: [Int64], revalidating: Bool = false
) async throws -> (UInt64, UInt64) {
    var (plain, through) = (UInt64(0), UInt64(0))
    var ages = 0
    for (number, start) in stride(from: 0, to: order.count, by: slice).enumerated() {
        let ids = order[start..<min(start + slice, order.count)]
        // The second pass over a slice finds its pages warm: each goes second every other slice.
        for pass in number % 2 == 0 ? [0, 1] : [1, 0] {
            let t0 = now()
            if pass == 0 {
                for id in ids { ages &+= try users.get(id)?.age ?? 0 }
                plain += now() - t0
            } else {
                if revalidating {
                    for id in ids {
                        ages &+=
                            try await users.get(id, orRevalidate: { _, _ in fatalError("a fresh record was fetched") })?
                            .age ?? 0
                    }
                } else {
                    for id in ids {
                        ages &+=
                            try await users.get(id, orFetch: { _ in fatalError("a fresh record was fetched") })?.age
                            ?? 0
                    }
                }
                through += now() - t0
            }
        }
    }
    precondition(ages >= 0)
    return (plain, through)
}

/// A warm-up round, then `rounds` measured ones, all of them hits: the plain gets' and the
/// read-through gets' medians compared.
nonisolated func compareHits(
    _ collection: HoardCollection<Member>, revalidating: Bool, name: String, budget: Double
) async throws -> Comparison {
    _ = try await round(collection, order, revalidating: revalidating)  // warm-up, unmeasured
    var plain: [UInt64] = []
    var through: [UInt64] = []
    for _ in 0..<rounds {
        let (p, t) = try await round(collection, order, revalidating: revalidating)
        plain.append(p)
        through.append(t)
    }
    precondition(collection.statistics().misses == 0, "every read-through was a hit")
    return Comparison(
        name: name, baseline: "get(_:) of the same record", operations: count,
        baselineNanos: median(plain), candidateNanos: median(through), budget: budget)
}

let result = try await compareHits(
    users, revalidating: false, name: "get(_:orFetch:) of a fresh record", budget: 1.2)

// Every read-through option at once: a collection with stale windows, timeouts and refresh-ahead
// (its records far from their refresh point), tagged records, read by a revalidating get, against
// a plain get of the same collection.
let everything = try store.collection(
    Member.self, named: "everything", timeToLive: .hours(24),
    freshness: Freshness(
        staleWhileRevalidate: .seconds(30), staleIfError: .hours(1),
        timeouts: FetchTimeouts(soft: .milliseconds(100), hard: .seconds(2)), refreshAhead: 0.8))
for member in members { try everything.put(member, tags: ["city:\(member.city)", "age:\(member.age)"]) }
let everyOption = try await compareHits(
    everything, revalidating: true, name: "get(_:orRevalidate:), every option on, tagged records", budget: 1.05)
report(
    "read-through hit path, \(count) records, \(rounds) rounds (medians), each get its own read transaction",
    [result, everyOption])
removeStore(in: directory)

// What metrics cost on the get path: the same gets, on a second store whose
// instruments go to a backend that counts (CountingMetrics), against a store whose instruments
// are this process's no-op default (no backend bootstrapped), slice by slice in turn as above.
let metricsDirectory = temporaryDirectory("metrics")
let plainStore = try Store(path: metricsDirectory + "/store", options: .cache)
let plainUsers = try plainStore.collection(Member.self, timeToLive: .hours(24))
try plainUsers.put(members)
var measuredOptions = Store.Options.cache
measuredOptions.metricsFactory = CountingMetrics()
let measuredDirectory = temporaryDirectory("metrics")
let measuredStore = try Store(path: measuredDirectory + "/store", options: measuredOptions)
let measured = try measuredStore.collection(Member.self, timeToLive: .hours(24))
try measured.put(members)

nonisolated func metricsRound(
    _ plain: HoardCollection<Member>, _ measured: HoardCollection<Member>, _ order: [Int64]
) throws -> (UInt64, UInt64) {
    var (without, with) = (UInt64(0), UInt64(0))
    var ages = 0
    for (number, start) in stride(from: 0, to: order.count, by: slice).enumerated() {
        let ids = order[start..<min(start + slice, order.count)]
        for pass in number % 2 == 0 ? [0, 1] : [1, 0] {
            let t0 = now()
            for id in ids { ages &+= try (pass == 0 ? plain : measured).get(id)?.age ?? 0 }
            if pass == 0 { without += now() - t0 } else { with += now() - t0 }
        }
    }
    precondition(ages >= 0)
    return (without, with)
}

_ = try metricsRound(plainUsers, measured, order)  // warm-up, unmeasured
var withoutMetrics: [UInt64] = []
var withMetrics: [UInt64] = []
for _ in 0..<rounds {
    let (without, with) = try metricsRound(plainUsers, measured, order)
    withoutMetrics.append(without)
    withMetrics.append(with)
}
let metricsCost = Comparison(
    name: "get, metrics to a counting backend", baseline: "get, no backend (no-op)", operations: count,
    baselineNanos: median(withoutMetrics), candidateNanos: median(withMetrics), budget: 1.1)
report("what metrics cost on the get path, \(count) records, \(rounds) rounds (medians)", [metricsCost])
removeStore(in: metricsDirectory)
removeStore(in: measuredDirectory)

// What spans cost when no tracer is bootstrapped (swift-distributed-tracing's no-op tracer, the
// default `.system`), against a store whose spans are `.off` (the instrumentation skipped): the
// read-through hit path, which makes no span, and a read-through miss, which makes three (the
// miss, the fetch, the commit of what was fetched; the fetch returns at once, and the commit does
// not flush, so that the spans' share is as large as it can be). Budgets: ≤ 1.02× and ≤ 1.05×.
// Slice by slice in turn, as above.
var offOptions = Store.Options(durability: .riskStoreOnOSCrash)
offOptions.spans = .off
let spanDirectories = (temporaryDirectory("spans"), temporaryDirectory("spans"))
let offStore = try Store(path: spanDirectories.0 + "/store", options: offOptions)
let noOpStore = try Store(path: spanDirectories.1 + "/store", options: Store.Options(durability: .riskStoreOnOSCrash))
let missSlice = 500
let missCount = min(count, 50_000)

nonisolated func spansRound(
    _ off: HoardCollection<Member>, _ noOp: HoardCollection<Member>, _ ids: [Int64], _ members: [Int64: Member],
    miss: Bool
) async throws -> (UInt64, UInt64) {
    var (without, with) = (UInt64(0), UInt64(0))
    var ages = 0
    let fetch: @Sendable (Int64) async throws -> Member? = { members[$0] }
    let step = miss ? missSlice : slice
    for (number, start) in stride(from: 0, to: ids.count, by: step).enumerated() {
        let slice = ids[start..<min(start + step, ids.count)]
        for pass in number % 2 == 0 ? [0, 1] : [1, 0] {
            let users = pass == 0 ? off : noOp
            if miss { try await users.deleteAll() }
            let t0 = now()
            for id in slice { ages &+= try await users.get(id, orFetch: fetch)?.age ?? 0 }
            if pass == 0 { without += now() - t0 } else { with += now() - t0 }
        }
    }
    precondition(ages >= 0)
    return (without, with)
}

let byID = Dictionary(uniqueKeysWithValues: members.map { ($0.id, $0) })
let offUsers = try offStore.collection(Member.self, timeToLive: .hours(24))
let noOpUsers = try noOpStore.collection(Member.self, timeToLive: .hours(24))
try offUsers.put(members)
try noOpUsers.put(members)
_ = try await spansRound(offUsers, noOpUsers, order, byID, miss: false)  // warm-up, unmeasured
var (hitsOff, hitsNoOp): ([UInt64], [UInt64]) = ([], [])
for _ in 0..<rounds {
    let (without, with) = try await spansRound(offUsers, noOpUsers, order, byID, miss: false)
    hitsOff.append(without)
    hitsNoOp.append(with)
}
let missOrder = Array(order.prefix(missCount))
_ = try await spansRound(offUsers, noOpUsers, missOrder, byID, miss: true)  // warm-up, unmeasured
var (missesOff, missesNoOp): ([UInt64], [UInt64]) = ([], [])
for _ in 0..<rounds {
    let (without, with) = try await spansRound(offUsers, noOpUsers, missOrder, byID, miss: true)
    missesOff.append(without)
    missesNoOp.append(with)
}
precondition(offUsers.statistics().fetches == noOpUsers.statistics().fetches, "both stores fetched alike")
report(
    "what spans cost with no tracer bootstrapped, \(rounds) rounds (medians)",
    [
        Comparison(
            name: "get(_:orFetch:) hit, spans .system (no-op tracer)", baseline: "the same, spans .off",
            operations: count, baselineNanos: median(hitsOff), candidateNanos: median(hitsNoOp), budget: 1.02),
        Comparison(
            name: "get(_:orFetch:) miss (fetch + group commit), spans .system", baseline: "the same, spans .off",
            operations: missCount, baselineNanos: median(missesOff), candidateNanos: median(missesNoOp), budget: 1.05),
    ])
removeStore(in: spanDirectories.0)
removeStore(in: spanDirectories.1)
