// capacity-bench: what a capacity costs, as ratios in one run.
// - a get of a bounded collection (within its bound, so nothing is evicted) against the same get
//   of an unbounded one: budget ≤ 1.1×; slices of 2,000 gets alternate, as in readthrough-bench;
// - a bulk put of new records (1,000, then 10,000 a put) into a full bounded collection, evicting as
//   many as it writes, against the same bulk put into an unbounded one: budget ≤ 1.3×; beside it,
//   the floor of such a put (the same put deleting as many old records in its transaction with one
//   LMDB cursor, no policy); each collection in a store of its own;
// - the memory of the eviction policy's access state for 1,000,000 records: budget ≤ 16 bytes a record.
//
//   swift run -c release --package-path tools/bench capacity-bench [--records N] [--rounds R]
//       [--skip-gets 1] (the puts alone, for a profile) [--state-records N]
//       [--no-sync 1] (stores that never fsync: the processor's part alone, steadier from run to run)
//       [--put-size N] (one bulk put size alone: 1,000 and 10,000 as in the full run, any other
//       size in batches of 20,000 records a round, for the ratio and its floor against the size)
import BenchModels
import BenchSupport
import Foundation
@_spi(LMDB) import Hoard
import LMDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

let count = option("records", default: 200_000)
let rounds = option("rounds", default: 5)
let stateRecords = option("state-records", default: 1_000_000)
let skipGets = option("skip-gets", default: 0) != 0
let onlySize = option("put-size", default: 0)
guard (0...count).contains(onlySize), onlySize > 0 || count >= 10_000 else {
    // A put replaces as many of the oldest records as it writes: no put may be larger than the collection.
    let problem =
        onlySize == 0
        ? "--records must be at least 10,000 for both put sizes (the larger puts 10,000), not \(count); or give --put-size"
        : "--put-size must be between 1 and --records (\(count)), or 0 for both sizes; not \(onlySize)"
    FileHandle.standardError.write(Data("capacity-bench: \(problem)\n".utf8))
    exit(2)
}
let storeOptions: Store.Options =
    option("no-sync", default: 0) != 0 ? Store.Options(durability: .riskStoreOnOSCrash) : .cache
var rng = SplitMix64(seed: 23)
func member(_ id: Int64) -> Member {
    Member(
        id: id, name: "Member \(id)", email: "member\(id)@example.com", age: Int(id % 90), city: "Lisbon",
        followers: Int(id % 100_000))
}
let members = (0..<Int64(count)).map { member($0 &* 7_919) }
let order = members.indices.shuffled(using: &rng).map { members[$0].id }
let slice = 2_000

// Each collection has a store of its own. In one file, the pages the evicting puts free were
// taken up by the next put of the unbounded collection, whose file then did not grow: a put
// that frees pages made the others' puts cheaper, and its own cost was misread.
let directories = ["unbounded", "bounded", "floor"].map { temporaryDirectory("capacity-\($0)") }
let unboundedStore = try Store(path: directories[0] + "/store", options: storeOptions)
let boundedStore = try Store(path: directories[1] + "/store", options: storeOptions)
let floorStore = try Store(path: directories[2] + "/store", options: storeOptions)
let unbounded = try unboundedStore.collection(Member.self)
let bounded = try boundedStore.collection(Member.self, capacity: .records(count))
// Unbounded too: the floor of an evicting put, a bulk put that deletes as many old records in
// its transaction, with no policy choosing them.
let floor = try floorStore.collection(Member.self)
for batch in stride(from: 0, to: count, by: 10_000) {
    try unbounded.put(members[batch..<min(batch + 10_000, count)])
    try bounded.put(members[batch..<min(batch + 10_000, count)])
    try floor.put(members[batch..<min(batch + 10_000, count)])
}

/// Whether two keys hold the same bytes, with memcmp (as Hoard compares them).
func sameBytes(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
    guard a.count == b.count, let left = a.baseAddress, let right = b.baseAddress else { return a.count == b.count }
    return memcmp(left, right, a.count) == 0
}

// Gets: slice by slice in turn, each pass second every other slice (its pages warm).
func getRound() throws -> (UInt64, UInt64) {
    var (plain, capped) = (UInt64(0), UInt64(0))
    var ages = 0
    for (number, start) in stride(from: 0, to: order.count, by: slice).enumerated() {
        let ids = order[start..<min(start + slice, order.count)]
        for pass in number % 2 == 0 ? [0, 1] : [1, 0] {
            let collection = pass == 0 ? unbounded : bounded
            let t0 = now()
            for id in ids { ages &+= try collection.get(id)?.age ?? 0 }
            if pass == 0 { plain += now() - t0 } else { capped += now() - t0 }
        }
    }
    precondition(ages >= 0)
    return (plain, capped)
}
if !skipGets { _ = try getRound() }
var plainGets: [UInt64] = []
var boundedGets: [UInt64] = []
for _ in 0..<(skipGets ? 0 : rounds) {
    let (p, b) = try getRound()
    plainGets.append(p)
    boundedGets.append(b)
}
precondition(bounded.statistics().removed.evicted == 0, "the get comparison evicted")
let gets =
    plainGets.isEmpty
    ? nil
    : Comparison(
        name: "get, bounded collection (within its bound)", baseline: "get, unbounded collection", operations: count,
        baselineNanos: median(plainGets), candidateNanos: median(boundedGets), budget: 1.1)

