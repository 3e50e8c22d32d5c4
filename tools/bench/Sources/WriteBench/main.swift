// write-bench: durable single-record writes from concurrent writer tasks, Hoard's async put
// (group commit) against GRDB 7 as its documentation recommends for a service (a DatabasePool
// in WAL mode, one write transaction per write), with `synchronous = FULL` so that both sides
// make every acknowledged write durable. Both hold the same stored records first; each round,
// W tasks each update their share of records with one durable write per update. Rounds of the
// two alternate; the medians are compared. Afterwards both must hold the same models.
// Per side it reports each write's latency (p50, p99) and the flushes its rounds made, counted in
// this process by SyncCounter (fsync, fdatasync, writes through O_DSYNC), with their time: so the
// ratio can be read against what a flush costs on the machine, in the same run.
//
// With --spread 1 a round's writes update records spread over the whole collection (write i of a
// round: record (i × 7919 + round × 104729) mod --records), as a service's updates of profiles,
// sessions or counters are: each lands on a leaf page of its own. Without it they update the
// first --writes records, neighbours. Per side it also reports the write calls and the bytes a
// commit hands the kernel; and at every number of writers the floor: raw LMDB committing the
// same records (Hoard's keys and record bytes) in batches of the sizes Hoard's commits had, from
// one thread.
//
//   write-bench [--records 20000] [--writes 2000] [--rounds 5] [--spread 0] [--profile N]
import BenchModels
import BenchSupport
import CLMDBRaw
import CoreMetrics
import GRDB
import GRDBModels
@_spi(LMDB) import Hoard
import SyncCounter
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

let stored = option("records", default: 20_000)
let writesPerRound = option("writes", default: 2_000)
let rounds = option("rounds", default: 5)
let spread = option("spread", default: 0) != 0

/// The record write `index` of round `round` updates.
func recordID(_ index: Int, round: Int) -> Int {
    // 7919 and 104729 are primes, so distinct indexes of a round reach distinct records as long as
    // --records has no factor 7919 (any round number of records).
    spread ? (index * 7919 + round * 104729) % stored : index % stored
}

func member(_ id: Int, version: Int) -> Member {
    Member(
        id: Int64(id), name: "member \(id)", email: "m\(id)@example.com", age: 20 + id % 50, city: "city \(id % 97)",
        followers: version)
}

/// A round's writes: `writers` tasks, each updating its own IDs in turn, one durable write each.
/// Returns the round's time and each write's own (from its call to its return).
func writeRound(
    writers: Int, round: Int, _ write: @escaping @Sendable (Member) async throws -> Void
) async throws -> (elapsed: UInt64, latencies: [UInt64]) {
    let start = now()
    let latencies = try await withThrowingTaskGroup(of: [UInt64].self) { group in
        for writer in 0..<writers {
            group.addTask {
                var index = writer
                var mine: [UInt64] = []
                while index < writesPerRound {
                    let begun = now()
                    try await write(member(recordID(index, round: round), version: round))
                    mine.append(now() - begun)
                    index += writers
                }
                return mine
            }
        }
        return try await group.reduce(into: [UInt64]()) { $0 += $1 }
    }
    return (now() - start, latencies)
}

/// One side's rounds at one number of writers: times, every write's latency, and the flushes
/// its rounds made (counted by SyncCounter around each round).
struct Side {
    var times: [UInt64] = []
    var latencies: [UInt64] = []
    var flushes = 0
    var flushNanos = 0
    var fileWrites = 0
    var fileWriteBytes = 0

    mutating func measure(_ round: () async throws -> (elapsed: UInt64, latencies: [UInt64])) async rethrows {
        let before = sync_counts()
        let (elapsed, latencies) = try await round()
        let after = sync_counts()
        times.append(elapsed)
        self.latencies += latencies
        flushes += Int(after.fsyncs - before.fsyncs + after.syncedWrites - before.syncedWrites)
        flushNanos += Int(after.fsyncNanos - before.fsyncNanos + after.syncedWriteNanos - before.syncedWriteNanos)
        fileWrites += Int(after.fileWrites - before.fileWrites)
        fileWriteBytes += Int(after.fileWriteBytes - before.fileWriteBytes)
    }

