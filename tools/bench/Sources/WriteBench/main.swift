// write-bench: durable single-record writes from concurrent writer tasks, Hoard's async put
// (group commit) against GRDB 7 as its documentation recommends for a service (a DatabasePool
// in WAL mode, one write transaction per write), with `synchronous = FULL` so that both sides
// make every acknowledged write durable. Both hold the same stored records first; each round,
// W tasks each update their share of records with one durable write per update. Rounds of the
// two alternate; the medians are compared. Afterwards both must hold the same models.
//
//   write-bench [--records 20000] [--writes 2000] [--rounds 5]
import BenchModels
import BenchSupport
import GRDB
import GRDBModels
import Hoard

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

let stored = option("records", default: 20_000)
let writesPerRound = option("writes", default: 2_000)
let rounds = option("rounds", default: 5)

func member(_ id: Int, version: Int) -> Member {
    Member(
        id: Int64(id), name: "member \(id)", email: "m\(id)@example.com", age: 20 + id % 50, city: "city \(id % 97)",
        followers: version)
}

/// A round's writes: `writers` tasks, each updating its own IDs in turn, one durable write each.
func writeRound(
    writers: Int, round: Int, _ write: @escaping @Sendable (Member) async throws -> Void
) async throws -> UInt64 {
    let start = now()
    try await withThrowingTaskGroup(of: Void.self) { group in
        for writer in 0..<writers {
            group.addTask {
                var index = writer
                while index < writesPerRound {
                    try await write(member(index % stored, version: round))
                    index += writers
                }
            }
        }
        try await group.waitForAll()
    }
    return now() - start
}

let directory = temporaryDirectory("write")
defer { _ = system("rm -rf '\(directory)'") }

// Hoard, durable (the default), and the options for a cache (no meta sync: the last commit may be
// undone by an operating-system crash) for the lone writer.
func openHoard(_ name: String, options: Store.Options) throws -> (Store, HoardCollection<Member>) {
    let store = try Store(path: "\(directory)/\(name)", options: options)
    let members = try store.collection(Member.self)
    try members.put((0..<stored).map { member($0, version: -1) })
    return (store, members)
}
let (hoardStore, hoard) = try openHoard("hoard", options: Store.Options())
let (_, hoardNoMetaSync) = try openHoard("hoard-nometasync", options: .cache)

let pool = try openDurableMemberPool(path: "\(directory)/grdb.sqlite")
try pool.write { db in
    for id in 0..<stored { try MemberRow(member(id, version: -1)).insert(db) }
}

print(
    "write-bench: \(stored) records stored, \(writesPerRound) durable single-record writes per round, \(rounds) rounds (medians)"
)
print("GRDB: DatabasePool, journal_mode=wal, synchronous=FULL (checked); Hoard: durable, async put")
print("")
print(
    "| writers | GRDB writes/s | Hoard writes/s | Hoard ÷ GRDB | µs per write, GRDB | µs per write, Hoard | writes per commit, Hoard |"
)
print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")

var round = 0
for writers in [1, 8, 64] {
    var grdbTimes: [UInt64] = []
    var hoardTimes: [UInt64] = []
    let before = hoardStore.writeStatistics
    for _ in 0..<rounds {
        round += 1
        let r = round
        grdbTimes.append(
            try await writeRound(writers: writers, round: r) { model in
                try await pool.write { db in try MemberRow(model).update(db) }
            })
        hoardTimes.append(try await writeRound(writers: writers, round: r) { model in try await hoard.put(model) })
    }
    let after = hoardStore.writeStatistics
    let batched = Double(after.writes - before.writes) / Double(max(after.commits - before.commits, 1))
    let grdb = median(grdbTimes), mine = median(hoardTimes)
    let perSecond = { (nanos: UInt64) in Double(writesPerRound) * 1e9 / Double(nanos) }
    print(
        "| \(writers) | \(format(perSecond(grdb), 0)) | \(format(perSecond(mine), 0)) | \(format(perSecond(mine) / perSecond(grdb), 2))× | \(format(Double(grdb) / Double(writesPerRound) / 1000, 1)) | \(format(Double(mine) / Double(writesPerRound) / 1000, 1)) | \(format(batched, 1)) |"
    )
}

// Validation: both wrote the same models in the same rounds.
func validate(_ hoard: HoardCollection<Member>, _ what: String) throws {
    let fromGRDB = try pool.read { db in try MemberRow.order(Column("id")).fetchAll(db) }
    let fromHoard = try hoard.scan().map { MemberRow($0) }
    guard fromGRDB == fromHoard, fromHoard.count == stored else {
        print("VALIDATION FAILED: GRDB and \(what) hold different models")
        exit(1)
    }
}
try validate(hoard, "Hoard")

// The lone writer in LMDB's no-meta-sync mode, against the same GRDB.
var grdbLone: [UInt64] = []
var hoardLone: [UInt64] = []
for _ in 0..<rounds {
    round += 1
    let r = round
    grdbLone.append(
        try await writeRound(writers: 1, round: r) { model in
            try await pool.write { db in try MemberRow(model).update(db) }
        })
    hoardLone.append(try await writeRound(writers: 1, round: r) { model in try await hoardNoMetaSync.put(model) })
}
print("")
print(
    "Lone writer, Hoard with Store.Options.cache (.riskLastCommitOnOSCrash, MDB_NOMETASYNC): \(format(Double(median(hoardLone)) / Double(writesPerRound) / 1000, 1)) µs per write; GRDB in the same rounds \(format(Double(median(grdbLone)) / Double(writesPerRound) / 1000, 1)) µs"
)
print("")
print("validated: GRDB and Hoard held the same \(stored) models after the rounds")
