// bus-replica: a replica in a process of its own, for HoardPostgres's tests (a process to pause
// with SIGSTOP, to kill, or to hold a store's bus against another process), driven line by line
// over stdin/stdout. Built with the trait Postgres; without it, it says so and exits with 2.
//
//   BusReplica STORE DATABASE PORT LEASE_MS HEARTBEAT_MS
//       opens the store at STORE (collection User), runs a PostgresBus on the test server's
//       DATABASE at 127.0.0.1:PORT (user HOARD_PG_USER, or hoard) with a lease of LEASE_MS and a
//       heartbeat of HEARTBEAT_MS, answers "started", then serves:
//       put ID NAME        -> "ok"
//       ready              -> "ready" once the bus is connected and holds its lease
//       watch ID OLD       -> "watching": from now on a thread gets ID without pause, noting when
//                             each get began (CLOCK_MONOTONIC, nanoseconds, the same clock in every
//                             process) and when the last one that found the name OLD began
//       report             -> "report GETS LAST_BEGAN LAST_OLD_BEGAN" (0 for none)
//       exit               -> ends the process
//   A bus that run() refuses answers "refused DESCRIPTION" and the process exits with 3.
//
// Every answer is one line, so the parent waits on the pipe, never on a timer.
#if Postgres
import Dispatch
import Foundation
import Hoard
import HoardPostgres
import Logging
import PostgresNIO
import Synchronization

/// The replicas' model, as HoardPostgresTests declares it.
struct User: VariablyCodable, Identifiable, Equatable, Sendable {
    var id: Int64
    var name: String
    static let keySets = KeySets<User>(local: [1: [\.id: "ID", \.name: "NAME"]])
    init(id: Int64, name: String) { (self.id, self.name) = (id, name) }
    init(from container: DecodingContainer<User>) throws {
        id = try container.decodeValue(for: \.id)
        name = try container.decodeValue(for: \.name)
    }
    func encode(to container: inout EncodingContainer<User>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(name, for: \.name)
    }
}

/// Writes one unbuffered line, so the parent sees it at once.
func reply(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
}

func monotonicNanoseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
}

/// What the watching thread noted.
final class Watch: Sendable {
    let gets = Atomic<Int>(0)
    let lastBegan = Atomic<Int64>(0)
    let lastOldBegan = Atomic<Int64>(0)
}

let arguments = CommandLine.arguments
guard arguments.count == 6, let port = Int(arguments[3]), let leaseMilliseconds = Int64(arguments[4]),
    let heartbeatMilliseconds = Int64(arguments[5])
else {
    FileHandle.standardError.write(Data("usage: BusReplica STORE DATABASE PORT LEASE_MS HEARTBEAT_MS\n".utf8))
    exit(2)
}
let store = try Store(path: arguments[1], options: .cache)
let users = try store.collection(User.self)
var postgres = PostgresClient.Configuration(
    host: "127.0.0.1", port: port, username: ProcessInfo.processInfo.environment["HOARD_PG_USER"] ?? "hoard",
    password: nil, database: arguments[2], tls: .disable)
postgres.options.connectTimeout = .seconds(2)
let bus = PostgresBus(
    store: store,
    configuration: .init(
        postgres: postgres, replicaName: "bus-replica \(getpid())", heartbeat: .milliseconds(heartbeatMilliseconds),
        lease: .milliseconds(leaseMilliseconds), backoff: (.milliseconds(20), .milliseconds(200)),
        operationTimeout: .seconds(2)),
    logger: Logger(label: "bus-replica"))
reply("started")
// Detached: top-level code runs on the main actor, whose thread the command loop below blocks.
Task.detached {
    do {
        try await bus.run()
    } catch {
        reply("refused \(error)")
        exit(3)
    }
}

let watch = Watch()
while let line = readLine() {
    let words = line.split(separator: " ").map(String.init)
    switch words.first {
    case "put" where words.count == 3:
        guard let id = Int64(words[1]) else { reply("error bad ID"); continue }
        try users.put(User(id: id, name: words[2]))
        reply("ok")
    case "ready":
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            while !(bus.status.connected && store.replication.leaseDeadline != nil) { await Task.yield() }
            done.signal()
        }
        done.wait()
        reply("ready")
    case "watch" where words.count == 3:
        guard let id = Int64(words[1]) else { reply("error bad ID"); continue }
        let old = words[2]
        let thread = Thread {
            while true {
                let began = monotonicNanoseconds()
                let found = try? users.get(id)
                if found?.name == old { watch.lastOldBegan.store(began, ordering: .relaxed) }
                watch.lastBegan.store(began, ordering: .relaxed)
                watch.gets.add(1, ordering: .relaxed)
            }
        }
        thread.start()
        reply("watching")
    case "report":
        reply(
            "report \(watch.gets.load(ordering: .relaxed)) \(watch.lastBegan.load(ordering: .relaxed)) "
                + "\(watch.lastOldBegan.load(ordering: .relaxed))")
    case "exit":
        exit(0)
    default:
        reply("error unknown command: \(line)")
    }
}
#else
import Foundation
FileHandle.standardError.write(Data("bus-replica needs the trait Postgres (swift build --traits Postgres)\n".utf8))
exit(2)
#endif
