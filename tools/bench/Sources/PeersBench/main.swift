// peers-bench: Hoard beside what a Swift developer would use instead for a cache:
// GRDB 7 (SQLite) as its documentation recommends and in its fastest expert form, a file per
// key as Swift disk caches keep entries, and JSON in LMDB; the same 6-field model, the same data,
// the same workloads. Each round runs every peer in a process of its own (so that each has its
// own peak memory), in turn; the medians of the rounds are compared, and every peer's answers
// must match Hoard's. tools/bench/peers.sh runs it and draws the plots.
//
//   peers-bench [--records 100000] [--rounds 5] [--out PATH] [--peers NAME,NAME…]
//
// --peers runs only the peers named (Hoard always), e.g. for the growth from 200,000 to 2,000,000
// records with GRDB's fastest form beside it.
import BenchModels
import BenchSupport
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

let records = option("records", default: 100_000)
let rounds = option("rounds", default: 5)

/// The peers, by name: the type that stores, and the environment that picks its form.
let allPeers: [(name: String, type: any Peer.Type, environment: String?)] = [
    ("Hoard", HoardPeer.self, nil),
    ("Hoard (cache mode)", HoardPeer.self, HoardPeer.cacheMode),
    ("GRDB", GRDBPeer.self, nil),
    ("GRDB (cached statements)", GRDBPeer.self, GRDBPeer.expertMode),
    ("JSON in LMDB", JSONLMDBPeer.self, nil),
    ("file per key", FilePeer.self, nil),
]
let chosen: [String]? = CommandLine.arguments.firstIndex(of: "--peers").flatMap { index in
    guard index + 1 < CommandLine.arguments.count else { return nil }
    return CommandLine.arguments[index + 1].split(separator: ",").map(String.init)
}
let peers = allPeers.filter { peer in peer.name == "Hoard" || chosen.map { $0.contains(peer.name) } ?? true }
if let unknown = chosen?.first(where: { name in !allPeers.contains { $0.name == name } }) {
    print("error: --peers: no peer named '\(unknown)' (the peers: \(allPeers.map(\.name).joined(separator: ", ")))")
    exit(2)
}

/// The workloads, in the order of the table; each with what one operation is.
let workloads: [(name: String, unit: String)] = [
    ("bulk insert, one transaction", "record"),
    ("get, all in one read", "get"),
    ("get, a read each", "get"),
    ("miss, a read each", "get"),
    ("range scan of 100", "scan"),
    ("full scan", "record"),
    ("durable update, a commit each", "update"),
    ("synchronize 1% changed, 0.5% new, 0.5% gone", "record"),
    ("cold open + first get", "open"),
]

// MARK: - The data, the same in every process

func makeMembers() -> [Member] {
    var rng = SplitMix64(seed: 21)
    let cities = ["Berlin", "Lisbon", "Osaka", "Nairobi", "Montréal", "São Paulo"]
    return (0..<records).map { i in
        Member(
            id: Int64(i) * 7, name: "Member \(i)", email: "member\(i)@example.com", age: Int(rng.next() % 90),
            city: cities[Int(rng.next() % 6)], followers: Int(rng.next() % 100_000))
    }
}

/// The fresh list for synchronize: 1% changed, 0.5% new (IDs between the stored ones), 0.5% gone.
func freshList(_ members: [Member]) -> [Member] {
    var fresh: [Member] = []
    fresh.reserveCapacity(members.count)
    for (index, member) in members.enumerated() {
        switch index % 200 {
        case 0: continue  // gone
        case 1, 2:
            var changed = member
            changed.followers += 1
            fresh.append(changed)
        case 3:
            fresh.append(member)
            fresh.append(
                Member(
                    id: member.id + 1, name: "New \(index)", email: "new\(index)@example.com", age: 30, city: "Lisbon",
                    followers: 1))
        default: fresh.append(member)
        }
    }
    return fresh
}

// MARK: - A child: one peer, every workload once

