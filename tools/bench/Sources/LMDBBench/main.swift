// lmdb-bench: the Swift LMDB layer against the same operations made directly on the C API,
// on the same data, in the same run. Budget: the Swift layer ≤ 1.15× the C calls.
//
//   swift run -c release --package-path tools/bench lmdb-bench [--records N] [--rounds R]
import BenchSupport
import CLMDBRaw
import LMDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

let records = option("records", default: 200_000)
let rounds = option("rounds", default: 9)
let shortTransactions = min(records, 50_000)
let valueSize = 100
let mapSize = 1 << 30

/// Keys: 8 bytes big-endian of a spread-out number; values: `valueSize` bytes.
var rng = SplitMix64(seed: 42)
let keys: [UInt8] = (0..<records).flatMap { i -> [UInt8] in
    let n = UInt64(i) &* 0x9E37_79B9
    return withUnsafeBytes(of: n.bigEndian) { Array($0) }
}
let value = [UInt8]((0..<valueSize).map { UInt8(truncatingIfNeeded: $0) })
let putOrder = Array(0..<records).shuffled(using: &rng)
let getOrder = Array(0..<records).shuffled(using: &rng)

func fail(_ what: String, _ rc: Int32) -> Never {
    print("error: \(what) failed: \(String(cString: mdb_strerror(rc)))")
    exit(1)
}

// MARK: - The C baseline

final class RawStore {
    var env: OpaquePointer?
    var dbi = MDB_dbi()

    init(path: String) {
        var rc = mdb_env_create(&env)
        if rc != 0 { fail("mdb_env_create", rc) }
        mdb_env_set_mapsize(env, mapSize)
        mdb_env_set_maxdbs(env, 4)
        rc = mdb_env_open(env, path, UInt32(MDB_NOTLS | MDB_NOSYNC), 0o600)
        if rc != 0 { fail("mdb_env_open", rc) }
        var txn: OpaquePointer?
        mdb_txn_begin(env, nil, 0, &txn)
        rc = mdb_dbi_open(txn, "bench", UInt32(MDB_CREATE), &dbi)
        if rc != 0 { fail("mdb_dbi_open", rc) }
        mdb_txn_commit(txn)
    }

    func clear() {
        var txn: OpaquePointer?
        mdb_txn_begin(env, nil, 0, &txn)
        mdb_drop(txn, dbi, 0)
        mdb_txn_commit(txn)
    }

    func putAll(_ keyBytes: UnsafeRawBufferPointer, _ valueBytes: UnsafeRawBufferPointer) {
        var txn: OpaquePointer?
        mdb_txn_begin(env, nil, 0, &txn)
        var v = MDB_val(mv_size: valueBytes.count, mv_data: UnsafeMutableRawPointer(mutating: valueBytes.baseAddress))
        for i in putOrder {
            var k = MDB_val(mv_size: 8, mv_data: UnsafeMutableRawPointer(mutating: keyBytes.baseAddress! + i * 8))
            let rc = mdb_put(txn, dbi, &k, &v, 0)
            if rc != 0 { fail("mdb_put", rc) }
        }
        let rc = mdb_txn_commit(txn)
        if rc != 0 { fail("mdb_txn_commit", rc) }
    }

    func getAll(_ keyBytes: UnsafeRawBufferPointer) -> Int {
        var txn: OpaquePointer?
        mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn)
        var total = 0
        var v = MDB_val()
        for i in getOrder {
            var k = MDB_val(mv_size: 8, mv_data: UnsafeMutableRawPointer(mutating: keyBytes.baseAddress! + i * 8))
            if mdb_get(txn, dbi, &k, &v) == 0 { total &+= v.mv_size }
        }
        mdb_txn_abort(txn)
        return total
    }

    func getEachInOwnTransaction(_ keyBytes: UnsafeRawBufferPointer) -> Int {
        var total = 0
        var v = MDB_val()
        for i in getOrder.prefix(shortTransactions) {
            var txn: OpaquePointer?
            mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn)
            var k = MDB_val(mv_size: 8, mv_data: UnsafeMutableRawPointer(mutating: keyBytes.baseAddress! + i * 8))
            if mdb_get(txn, dbi, &k, &v) == 0 { total &+= v.mv_size }
            mdb_txn_abort(txn)
        }
        return total
    }
}

