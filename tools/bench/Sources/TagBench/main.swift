// tag-bench: what tags cost. Each row times the same records both ways in alternating rounds
// (BenchSupport.compare). All but one run on a store that does not flush (`riskStoreOnOSCrash`),
// so that the figures are the work of the write rather than the disk's flush (which a commit pays
// once, whatever it holds).
//
// 1. An update of an existing record with its 2 tags, against the same update without tags
//    (which leaves them): 100 puts a write transaction over a collection of N records.
// 2. A put of a new record with 2 tags, against a put of a new record without.
//    (No budget on these two: the index's entries are B-tree writes of their own.)
// 2a. As a service calls it: `await put(_:tags:)` against `await put(_:)`, one at a time on a
//    store that flushes each commit (`.cache`), 2,000 updates. Budget: ≤ 1.3×.
// 3. invalidate(tag:) removing 10,000 records in one transaction, against deleting the same
//    records by key in one transaction.
// 4. The write of a "not modified" answer (touch) against a put of the same model, 100 a
//    transaction: budget ≤ 0.5×. Then the whole revalidating read-through of an expired record
//    answered "not modified", against the same get answered with the model: one get each, all
//    misses, where the miss path's own cost (a task, the hand-over to the writer) weighs most.
//
//   swift run -c release --package-path tools/bench tag-bench [--records N] [--rounds R]
import BenchModels
import BenchSupport
import Foundation
import Hoard
import LMDB

let count = option("records", default: 100_000)
let rounds = option("rounds", default: 7)
let batch = 100
var rng = SplitMix64(seed: 63)
let members = (0..<count).map { i in
    Member(
        id: Int64(i), name: "Member \(i)", email: "member\(i)@example.com", age: Int(rng.next() % 90),
        city: "Lisbon", followers: Int(rng.next() % 100_000))
}
let memberIDs = members.map(\.id)
let memberTags = members.map { ["team:\($0.id % 100)", "city:\($0.city)"] }
func tags(of member: Member) -> [String] { memberTags[Int(member.id) % count] }

var options = Store.Options.cache
options.durability = .riskStoreOnOSCrash
let directory = temporaryDirectory("tags")
let store = try Store(path: directory + "/store", options: options)
let tagged = try store.collection(Member.self, named: "tagged")
let plain = try store.collection(Member.self, named: "plain")
for start in stride(from: 0, to: count, by: 1_000) {
    let slice = members[start..<min(start + 1_000, count)]
    try store.write { txn in
        for member in slice { try tagged.put(member, tags: tags(of: member), in: txn) }
        try plain.put(Array(slice), in: txn)
    }
}

/// Nanoseconds to run `body` on every item (a member, or only an ID where that is what the
/// caller has), `batch` a write transaction.
func timed<Item>(
    _ items: ArraySlice<Item>, _ body: (Item, borrowing Hoard.WriteTransaction) throws -> Void
) throws -> UInt64 {
    let start = now()
    for first in stride(from: items.startIndex, to: items.endIndex, by: batch) {
        try store.write { txn in
            for item in items[first..<min(first + batch, items.endIndex)] { try body(item, txn) }
        }
    }
    return now() - start
}

var comparisons: [Comparison] = []
comparisons.append(
    try compare(
        "update with its 2 tags, 100 a transaction", baseline: "update without tags", operations: count,
        rounds: rounds,
        baselineRound: { try timed(members[...]) { member, txn in try plain.put(member, in: txn) } },
        candidateRound: {
            try timed(members[...]) { member, txn in try tagged.put(member, tags: tags(of: member), in: txn) }
        }))

// New records: each round puts 10,000 records with IDs no round used before, into both collections.
let fresh = 10_000
var nextID = Int64(count)
@MainActor func newMembers() -> ArraySlice<Member> {
    defer { nextID += Int64(fresh) }
    return members[0..<fresh].map {
        var m = $0; m.id += nextID; return m
    }[...]
}
comparisons.append(
    try compare(
        "new record with 2 tags, 100 a transaction", baseline: "new record without tags", operations: fresh,
        rounds: rounds,
        baselineRound: { try timed(newMembers()) { member, txn in try plain.put(member, in: txn) } },
        candidateRound: {
            try timed(newMembers()) { member, txn in try tagged.put(member, tags: tags(of: member), in: txn) }
        }))

