// sync-bench: synchronize against writing the same models, and against the quadratic
// compare-every-pair algorithm it replaces, in the same run.
//
//   swift run -c release --package-path tools/bench sync-bench [--models N] [--small M] [--rounds R]
import BenchModels
import BenchSupport
import Hoard

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

let count = option("models", default: 1_000_000)
let small = option("small", default: 20_000)
let rounds = option("rounds", default: 3)

func members(_ n: Int) -> [Member] {
    (0..<n).map { i in
        Member(
            id: Int64(i) &* 13, name: "Member \(i)", email: "m\(i)@example.com", age: i % 90, city: "Lisbon",
            followers: i % 1000)
    }
}

/// The server's next answer: 1% changed, 0.5% new, 0.5% gone.
func freshVersion(of stored: [Member]) -> [Member] {
    var rng = SplitMix64(seed: 5)
    var fresh = stored
    for i in stride(from: 0, to: fresh.count, by: 100) { fresh[i].followers += 1 }
    fresh.removeAll { $0.id % 200 == 13 }
    let base = Int64(stored.count) &* 13
    fresh += (0..<stored.count / 200).map { i in
        Member(
            id: base + Int64(i) &* 13 + 1, name: "New \(i)", email: "n\(i)@example.com", age: 30, city: "Osaka",
            followers: 0)
    }
    return fresh.shuffled(using: &rng)
}

/// Peak resident memory of this process, in MiB.
func peakMiB() -> Int {
    guard let file = fopen("/proc/self/status", "r") else { return -1 }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 256)
    while fgets(&line, 256, file) != nil {
        let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if text.hasPrefix("VmHWM:") { return (Int(text.split(separator: " ")[1]) ?? 0) / 1024 }
    }
    return -1
}

let directory = temporaryDirectory("sync")
let store = try Store(path: directory + "/store", options: .init(durability: .riskStoreOnOSCrash))
let collection = try store.collection(Member.self)

// MARK: 1,000,000 models: synchronize vs writing them all into an empty collection

let stored = members(count)
let fresh = freshVersion(of: stored)
let before = peakMiB()
nonisolated(unsafe) var lastResult: SynchronizeResult<Int64>?  // single-threaded benchmark
/// Writes `models` into the emptied collection, timed.
func writeRound(_ models: [Member]) throws -> UInt64 {
    try collection.deleteAll()
    return try time { try collection.put(models) }
}
/// Synchronizes the stored models with the fresh ones, timed.
func synchronizeRound() throws -> UInt64 {
    try collection.deleteAll()
    try collection.put(stored)
    return try time { lastResult = try collection.synchronize(with: fresh) }
}
// The budget's baseline writes the very models synchronize receives, in the order it receives
// them (the server's order, here shuffled). A second, informational row writes the stored models
// in ID order instead: LMDB inserts in key order are much cheaper than random ones.
let large = try compare(
    "synchronize \(count) models (1% changed, 0.5% new, 0.5% removed)",
    baseline: "write the same \(fresh.count) models into an empty collection",
    operations: count, rounds: rounds, budget: 1.0,
    baselineRound: { try writeRound(fresh) }, candidateRound: synchronizeRound
)
let sortedWrite = try compare(
    "synchronize \(count) models (as above)", baseline: "write \(count) models in ID order into an empty collection",
    operations: count, rounds: rounds,
    baselineRound: { try writeRound(stored) }, candidateRound: synchronizeRound
)
let result = lastResult!
print(
    "synchronize: added \(result.added.count), updated \(result.updated.count), removed \(result.removed.count), unchanged \(result.unchanged); peak RSS \(before) MiB before the rounds, \(peakMiB()) MiB after"
)

// MARK: 20,000 models: synchronize vs the quadratic algorithm

let smallStored = members(small)
let smallFresh = freshVersion(of: smallStored)
func sameContent(_ a: Member, _ b: Member) -> Bool {
    a.id == b.id && a.name == b.name && a.email == b.email && a.age == b.age && a.city == b.city
        && a.followers == b.followers
}
let quadratic = try compare(
    "synchronize \(small) models", baseline: "compare every stored model with every fresh one",
    operations: small, rounds: rounds,
    baselineRound: {
        try collection.deleteAll()
        try collection.put(smallStored)
        return try time {
            // The seed article's algorithm: every stored entity against every fresh value, then
            // every fresh value against every kept entity; one transaction so only the algorithm differs.
            let current = try collection.scan()
            try store.write { txn in
                var kept: [Member] = []
                for entity in current {
                    if smallFresh.contains(where: { sameContent($0, entity) }) {
                        kept.append(entity)
                    } else {
                        try collection.delete(entity.id, in: txn)
                    }
                }
                for value in smallFresh where !kept.contains(where: { sameContent($0, value) }) {
                    try collection.put(value, in: txn)
                }
            }
        }
    },
    candidateRound: {
        try collection.deleteAll()
        try collection.put(smallStored)
        return try time { try collection.synchronize(with: smallFresh) }
    }
)
_ = report("synchronize (ratio = synchronize time / baseline time)", [large, sortedWrite, quadratic])
print(
    "synchronize is \(format(1 / quadratic.ratio, 1))× faster than the quadratic algorithm at \(small) models (budget ≥ 100×)"
)