@MainActor
func runChild(peerName: String, directory: String) throws {
    guard let entry = allPeers.first(where: { $0.name == peerName }) else {
        print("error: unknown peer \(peerName)")
        exit(2)
    }
    let members = makeMembers()
    var rng = SplitMix64(seed: 2101)
    let order = members.indices.shuffled(using: &rng).map { members[$0].id }
    let misses = order.prefix(max(1, records / 10)).map { $0 + 3 }  // between stored IDs
    let starts = (0..<1_000).map { _ in members[Int(rng.next() % UInt64(max(1, members.count - 100)))].id }
    let updates = (0..<200).map { _ in members[Int(rng.next() % UInt64(members.count))] }
    var times: [String: UInt64] = [:]
    var operations: [String: Int] = [:]
    var digests: [String: String] = [:]
    func measure(_ workload: String, _ count: Int, _ body: () throws -> Digest?) rethrows {
        let start = now()
        let digest = try body()
        times[workload] = now() - start
        operations[workload] = count
        if let digest { digests[workload] = digest.text }
    }

    let peer = try entry.type.init(directory: directory)
    try measure(workloads[0].name, members.count) {
        try peer.insertAll(members)
        return nil
    }
    // Every peer starts its reads warm: its pages mapped or cached, its files' entries cached.
    _ = try peer.scanAll()
    try measure(workloads[1].name, order.count) { try peer.getAllInOneRead(order) }
    try measure(workloads[2].name, order.count) { try peer.getEach(order) }
    try measure(workloads[3].name, misses.count) { try peer.getEach(misses) }
    var rangeSupported = true
    try measure(workloads[4].name, starts.count) {
        var digest = Digest()
        for start in starts {
            guard let scanned = try peer.range(from: start) else {
                rangeSupported = false
                return nil
            }
            digest.merge(scanned)
        }
        return digest
    }
    if !rangeSupported {
        times[workloads[4].name] = nil
        operations[workloads[4].name] = nil
    }
    try measure(workloads[5].name, members.count) { try peer.scanAll() }
    try measure(workloads[6].name, updates.count) {
        for (index, member) in updates.enumerated() {
            var updated = member
            updated.followers = -index
            try peer.updateDurably(updated)
        }
        return nil
    }
    let fresh = freshList(members)
    try measure(workloads[7].name, fresh.count) {
        try peer.synchronize(with: fresh)
        return nil
    }
    digests["contents after synchronize"] = try peer.scanAll().text
    peer.release()
    try measure(workloads[8].name, 1) {
        var digest = Digest()
        digest.add(try entry.type.openAndGet(directory: directory, order[0]))
        return digest
    }
    var result: [String: Any] = [
        "peer": peerName, "records": records, "times": times, "operations": operations, "digests": digests,
        "bytes": diskUsage(directory),
    ]
    if entry.type == HoardPeer.self { result["floorBytes"] = try floorBytes(ofStoreIn: directory) }
    let data = try JSONSerialization.data(withJSONObject: result, options: [.sortedKeys])
    FileHandle.standardOutput.write(data)
}

/// The bytes the files under `path` occupy on disk (their blocks, not their apparent sizes).
func diskUsage(_ path: String) -> Int {
    var total = 0
    let enumerator = FileManager.default.enumerator(atPath: path)
    while let name = enumerator?.nextObject() as? String {
        var info = stat()
        if lstat(path + "/" + name, &info) == 0 { total += Int(info.st_blocks) * 512 }
    }
    return total
}

// MARK: - The parent: rounds of every peer in turn