// As a service calls them: one async put at a time on a store that flushes each commit (the
// `.cache` options), updates of existing records, with their tags and without.
let flushingDirectory = temporaryDirectory("tags-flushing")
let flushing = try Store(path: flushingDirectory + "/store", options: .cache)
let flushingTagged = try flushing.collection(Member.self, named: "tagged")
let flushingPlain = try flushing.collection(Member.self, named: "plain")
let called = Array(members[0..<2_000])
for member in called {
    try flushingTagged.put(member, tags: tags(of: member))
    try flushingPlain.put(member)
}
nonisolated func callEach(
    _ collection: HoardCollection<Member>, tagged: Bool, _ tags: [[String]]
) async throws -> UInt64 {
    let start = now()
    for (member, memberTags) in zip(called, tags) {
        if tagged { try await collection.put(member, tags: memberTags) } else { try await collection.put(member) }
    }
    return now() - start
}
let calledTags = called.map(tags(of:))
var calledPlain: [UInt64] = []
var calledTagged: [UInt64] = []
for round in 0...rounds {
    for tagged in round.isMultiple(of: 2) ? [false, true] : [true, false] {
        let nanos = try await callEach(tagged ? flushingTagged : flushingPlain, tagged: tagged, calledTags)
        if round > 0 { if tagged { calledTagged.append(nanos) } else { calledPlain.append(nanos) } }
    }
}
comparisons.append(
    Comparison(
        name: "await put(_:tags:) of a record with its 2 tags, a commit each", baseline: "await put(_:), a commit each",
        operations: called.count, baselineNanos: median(calledPlain), candidateNanos: median(calledTagged), budget: 1.3,
        roundRatio: median(zip(calledTagged, calledPlain).map { Double($0) / Double(max($1, 1)) })))
removeStore(in: flushingDirectory)

// 10,000 records tagged "group", put back before each timed removal (not timed).
let group = Array(members[0..<10_000])
let groupIDs = group.map(\.id)
comparisons.append(
    try compare(
        "invalidate(tag:) of 10,000 records", baseline: "delete of the same 10,000 by key", operations: group.count,
        rounds: rounds, budget: 1.5,
        baselineRound: {
            try store.write { txn in for member in group { try plain.put(member, in: txn) } }
            let start = now()
            try store.write { txn in for id in groupIDs { try plain.delete(id, in: txn) } }
            return now() - start
        },
        candidateRound: {
            try store.write { txn in for member in group { try tagged.put(member, tags: ["group"], in: txn) } }
            let start = now()
            let removed = try store.write { txn in try tagged.invalidate(tag: "group", in: txn) }
            precondition(removed == group.count)
            return now() - start
        }))

// The write of a "not modified" answer, touch (a new header, the payload copied), against the
// write of a model answer, a put (the model encoded), 100 a transaction. Each as a caller makes
// it: a put of a model, a touch of the ID the answer came for.
comparisons.append(
    try compare(
        "touch (a \"not modified\" answer's write), 100 a transaction", baseline: "put of the same model",
        operations: count, rounds: rounds, budget: 0.5,
        baselineRound: { try timed(members[...]) { member, txn in try plain.put(member, in: txn) } },
        candidateRound: {
            try timed(memberIDs[...]) { id, txn in
                let touched = try plain.touch(id, in: txn)
                precondition(touched)
            }
        }))

// Revalidation of expired records, one get each: "not modified" renews the stored record, a
// model answer writes it again. Each round expires the records first (not timed).
let revalidated = Array(members[0..<5_000])
nonisolated func revalidate(_ collection: HoardCollection<Member>, notModified: Bool) async throws -> UInt64 {
    try await collection.put(revalidated, expiry: .at(Date(timeIntervalSince1970: 1)))
    let start = now()
    for member in revalidated {
        _ = try await collection.get(member.id) { _, stored in
            notModified ? .notModified() : .model(stored ?? member)
        }
    }
    return now() - start
}
var renewals: [UInt64] = []
var rewrites: [UInt64] = []
_ = try await revalidate(plain, notModified: true)
_ = try await revalidate(plain, notModified: false)
for round in 0..<rounds {
    for notModified in round.isMultiple(of: 2) ? [true, false] : [false, true] {
        let nanos = try await revalidate(plain, notModified: notModified)
        if notModified { renewals.append(nanos) } else { rewrites.append(nanos) }
    }
}
comparisons.append(
    Comparison(
        name: "revalidating get answered \"not modified\"", baseline: "the same get answered with the model",
        operations: revalidated.count, baselineNanos: median(rewrites), candidateNanos: median(renewals),
        roundRatio: median(zip(renewals, rewrites).map { Double($0) / Double(max($1, 1)) })))

report("tags and revalidation, \(count) records, \(rounds) rounds (medians), a store that does not flush", comparisons)
removeStore(in: directory)
