// store-bench: Hoard collections against the same bytes put and got directly with the C API,
// and records written two versions ago against current ones, in the same run.
//
//   swift run -c release --package-path tools/bench store-bench [--records N] [--rounds R]
import BenchModels
import BenchSupport
import CBOR
import CLMDBRaw
@_spi(LMDB) import Hoard
import LMDB
import VariableCoding

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

let count = option("records", default: 1_000_000)
let rounds = option("rounds", default: 5)
var rng = SplitMix64(seed: 11)
let cities = ["Berlin", "Lisbon", "Osaka", "Nairobi", "Montréal", "São Paulo"]
let members = (0..<count).map { i in
    Member(
        id: Int64(i) &* 7_919, name: "Member \(i)", email: "member\(i)@example.com",
        age: Int(rng.next() % 90), city: cities[Int(rng.next() % 6)], followers: Int(rng.next() % 100_000))
}
let getOrder = members.indices.shuffled(using: &rng)
nonisolated(unsafe) var sink = 0

// The exact records Hoard writes, for the C baseline to put and get: put through a scratch store
// and read back.
let keys = members.map { $0.id.keyBytes }
let records = try exactRecords(of: members)

func fail(_ what: String, _ rc: Int32) -> Never {
    print("error: \(what): \(String(cString: mdb_strerror(rc)))")
    exit(1)
}

// MARK: - The C baseline

nonisolated(unsafe) var rawEnv: OpaquePointer?  // single-threaded benchmark
nonisolated(unsafe) var rawDBI = MDB_dbi()
let directory = temporaryDirectory("store")
mkdir(directory + "/c", 0o700)
if mdb_env_create(&rawEnv) != 0 { fail("mdb_env_create", -1) }
mdb_env_set_mapsize(rawEnv, 8 << 30)
mdb_env_set_maxdbs(rawEnv, 4)
if case let rc = mdb_env_open(rawEnv, directory + "/c", UInt32(MDB_NOTLS | MDB_NOSYNC), 0o600), rc != 0 {
    fail("mdb_env_open", rc)
}
do {
    var txn: OpaquePointer?
    mdb_txn_begin(rawEnv, nil, 0, &txn)
    mdb_dbi_open(txn, "c:Member", UInt32(MDB_CREATE), &rawDBI)
    mdb_txn_commit(txn)
}

/// The records put with `mdb_put` in key order, with `MDB_APPEND` as a bulk put of models in key
/// order stores them (`append: false` for a put call each, which searches every key).
func rawPutAll(append: Bool = true) -> UInt64 {
    let flags = append ? UInt32(MDB_APPEND) : 0
    var txn: OpaquePointer?
    mdb_txn_begin(rawEnv, nil, 0, &txn)
    mdb_drop(txn, rawDBI, 0)
    mdb_txn_commit(txn)
    return time {
        mdb_txn_begin(rawEnv, nil, 0, &txn)
        for i in 0..<count {
            keys[i].withUnsafeBytes { k in
                records[i].withUnsafeBytes { v in
                    var key = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
                    var value = MDB_val(mv_size: v.count, mv_data: UnsafeMutableRawPointer(mutating: v.baseAddress))
                    let rc = mdb_put(txn, rawDBI, &key, &value, flags)
                    if rc != 0 { fail("mdb_put", rc) }
                }
            }
        }
        let rc = mdb_txn_commit(txn)
        if rc != 0 { fail("mdb_txn_commit", rc) }
    }
}

func rawGetAll() -> UInt64 {
    time {
        var txn: OpaquePointer?
        mdb_txn_begin(rawEnv, nil, UInt32(MDB_RDONLY), &txn)
        var value = MDB_val()
        for i in getOrder {
            keys[i].withUnsafeBytes { k in
                var key = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
                if mdb_get(txn, rawDBI, &key, &value) == 0 { sink &+= value.mv_size }
            }
        }
        mdb_txn_abort(txn)
    }
}

// MARK: - Hoard