/// Runs one peer in a child process; returns its result and its peak resident memory.
@MainActor
func runPeer(_ index: Int, round: Int) throws -> (result: [String: Any], peakBytes: Int) {
    let directory = temporaryDirectory("peers")
    defer { _ = system("rm -rf '\(directory)'") }
    var fds: [Int32] = [0, 0]
    guard pipe(&fds) == 0 else { throw POSIXError(.EIO) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
    posix_spawn_file_actions_addclose(&actions, fds[0])
    let executable = CommandLine.arguments[0]
    let arguments = [executable, "--child", peers[index].name, "--dir", directory, "--records", String(records)]
    let argv = arguments.map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var environment = ProcessInfo.processInfo.environment
    if let mode = peers[index].environment { environment[mode] = "1" }
    let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer { envp.forEach { free($0) } }
    var pid: pid_t = 0
    guard posix_spawn(&pid, executable, &actions, nil, argv, envp) == 0 else { throw POSIXError(.EIO) }
    close(fds[1])
    let output = FileHandle(fileDescriptor: fds[0], closeOnDealloc: true).readDataToEndOfFile()
    var status: Int32 = 0
    var usage = rusage()
    wait4(pid, &status, 0, &usage)
    guard status == 0, let result = try JSONSerialization.jsonObject(with: output) as? [String: Any] else {
        print("error: \(peers[index].name) failed (status \(status)) in round \(round)")
        exit(1)
    }
    return (result, usage.ru_maxrss * 1024)
}

if let index = CommandLine.arguments.firstIndex(of: "--child"), index + 1 < CommandLine.arguments.count,
    let dir = CommandLine.arguments.firstIndex(of: "--dir").map({ CommandLine.arguments[$0 + 1] })
{
    try runChild(peerName: CommandLine.arguments[index + 1], directory: dir)
    exit(0)
}

print("peers-bench: \(records) records of a 6-field model, \(rounds) rounds, peers in turn, a process each")
var samples: [String: [String: [Double]]] = [:]  // peer → workload → ns per operation, per round
var bytes: [String: [Int]] = [:]
var floors: [String: [Int]] = [:]
var peaks: [String: [Int]] = [:]
var digests: [String: [String: String]] = [:]
for round in 0..<rounds {
    for index in peers.indices {
        let name = peers[index].name
        let (result, peak) = try runPeer(index, round: round)
        let times = result["times"] as? [String: Int] ?? [:]
        let operations = result["operations"] as? [String: Int] ?? [:]
        for (workload, nanos) in times {
            samples[name, default: [:]][workload, default: []].append(Double(nanos) / Double(operations[workload] ?? 1))
        }
        bytes[name, default: []].append(result["bytes"] as? Int ?? 0)
        if let floor = result["floorBytes"] as? Int { floors[name, default: []].append(floor) }
        peaks[name, default: []].append(peak)
        digests[name] = result["digests"] as? [String: String] ?? [:]
        FileHandle.standardError.write(Data("round \(round + 1)/\(rounds): \(name) done\n".utf8))
    }
}

// Every peer must have answered as Hoard did.
var wrong: [String] = []
for peer in peers.map(\.name) where peer != "Hoard" {
    for (workload, digest) in digests[peer] ?? [:] where digests["Hoard"]?[workload] != digest {
        wrong.append("\(peer), \(workload): \(digest), Hoard \(digests["Hoard"]?[workload] ?? "none")")
    }
}
guard wrong.isEmpty else {
    print("error: answers differ from Hoard's:\n" + wrong.joined(separator: "\n"))
    exit(1)
}
print(
    "every peer returned the same models as Hoard (digests of every read workload and of the contents after synchronize)"
)

func medianOf(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
var table: [[String: Any]] = []
for (workload, unit) in workloads {
    var row: [String: Any] = ["workload": workload, "unit": unit]
    for peer in peers.map(\.name) {
        if let values = samples[peer]?[workload] { row[peer] = medianOf(values) }
    }
    table.append(row)
}
let sizeRow: [String: Any] = peers.reduce(into: ["workload": "bytes on disk", "unit": "store"]) {
    $0[$1.name] = Double(bytes[$1.name]?.max() ?? 0)
}
// LMDB alone holding the same keys and record bytes, for the peers that are Hoard.
let floorRow: [String: Any] = peers.reduce(into: ["workload": "LMDB's floor for the same records", "unit": "store"]) {
    if let values = floors[$1.name] { $0[$1.name] = Double(values.max() ?? 0) }
}
let peakRow: [String: Any] = peers.reduce(into: ["workload": "peak memory", "unit": "process"]) {
    $0[$1.name] = Double(peaks[$1.name].map { $0.sorted()[$0.count / 2] } ?? 0)
}
let output: [String: Any] = [
    "records": records, "rounds": rounds, "peers": peers.map(\.name), "rows": table + [sizeRow, floorRow, peakRow],
]
let json = try JSONSerialization.data(withJSONObject: output, options: [.prettyPrinted, .sortedKeys])
if let index = CommandLine.arguments.firstIndex(of: "--out"), index + 1 < CommandLine.arguments.count {
    _ = FileManager.default.createFile(atPath: CommandLine.arguments[index + 1], contents: json)
}

// The table: time per operation (or bytes), and each peer's ratio to Hoard in cache mode.
func human(_ value: Double, unit: String) -> String {
    switch unit {
    case "store", "process": return String(format: "%.1f MiB", value / 1_048_576)
    default:
        if value >= 1_000_000 { return String(format: "%.2f ms", value / 1_000_000) }
        if value >= 1_000 { return String(format: "%.2f µs", value / 1_000) }
        return String(format: "%.0f ns", value)
    }
}
let reference = "Hoard (cache mode)"
print("")
print("| workload (per \u{2026}) | " + peers.map(\.name).joined(separator: " | ") + " |")
print("| --- |" + String(repeating: " ---: |", count: peers.count))
for row in table + [sizeRow, floorRow, peakRow] {
    let unit = row["unit"] as? String ?? ""
    let base = row[reference] as? Double
    let cells = peers.map(\.name).map { peer -> String in
        guard let value = row[peer] as? Double else { return "n/a" }
        let ratio = base.map { $0 > 0 && peer != reference ? String(format: " (%.2f×)", value / $0) : "" } ?? ""
        return human(value, unit: unit) + ratio
    }
    print("| \(row["workload"] ?? "") (\(unit)) | " + cells.joined(separator: " | ") + " |")
}
