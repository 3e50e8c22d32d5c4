// hitratio-bench: replays a request trace against a bounded Hoard collection, as a read-through
// cache sees it (a get; on a miss, a put of the model), and prints the hit ratio. The traces and
// the reference policies (libCacheSim's LRU, ARC, SIEVE, S3-FIFO, W-TinyLFU, Belady) come from
// tools/bench/hitratio.py, which runs this tool on the same files: see BENCHMARKS.md.
//
//   hitratio-bench TRACE CAPACITY...     one line per capacity: "CAPACITY HIT_RATIO SECONDS"
//
// TRACE is libCacheSim's oracleGeneral binary format: 24 bytes a request (a 32-bit time, a 64-bit
// object ID, a 32-bit size, a 64-bit next access), little-endian; only the IDs are used here.
import BenchModels
import BenchSupport
import Foundation
import Hoard

let arguments = CommandLine.arguments
guard arguments.count >= 3, let data = FileManager.default.contents(atPath: arguments[1]) else {
    FileHandle.standardError.write(Data("usage: hitratio-bench TRACE CAPACITY...\n".utf8))
    exit(2)
}
let capacities = arguments[2...].compactMap { Int($0) }
let requests = data.withUnsafeBytes { raw in
    (0..<raw.count / 24).map {
        Int64(bitPattern: UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: $0 * 24 + 4, as: UInt64.self)))
    }
}

for capacity in capacities {
    let directory = temporaryDirectory("hitratio")
    defer { removeStore(in: directory) }
    // No flush per commit: the hit ratio does not depend on it, and a million durable commits
    // would measure the disk.
    let store = try Store(path: directory + "/store", options: Store.Options(durability: .riskStoreOnOSCrash))
    let members = try store.collection(Member.self, capacity: .records(capacity))
    var hits = 0
    let start = now()
    for id in requests {
        if try members.get(id) != nil {
            hits += 1
        } else {
            try members.put(
                Member(id: id, name: "member \(id)", email: "m\(id)@example.com", age: 30, city: "Oslo", followers: 1))
        }
    }
    let seconds = Double(now() - start) / 1e9
    let count = try members.count()
    guard count <= capacity else {
        FileHandle.standardError.write(Data("error: \(count) records stored, capacity \(capacity)\n".utf8))
        exit(1)
    }
    print("\(capacity) \(Double(hits) / Double(requests.count)) \(seconds)")
}