// Bulk puts of new records, `size` a transaction, `batches` of them a round: into the full
// bounded collection (each put evicts as many) and into the unbounded one (which grows by as
// much), put by put in turn; beside them, the floor.
var next = Int64(count) &* 7_919 &+ 1
// The floor deletes the records it holds in the order they were written (as the bounded
// collection's policy, with no reads, mostly does), with LMDB alone and nothing of Hoard's.
guard let floorRecords = try floorStore.recordDatabase(of: "Member") else { preconditionFailure("no floor database") }
// The floor's IDs in the order written (which is their key order).
var floorIDs = members.map(\.id)
var oldest = 0
var evictionsExpected = 0
@MainActor func measurePuts(size: Int, batches: Int) throws -> [Comparison] {
    var plainPuts: [UInt64] = []
    var boundedPuts: [UInt64] = []
    var floorPuts: [UInt64] = []
    for round in 0...rounds {
        var (plain, capped, floored) = (UInt64(0), UInt64(0), UInt64(0))
        for number in 0..<batches {
            let batch = (0..<size).map { member(next &+ Int64($0)) }
            // A copy, not a slice: a slice would keep the whole array's buffer, and the append
            // below would then copy all of it (a megabyte and more, with fresh pages, before
            // every put, which flushed the caches between the measured puts).
            let old = Array(floorIDs[oldest..<(oldest + size)])
            floorIDs += batch.map(\.id)
            next &+= Int64(size)
            oldest += size
            for pass in number % 2 == 0 ? [0, 1, 2] : [2, 1, 0] {
                let t0 = now()
                switch pass {
                case 0: try unbounded.put(batch)
                case 1: try bounded.put(batch)
                default:
                    // The cheapest way LMDB has to delete them: one cursor, one seek, then a delete
                    // at the cursor per record (the next record moves under it), with no search each.
                    let deleted = try floorStore.write { txn in
                        try floor.put(batch, in: txn)
                        return try txn.writing.withCursor(in: floorRecords) { cursor in
                            var entry = try old[old.startIndex].withKeyBytes { try cursor.seek(atLeast: $0) }
                            var deleted = 0
                            for id in old {
                                guard let current = entry, id.withKeyBytes({ sameBytes($0, current.key) }) else {
                                    break
                                }
                                try cursor.deleteCurrent()
                                deleted += 1
                                entry = try cursor.current()
                            }
                            return deleted
                        }
                    }
                    precondition(deleted == old.count, "the floor deleted \(deleted) of \(old.count)")
                }
                let elapsed = now() - t0
                switch pass {
                case 0: plain += elapsed
                case 1: capped += elapsed
                default: floored += elapsed
                }
            }
        }
        if round > 0 {  // the first round warms up
            plainPuts.append(plain)
            boundedPuts.append(capped)
            floorPuts.append(floored)
        }
    }
    evictionsExpected += (rounds + 1) * batches * size
    let stored = try bounded.count()
    precondition(stored == count, "the bounded collection holds \(stored) records, not \(count)")
    let evicted = bounded.statistics().removed.evicted
    precondition(evicted == evictionsExpected, "\(evicted) evictions, not \(evictionsExpected)")
    let records = size >= 1_000 ? "\(size / 1_000),\(String(size % 1_000 + 1_000).dropFirst())" : "\(size)"
    return [
        Comparison(
            name: "bulk put of \(records) new records, bounded and full (evicts \(records))",
            baseline: "the same bulk put, unbounded", operations: batches * size, baselineNanos: median(plainPuts),
            candidateNanos: median(boundedPuts), budget: 1.3),
        Comparison(
            name:
                "the floor: the same bulk put deleting \(records) old records in its transaction (one LMDB cursor, no policy)",
            baseline: "the same bulk put, unbounded", operations: batches * size, baselineNanos: median(plainPuts),
            candidateNanos: median(floorPuts), budget: nil),
    ]
}
// 1,000 records a put, as the budget's comparison; 10,000, more than the window holds (1% of the records).
let puts =
    try (onlySize == 0 || onlySize == 1_000 ? measurePuts(size: 1_000, batches: 20) : [])
    + (onlySize == 0 || onlySize == 10_000 ? measurePuts(size: 10_000, batches: 4) : [])
    + ([0, 1_000, 10_000].contains(onlySize) ? [] : measurePuts(size: onlySize, batches: max(2, 20_000 / onlySize)))
report("capacity: \(count) records, \(rounds) rounds (medians)", [gets].compactMap { $0 } + puts)
directories.forEach(removeStore(in:))

// The access state for `stateRecords` records: a bounded collection filled past its capacity
// twice over (so its queues have turned over), with a read of every record.
let stateDirectory = temporaryDirectory("capacity-state")
let stateStore = try Store(path: stateDirectory + "/store", options: .cache)
let large = try stateStore.collection(Member.self, capacity: .records(stateRecords))
var id: Int64 = 0
for _ in 0..<(2 * stateRecords / 10_000) {
    try large.put((0..<10_000).map { member(id &+ Int64($0)) })
    id &+= 10_000
}
for read in stride(from: id - Int64(stateRecords), to: id, by: 1) { _ = try large.get(read) }
let statistics = large.statistics()
let perRecord = Double(statistics.accessStateBytes) / Double(stateRecords)
print(
    "access state for \(stateRecords) records: \(statistics.accessStateBytes) bytes, \(format(perRecord, 2)) bytes a record (budget ≤ 16)"
)
removeStore(in: stateDirectory)