let store = try Store(path: directory + "/hoard", options: .init(durability: .riskStoreOnOSCrash))
let collection = try store.collection(Member.self)

// The bulk put: one call for all the models (the clock read once, one emit buffer for all).
func hoardPutAll() throws -> UInt64 {
    try collection.deleteAll()
    return try time {
        try store.write { txn in try collection.put(members, in: txn) }
    }
}

// The same models put one call each, in one transaction.
func hoardPutEach() throws -> UInt64 {
    try collection.deleteAll()
    return try time {
        try store.write { txn in
            for member in members { try collection.put(member, in: txn) }
        }
    }
}

func hoardGetAll() throws -> UInt64 {
    try time {
        try store.read { txn in
            for i in getOrder { sink &+= try collection.get(members[i].id, in: txn)?.age ?? 0 }
        }
    }
}

// The same model with its coding written by hand against key paths (no generated code).
let keyPathMembers = members.map(KeyPathMember.init)
let keyPathCollection = try store.collection(KeyPathMember.self, named: "Member")

// A bulk put too, as the budget row is: the rows differ only in the model's coding.
func keyPathPutAll() throws -> UInt64 {
    try keyPathCollection.deleteAll()
    return try time {
        try store.write { txn in try keyPathCollection.put(keyPathMembers, in: txn) }
    }
}

func keyPathGetAll() throws -> UInt64 {
    try time {
        try store.read { txn in
            for i in getOrder { sink &+= try keyPathCollection.get(members[i].id, in: txn)?.age ?? 0 }
        }
    }
}

// The reference: a hand-written codec for this one model and version over the same record
// format and wrapper (HandWritten.swift), to show what the format and LMDB leave to the model layer.
let database = try store.environment.openDatabase("c:Member")

func handWrittenPutAll() throws -> UInt64 {
    try collection.deleteAll()
    var payload: [UInt8] = []
    payload.reserveCapacity(256)
    return try time {
        try store.environment.write { txn in
            for member in members {
                handWrittenEncode(member, into: &payload)
                try member.id.withKeyBytes { key in
                    try payload.withUnsafeBytes { payload in
                        let header = RecordHeader(version: 3, writtenAt: 0, expiresAt: nil)
                        try txn.reserve(
                            header.size + payload.count, forKey: key, in: database, options: .append
                        ) { record in
                            header.write(payload: payload, into: record)
                        }
                    }
                }
            }
        }
    }
}

func handWrittenGetAll() throws -> UInt64 {
    try time {
        try store.environment.read { txn in
            for i in getOrder {
                let member = try members[i].id.withKeyBytes { key in
                    try txn.withValue(forKey: key, in: database) { record -> Member in
                        let (header, payload) = try RecordHeader.parse(record)
                        guard header.version == 3 else { throw HandWrittenError() }
                        return try handWrittenDecode(payload)
                    }
                }
                sink &+= member?.age ?? 0
            }
        }
    }
}

// `--only NAME` runs one workload `rounds` times and nothing else, for instruction counting
// under callgrind (as codec-bench's): hoard-put, hoard-put-each, hoard-get, c-put, c-put-each, c-get,
// hand-put, hand-get, keypath-put, keypath-get.
if let index = CommandLine.arguments.firstIndex(of: "--only"), index + 1 < CommandLine.arguments.count {
    let workloads: [String: () throws -> UInt64] = [
        "hoard-put": hoardPutAll, "hoard-put-each": hoardPutEach, "hoard-get": hoardGetAll,
        "c-put": { rawPutAll() }, "c-put-each": { rawPutAll(append: false) },
        "c-get": rawGetAll,
        "hand-put": handWrittenPutAll, "hand-get": handWrittenGetAll,
        "keypath-put": keyPathPutAll, "keypath-get": keyPathGetAll,
    ]
    guard let workload = workloads[CommandLine.arguments[index + 1]] else {
        print("unknown workload; known: \(workloads.keys.sorted().joined(separator: ", "))")
        exit(2)
    }
    if CommandLine.arguments[index + 1].hasSuffix("get") {
        _ = rawPutAll()
        _ = try hoardPutAll()
    }
    for _ in 0..<rounds { _ = try workload() }
    exit(0)
}