    var writes: Int { latencies.count }
    /// Microseconds a write: the median round's time over its writes.
    var microsPerWrite: Double { Double(median(times)) / Double(writesPerRound) / 1000 }
    var writesPerSecond: Double { Double(writesPerRound) * 1e9 / Double(median(times)) }
    func percentile(_ p: Double) -> Double {
        let sorted = latencies.sorted()
        return Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]) / 1000
    }
    var flushesPerWrite: Double { Double(flushes) / Double(max(writes, 1)) }
    /// Microseconds of one flush (an fsync, an fdatasync or a write through O_DSYNC), on average.
    var microsPerFlush: Double { Double(flushNanos) / Double(max(flushes, 1)) / 1000 }
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
/// The writes each of Hoard's commits carried, as its store reports them (`hoard_commit_writes`,
/// one value a commit, in order): the floor commits the same records in batches of those sizes.
/// Every other instrument is the no-op one a program without a metrics backend gets.
final class CommitSizes: MetricsFactory, RecorderHandler, Sendable {
    private let sizes = Mutex<[Int]>([])
    var count: Int { sizes.withLock { $0.count } }
    /// The sizes recorded from `start` on.
    func sizes(from start: Int) -> [Int] { sizes.withLock { Array($0[start...]) } }

    func record(_ value: Int64) { sizes.withLock { $0.append(Int(value)) } }
    func record(_ value: Double) { record(Int64(value)) }

    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        label == "hoard_commit_writes" ? self : NOOPMetricsHandler.instance
    }
    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        NOOPMetricsHandler.instance
    }
    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler { NOOPMetricsHandler.instance }
    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler { NOOPMetricsHandler.instance }
    func destroyCounter(_ handler: any CounterHandler) {}
    func destroyRecorder(_ handler: any RecorderHandler) {}
    func destroyTimer(_ handler: any TimerHandler) {}
    func destroyMeter(_ handler: any MeterHandler) {}
}
let commitSizes = CommitSizes()
let (hoardStore, hoard) = try openHoard("hoard", options: Store.Options(metricsFactory: commitSizes))
let (_, hoardNoMetaSync) = try openHoard("hoard-nometasync", options: .cache)

/// Hoard's records as the fill stored them, under their key bytes (a record is its header and CBOR
/// payload, 75 to 91 bytes here): the floor writes the same bytes under the same keys, so that a
/// B-tree of the same shape makes its commits rewrite as many pages as Hoard's.
let hoardRecords: [(key: [UInt8], value: [UInt8])] = try hoardStore.environment.read { txn in
    guard let database = try hoardStore.recordDatabase(of: "Member") else { return [] }
    return try (0..<stored).compactMap { id in
        let key = Int64(id).keyBytes
        return try txn.withValue(forKey: key, in: database) { (key, Array($0)) }
    }
}
guard hoardRecords.count == stored else {
    print("write-bench: Hoard's store holds \(hoardRecords.count) of the \(stored) records it was filled with")
    exit(1)
}

/// LMDB through its C API with its default, durable flags: the floor of a lone durable writer.
/// A commit flushes the data file, then writes its meta page through O_DSYNC, as Hoard's does.
/// The records are in a named database, as a Hoard collection's are: a commit then rewrites the
/// database's entry in the main one too, and so flushes a page or two more than it would with the
/// main database alone.
final class RawLMDB {
    private var env: OpaquePointer?
    private var dbi = MDB_dbi()

    init(path: String) {
        mkdir(path, 0o700)
        check("mdb_env_create", mdb_env_create(&env))
        check("mdb_env_set_mapsize", mdb_env_set_mapsize(env, 1 << 30))
        check("mdb_env_set_maxdbs", mdb_env_set_maxdbs(env, 4))
        check("mdb_env_open", mdb_env_open(env, path, UInt32(MDB_NOTLS), 0o600))
        transaction { txn in
            check("mdb_dbi_open", mdb_dbi_open(txn, "Member", UInt32(MDB_CREATE), &dbi))
            for id in 0..<stored { put(id, in: txn) }
        }
    }