// MARK: - The Swift layer

struct SwiftStore {
    let env: Environment
    let db: Database

    init(path: String) throws {
        env = try Environment(path: path, options: .init(mapSize: mapSize, durability: .riskStoreOnOSCrash))
        db = try env.openDatabase("bench", create: true)
    }

    func clear() throws { try env.write { txn in try txn.clear(db) } }

    func putAll(_ keyBytes: UnsafeRawBufferPointer, _ valueBytes: UnsafeRawBufferPointer) throws {
        try env.write { txn in
            for i in putOrder {
                try txn.put(valueBytes, forKey: UnsafeRawBufferPointer(rebasing: keyBytes[i * 8..<i * 8 + 8]), in: db)
            }
        }
    }

    func getAll(_ keyBytes: UnsafeRawBufferPointer) throws -> Int {
        try env.read { txn in
            var total = 0
            for i in getOrder {
                total &+=
                    try txn.withValue(forKey: UnsafeRawBufferPointer(rebasing: keyBytes[i * 8..<i * 8 + 8]), in: db) {
                        $0.count
                    } ?? 0
            }
            return total
        }
    }

    func getEachInOwnTransaction(_ keyBytes: UnsafeRawBufferPointer) throws -> Int {
        var total = 0
        for i in getOrder.prefix(shortTransactions) {
            total &+= try env.read { txn in
                try txn.withValue(forKey: UnsafeRawBufferPointer(rebasing: keyBytes[i * 8..<i * 8 + 8]), in: db) {
                    $0.count
                } ?? 0
            }
        }
        return total
    }
}

// MARK: - Run

let directory = temporaryDirectory("lmdb")
let cPath = directory + "/c"
let swiftPath = directory + "/swift"
mkdir(cPath, 0o700)
let raw = RawStore(path: cPath)
let wrapped = try SwiftStore(path: swiftPath)

print(
    "lmdb-bench: \(records) records, 8-byte keys, \(valueSize)-byte values, \(rounds) rounds (medians), NOSYNC on both sides"
)
print("")

var sink = 0
let comparisons = try keys.withUnsafeBytes { keyBytes in
    try value.withUnsafeBytes { valueBytes in
        let put = try compare(
            "put \(records) in one transaction", baseline: "C mdb_put", operations: records, rounds: rounds,
            budget: 1.15,
            baselineRound: {
                raw.clear(); return time { raw.putAll(keyBytes, valueBytes) }
            },
            candidateRound: {
                try wrapped.clear(); return try time { try wrapped.putAll(keyBytes, valueBytes) }
            }
        )
        let get = try compare(
            "get \(records) in one read transaction", baseline: "C mdb_get", operations: records, rounds: rounds,
            budget: 1.15,
            baselineRound: { time { sink &+= raw.getAll(keyBytes) } },
            candidateRound: { try time { sink &+= try wrapped.getAll(keyBytes) } }
        )
        let short = try compare(
            "read transaction + 1 get, \(shortTransactions)×", baseline: "C begin/get/abort",
            operations: shortTransactions, rounds: rounds,
            baselineRound: { time { sink &+= raw.getEachInOwnTransaction(keyBytes) } },
            candidateRound: { try time { sink &+= try wrapped.getEachInOwnTransaction(keyBytes) } }
        )
        return [put, get, short]
    }
}
let ok = report("Swift LMDB layer vs the C API", comparisons)
if sink == 42 { print("") }  // keeps the reads from being optimized away
removeDirectory(directory)
exit(ok ? 0 : 1)

func removeDirectory(_ path: String) {
    for sub in ["/c", "/swift"] {
        unlink(path + sub + "/data.mdb")
        unlink(path + sub + "/lock.mdb")
        rmdir(path + sub)
    }
    rmdir(path)
}
