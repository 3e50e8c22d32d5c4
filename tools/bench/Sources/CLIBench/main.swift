// cli-bench: `hoard verify` and `hoard stat` on a store of N Member records, each
// against a walk of the same records with the C API (a cursor over every record) in the same run;
// `hoard dump` against LMDB's `mdb_dump`, and `hoard dump | hoard load` against
// `mdb_dump | mdb_load` with the loader's peak memory. mdb_dump and mdb_load are
// Debian's lmdb-utils (`apt-get install lmdb-utils`; without them those rows are skipped).
//
//   swift build -c release --product hoard                      (at the repository root)
//   swift run -c release --package-path tools/bench cli-bench [--records N] [--rounds R] [--keep DIR]
//
// The hoard binary is ../../.build/release/hoard relative to this package, or $HOARD_BIN.
import BenchModels
import BenchSupport
import CLMDBRaw
import Hoard
import LMDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

let count = option("records", default: 1_000_000)
let rounds = option("rounds", default: 5)
let hoardBinary = getenv("HOARD_BIN").map { String(cString: $0) } ?? "../../.build/release/hoard"
guard access(hoardBinary, X_OK) == 0 else {
    print("error: \(hoardBinary) is not built; run `swift build -c release --product hoard` at the repository root")
    exit(1)
}

// A store of `count` members, a tenth of them in key-set version 1 so that stat has versions to count.
// With `--keep DIR`, the store is DIR/store, made only when it is not there, and left afterwards
// (to profile `hoard` on it by hand).
let kept = CommandLine.arguments.firstIndex(of: "--keep").flatMap {
    $0 + 1 < CommandLine.arguments.count ? CommandLine.arguments[$0 + 1] : nil
}
let directory = kept ?? temporaryDirectory("cli")
let path = directory + "/store"
if kept != nil { mkdir(directory, 0o700) }
if kept == nil || access(path + "/data.mdb", F_OK) != 0 {

    var rng = SplitMix64(seed: 7)
    let store = try Store(path: path, options: .init(durability: .riskStoreOnOSCrash))
    let collection = try store.collection(Member.self)
    var next = 0
    while next < count {
        let batch = (next..<min(count, next + 100_000)).map { i in
            Member(
                id: Int64(i), name: "Member \(i)", email: "member\(i)@example.com",
                age: Int(rng.next() % 90), city: "Lisbon", followers: Int(rng.next() % 100_000))
        }
        try collection.put(batch)
        next += batch.count
    }
}

/// Runs `hoard ARGUMENTS` with output to /dev/null; returns the wall time in nanoseconds.
func runHoard(_ arguments: [String]) -> UInt64 {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    let argv = ([hoardBinary] + arguments).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    let start = now()
    var pid: pid_t = 0
    guard posix_spawn(&pid, hoardBinary, &actions, nil, argv, environ) == 0 else {
        print("error: cannot start \(hoardBinary)")
        exit(1)
    }
    var status: Int32 = 0
    waitpid(pid, &status, 0)
    let elapsed = now() - start
    guard status == 0 else {
        print("error: hoard \(arguments) failed with status \(status)")
        exit(1)
    }
    return elapsed
}

/// The baseline: open the environment with the C API and walk every record with a cursor,
/// touching each value's first bytes (what any reader must at least do).
func rawWalk() -> UInt64 {
    let start = now()
    var env: OpaquePointer?
    mdb_env_create(&env)
    mdb_env_set_maxdbs(env, 64)
    mdb_env_open(env, path, UInt32(MDB_RDONLY | MDB_NOTLS), 0o600)
    var txn: OpaquePointer?
    mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn)
    var dbi = MDB_dbi()
    mdb_dbi_open(txn, "c:Member", 0, &dbi)
    var cursor: OpaquePointer?
    mdb_cursor_open(txn, dbi, &cursor)
    var key = MDB_val(), value = MDB_val()
    var sum = 0
    var rc = mdb_cursor_get(cursor, &key, &value, MDB_FIRST)
    while rc == 0 {
        sum &+= Int(value.mv_data.load(fromByteOffset: 4, as: UInt8.self))
        rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)
    }
    mdb_cursor_close(cursor)
    mdb_txn_abort(txn)
    mdb_env_close(env)
    precondition(sum >= 0)
    return now() - start
}

let verify = compare(
    "hoard verify", baseline: "C cursor walk", operations: count, rounds: rounds, baselineRound: rawWalk
) {
    runHoard(["verify", path])
}
let stat = compare("hoard stat", baseline: "C cursor walk", operations: count, rounds: rounds, baselineRound: rawWalk) {
    runHoard(["stat", path])
}

// MARK: - dump and load