    /// A round's writes from one thread, committed durably in batches of `batches` writes (which
    /// add up to the round's): one a batch, a lone writer; the sizes of Hoard's commits in the
    /// same round, the floor under its group commit. A write's latency is its batch's.
    func writeRound(round: Int, batches: [Int]) -> (elapsed: UInt64, latencies: [UInt64]) {
        let start = now()
        var latencies: [UInt64] = []
        var first = 0
        for batch in batches {
            let begun = now()
            transaction { txn in for index in first..<(first + batch) { put(recordID(index, round: round), in: txn) } }
            latencies += repeatElement(now() - begun, count: batch)
            first += batch
        }
        return (now() - start, latencies)
    }

    private func transaction(_ body: (OpaquePointer?) -> Void) {
        var txn: OpaquePointer?
        check("mdb_txn_begin", mdb_txn_begin(env, nil, 0, &txn))
        body(txn)
        check("mdb_txn_commit", mdb_txn_commit(txn))
    }

    /// Writes Hoard's record of `id` under its key (an update's record is as long as the fill's).
    private func put(_ id: Int, in txn: OpaquePointer?) {
        let record = hoardRecords[id]
        record.key.withUnsafeBytes { keyBytes in
            record.value.withUnsafeBytes { valueBytes in
                var k = MDB_val(
                    mv_size: keyBytes.count, mv_data: UnsafeMutableRawPointer(mutating: keyBytes.baseAddress))
                var v = MDB_val(
                    mv_size: valueBytes.count, mv_data: UnsafeMutableRawPointer(mutating: valueBytes.baseAddress))
                check("mdb_put", mdb_put(txn, dbi, &k, &v, 0))
            }
        }
    }

    private func check(_ call: String, _ rc: Int32) {
        guard rc != 0 else { return }
        print("raw LMDB: \(call) failed: \(String(cString: mdb_strerror(rc)))")
        exit(1)
    }
}
let rawLMDB = RawLMDB(path: "\(directory)/raw-lmdb")

// `--profile N`: only Hoard's 64 writers, N rounds, for a profiler; no comparison.
let profileRounds = option("profile", default: 0)
if profileRounds > 0 {
    let start = hoardStore.writeStatistics
    var elapsed: UInt64 = 0
    for round in 0..<profileRounds {
        elapsed += try await writeRound(writers: 64, round: round) { model in try await hoard.put(model) }.elapsed
    }
    let end = hoardStore.writeStatistics
    print(
        "profile: \(profileRounds * writesPerRound) writes by 64 tasks, \(format(Double(elapsed) / Double(profileRounds * writesPerRound) / 1000, 2)) µs a write, \(format(Double(end.writes - start.writes) / Double(end.commits - start.commits), 1)) a commit"
    )
    exit(0)
}

let pool = try openDurableMemberPool(path: "\(directory)/grdb.sqlite")
try pool.write { db in
    for id in 0..<stored { try MemberRow(member(id, version: -1)).insert(db) }
}

print(
    "write-bench: \(stored) records stored, \(writesPerRound) durable single-record writes per round (\(spread ? "records spread over the collection" : "the first \(min(writesPerRound, stored)) records")), \(rounds) rounds (medians)"
)
print("GRDB: DatabasePool, journal_mode=wal, synchronous=FULL (checked); Hoard: durable, async put")
print("")
print(
    "| writers | side | writes/s | µs a write | p50 µs | p99 µs | flushes a write | writes a commit | µs a flush | write calls a commit | KiB written a commit |"
)
print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")