print(
    "store-bench: \(count) records of a 6-field model (average record \(records.reduce(0) { $0 + $1.count } / count) bytes), \(rounds) rounds (medians), NOSYNC on both sides"
)
print("")

let put = try compare(
    "bulk put in one transaction", baseline: "C mdb_put, same bytes, append", operations: count, rounds: rounds,
    budget: 2.0,
    baselineRound: { rawPutAll() }, candidateRound: hoardPutAll)
_ = rawPutAll()  // both hold the same records for the gets
let get = try compare(
    "typed get, random order", baseline: "C mdb_get, same key", operations: count, rounds: rounds, budget: 1.5,
    baselineRound: rawGetAll, candidateRound: hoardGetAll)

// Decoding a record written two versions ago against a current one: the same members stored
// with local key set 1 (and version 1 in the header) in a second collection, as code before
// record format 3 stored them (keys by name, in a header of format 2).
let old = try store.collection(Member.self, named: "MemberV1")
let v1Encoder = CBOREncoder(deterministic: true, userInfo: [.keySet: KeySetID.local(1)])
let oldDatabase = try store.environment.openDatabase("c:MemberV1")
try store.environment.write { txn in
    for member in members {
        var header = RecordHeader(version: 1, writtenAt: 0, expiresAt: nil)
        header.recordFormat = 2
        let record = header.record(with: try v1Encoder.encode(member))
        try txn.put(record, forKey: member.id.keyBytes, in: oldDatabase)
    }
}
let migrated = try compare(
    "get of a record written 2 versions ago", baseline: "get of a current record", operations: count, rounds: rounds,
    budget: 1.5,
    baselineRound: hoardGetAll,
    candidateRound: {
        try time {
            try store.read { txn in
                for i in getOrder { sink &+= try old.get(members[i].id, in: txn)?.age ?? 0 }
            }
        }
    })

let ok = report("Hoard store vs the C API (ratio = Hoard time / baseline time)", [put, get, migrated])

// No budget: a put call per model (in one transaction), against the same baseline.
let putEach = try compare(
    "put one model per call, one transaction", baseline: "C mdb_put without append", operations: count,
    rounds: rounds, baselineRound: { rawPutAll(append: false) }, candidateRound: hoardPutEach)
report("Hoard, one call per model", [putEach])

// No budget: how far the budgets above are from what hand-written code achieves.
let handPut = try compare(
    "bulk put, hand-written codec", baseline: "C mdb_put, same bytes, append", operations: count, rounds: rounds,
    baselineRound: { rawPutAll() }, candidateRound: handWrittenPutAll)
_ = rawPutAll()
let handGet = try compare(
    "typed get, hand-written codec", baseline: "C mdb_get, same key", operations: count, rounds: rounds,
    baselineRound: rawGetAll, candidateRound: handWrittenGetAll)
report("Reference: a hand-written codec for this one model and version (not an API of Hoard's)", [handPut, handGet])

// No budget: the same model with init(from:) and encode(to:) written by hand against key paths,
// which is what a model without @VariablyCoded (or with properties generated code does not read) costs.
let keyPathPut = try compare(
    "bulk put, key-path model", baseline: "C mdb_put, same bytes, append", operations: count, rounds: rounds,
    baselineRound: { rawPutAll() }, candidateRound: keyPathPutAll)
_ = rawPutAll()
let keyPathGet = try compare(
    "typed get, key-path model", baseline: "C mdb_get, same key", operations: count, rounds: rounds,
    baselineRound: rawGetAll, candidateRound: keyPathGetAll)
report("Reference: the same model coded by hand through key paths (Hoard's ordinary path)", [keyPathPut, keyPathGet])
if sink == 42 { print("") }
exit(ok ? 0 : 1)