/// A program on PATH, or nil.
func findProgram(_ name: String) -> String? {
    let directories = (getenv("PATH").map { String(cString: $0) } ?? "/usr/bin:/bin").split(separator: ":")
    return directories.map { "\($0)/\(name)" }.first { access($0, X_OK) == 0 }
}

/// Runs `first | second` (second's output to /dev/null); returns the wall time and the peak
/// resident memory of each process in bytes.
func runPipeline(_ first: [String], _ second: [String]? = nil) -> (nanos: UInt64, firstPeak: Int, secondPeak: Int) {
    var fds: [Int32] = [0, 0]
    guard pipe(&fds) == 0 else {
        print("error: pipe failed")
        exit(1)
    }
    func spawn(_ argv: [String], stdin: Int32?, stdout: Int32?) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let stdin { posix_spawn_file_actions_adddup2(&actions, stdin, 0) }
        if let stdout {
            posix_spawn_file_actions_adddup2(&actions, stdout, 1)
        } else {
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        }
        posix_spawn_file_actions_addclose(&actions, fds[0])
        posix_spawn_file_actions_addclose(&actions, fds[1])
        let cArgs = argv.map { strdup($0) } + [nil]
        defer { cArgs.forEach { free($0) } }
        var pid: pid_t = 0
        guard posix_spawn(&pid, argv[0], &actions, nil, cArgs, environ) == 0 else {
            print("error: cannot start \(argv[0])")
            exit(1)
        }
        return pid
    }
    let start = now()
    let a = spawn(first, stdin: nil, stdout: second == nil ? nil : fds[1])
    let b = second.map { spawn($0, stdin: fds[0], stdout: nil) }
    close(fds[0])
    close(fds[1])
    func reap(_ pid: pid_t, _ argv: [String]) -> Int {
        var status: Int32 = 0
        var usage = rusage()
        wait4(pid, &status, 0, &usage)
        guard status == 0 else {
            print("error: \(argv.joined(separator: " ")) failed with status \(status)")
            exit(1)
        }
        return usage.ru_maxrss * 1024  // kilobytes on Linux
    }
    let firstPeak = reap(a, first)
    let secondPeak = b.map { reap($0, second!) } ?? 0
    return (now() - start, firstPeak, secondPeak)
}

/// A fresh directory for a load target, removed with its store before the next round.
func freshTarget(_ name: String) -> String {
    let target = directory + "/" + name
    unlink(target + "/data.mdb")
    unlink(target + "/lock.mdb")
    rmdir(target)
    mkdir(target, 0o700)
    return target
}

var comparisons = [verify, stat]
var loadPeaks: [Int] = []
var mdbLoadPeak = 0
if let mdbDump = findProgram("mdb_dump"), let mdbLoad = findProgram("mdb_load") {
    let dump = compare("hoard dump", baseline: "mdb_dump -a", operations: count, rounds: rounds, budget: 2) {
        runPipeline([mdbDump, "-a", path]).nanos
    } candidateRound: {
        runPipeline([hoardBinary, "dump", path]).nanos
    }
    let load = compare(
        "hoard dump \\| hoard load", baseline: "mdb_dump -a \\| mdb_load", operations: count, rounds: rounds, budget: 2
    ) {
        let run = runPipeline([mdbDump, "-a", path], [mdbLoad, freshTarget("mdb-load")])
        mdbLoadPeak = max(mdbLoadPeak, run.secondPeak)
        return run.nanos
    } candidateRound: {
        let run = runPipeline([hoardBinary, "dump", path], [hoardBinary, "load", freshTarget("hoard-load")])
        loadPeaks.append(run.secondPeak)
        return run.nanos
    }
    comparisons += [dump, load]
    _ = freshTarget("mdb-load")
    _ = freshTarget("hoard-load")
    rmdir(directory + "/mdb-load")
    rmdir(directory + "/hoard-load")
} else {
    print("note: mdb_dump/mdb_load not found (Debian: apt-get install lmdb-utils); dump and load not measured")
}

report("hoard on \(count) records (process start included)", comparisons)
print("verify: \(format(Double(count) / (Double(verify.candidateNanos) / 1e9), 0)) records/s (budget ≥ 500,000)")
print("stat:   \(format(Double(stat.candidateNanos) / 1e9, 3)) s (budget < 1 s)")
if let peak = loadPeaks.max() {
    print(
        "load:   peak memory of hoard load \(peak >> 20) MiB (largest of \(loadPeaks.count) rounds; budget < 200 MB), mdb_load \(mdbLoadPeak >> 20) MiB"
    )
}
if kept == nil {
    unlink(path + "/data.mdb")
    unlink(path + "/lock.mdb")
    rmdir(path)
    rmdir(directory)
}