var round = 0
var verdicts: [String] = []
for writers in [1, 8, 64] {
    var grdb = Side()
    var mine = Side()
    // The floor: raw LMDB, in the same rounds, the same records in batches of the sizes Hoard's
    // commits had in that round, in their order (a lone writer: one a commit).
    var rawLone = Side()
    var rawCommits = 0
    let before = hoardStore.writeStatistics
    for _ in 0..<rounds {
        round += 1
        let r = round
        try await grdb.measure {
            try await writeRound(writers: writers, round: r) { model in
                try await pool.write { db in try MemberRow(model).update(db) }
            }
        }
        let recorded = commitSizes.count
        try await mine.measure {
            try await writeRound(writers: writers, round: r) { model in try await hoard.put(model) }
        }
        let batches = commitSizes.sizes(from: recorded)
        let carried = batches.reduce(0, +)
        guard carried == writesPerRound else {
            print("write-bench: Hoard's commits of round \(r) carried \(carried) writes, not \(writesPerRound)")
            exit(1)
        }
        rawCommits += batches.count
        await rawLone.measure { rawLMDB.writeRound(round: r, batches: batches) }
    }
    let after = hoardStore.writeStatistics
    let commits = max(after.commits - before.commits, 1)
    let perCommit = Double(after.writes - before.writes) / Double(commits)
    let rawPerCommit = Double(rounds * writesPerRound) / Double(rawCommits)
    // GRDB makes one transaction a write: a commit holds one write by construction.
    for (name, side, batch, sideCommits) in [
        ("GRDB", grdb, 1.0, Double(grdb.writes)), ("Hoard", mine, perCommit, Double(commits)),
        ("raw LMDB (C API, durable, one thread)", rawLone, rawPerCommit, Double(rawCommits)),
    ] {
        print(
            "| \(writers) | \(name) | \(Int(side.writesPerSecond.rounded())) | \(format(side.microsPerWrite, 1)) | \(format(side.percentile(0.5), 1)) | \(format(side.percentile(0.99), 1)) | \(format(side.flushesPerWrite, 2)) | \(format(batch, 1)) | \(Int(side.microsPerFlush.rounded())) | \(format(Double(side.fileWrites) / sideCommits, 1)) | \(format(Double(side.fileWriteBytes) / sideCommits / 1024, 1)) |"
        )
    }
    verdicts.append(
        "\(writers) writers: Hoard's time a write \(format(mine.microsPerWrite / rawLone.microsPerWrite, 2))× raw LMDB's for the same batches (\(format(mine.microsPerWrite, 1)) against \(format(rawLone.microsPerWrite, 1)) µs)"
    )
    if writers == 1 {
        verdicts.append(
            "A lone durable writer: Hoard \(format(mine.microsPerWrite / grdb.microsPerWrite, 2))× GRDB's time a write, raw LMDB \(format(rawLone.microsPerWrite / grdb.microsPerWrite, 2))× (its floor: \(format(rawLone.flushesPerWrite, 2)) flushes a commit against GRDB's \(format(grdb.flushesPerWrite, 2))); Hoard \(format(mine.microsPerWrite - rawLone.microsPerWrite, 1)) µs a write above raw LMDB"
        )
    }
    let ratio = mine.writesPerSecond / grdb.writesPerSecond
    // What a write would cost if a commit cost only its flushes, shared by the writes it carries.
    let flushesPerCommit = Double(mine.flushes) / Double(commits)
    let floor = flushesPerCommit * mine.microsPerFlush / perCommit
    verdicts.append(
        "\(writers) writers: Hoard \(format(ratio, 2))× GRDB's writes/s; \(format(mine.microsPerWrite, 1)) µs a write against its commit's flushes (\(format(flushesPerCommit, 2)) × \(Int(mine.microsPerFlush.rounded())) µs) shared by \(format(perCommit, 1)) writes: \(format(floor, 1)) µs, so \(format(mine.microsPerWrite - floor, 1)) µs a write above them"
    )
}
print("")
for verdict in verdicts { print(verdict) }

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
        }.elapsed)
    hoardLone.append(
        try await writeRound(writers: 1, round: r) { model in try await hoardNoMetaSync.put(model) }.elapsed)
}
print("")
print(
    "Lone writer, Hoard with Store.Options.cache (.riskLastCommitOnOSCrash, MDB_NOMETASYNC): \(format(Double(median(hoardLone)) / Double(writesPerRound) / 1000, 1)) µs per write; GRDB in the same rounds \(format(Double(median(grdbLone)) / Double(writesPerRound) / 1000, 1)) µs"
)
print("")
print("validated: GRDB and Hoard held the same \(stored) models after the rounds")
