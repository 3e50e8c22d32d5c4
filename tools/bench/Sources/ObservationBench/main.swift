// observation-bench: what change observation costs a writer, and how soon a commit reaches an
// observer, in this process and from another one; all in one run.
//
//   swift run -c release --package-path tools/bench observation-bench [--rounds R] [--events N]
//   observation-bench --only single|bulk[-changes|-observers] [--rounds R]   one workload, for a profiler
//   observation-bench --child PATH                       the other process of the latency part
import BenchModels
import BenchSupport
import Dispatch
import Hoard
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

let rounds = option("rounds", default: 9)
let events = option("events", default: 2_000)
let singles = 2_000
let bulk = 10_000
let members = (0..<Int64(bulk)).map { i in
    Member(id: i, name: "Member \(i)", email: "m\(i)@example.com", age: Int(i % 90), city: "Lisbon", followers: Int(i))
}
let options = Store.Options(
    durability: .riskStoreOnOSCrash, otherProcesses: argument("other") == "off" ? .off : .watchFile)

func argument(_ name: String) -> String? {
    let args = CommandLine.arguments
    guard let index = args.firstIndex(of: "--\(name)"), index + 1 < args.count else { return nil }
    return args[index + 1]
}

func openStore(_ name: String, options: Store.Options = options) throws -> (Store, HoardCollection<Member>) {
    let store = try Store(path: temporaryDirectory(name) + "/store", options: options)
    let collection = try store.collection(Member.self)
    try collection.put(members)
    return (store, collection)
}

/// `singles` puts of one model, each its own transaction.
func singlePuts(_ collection: HoardCollection<Member>) throws -> UInt64 {
    try time {
        for index in 0..<singles { try collection.put(members[index]) }
    }
}

/// One put of `bulk` models.
func bulkPut(_ collection: HoardCollection<Member>) throws -> UInt64 {
    try time { try collection.put(members) }
}

// MARK: - The other process

if let path = argument("child") {
    // Puts one model a line of input and answers with the time its commit returned.
    let store = try Store(path: path, options: options)
    let collection = try store.collection(Member.self)
    var index = 0
    while readLine() != nil {
        try collection.put(members[index % members.count])
        let line = Array("\(now())\n".utf8)
        _ = line.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
        index += 1
    }
    exit(0)
}

// MARK: - One workload, for profiles

if let only = argument("only") {
    let (_, collection) = try openStore("only")
    // With `-changes`, a subscriber that keeps up drains the collection's changes meanwhile.
    // With `-observers`, 8 observe(id) subscribers.
    let subscribers: Subscribers =
        only.hasSuffix("-changes") ? .changes : only.hasSuffix("-observers") ? .observers : .none
    let stop = subscribers.start(on: collection)
    // A second thread, in every workload: the subscribers' tasks start the concurrency runtime's
    // threads, and once a process has more than one, the C library takes slower paths in its
    // system calls and allocations for good. Without this, a workload with no subscriber would
    // count those paths as the subscribers' cost (a service always has other threads).
    let started = DispatchSemaphore(value: 0)
    DispatchQueue.global().async { started.signal() }
    started.wait()
    for _ in 0..<rounds {
        switch only {
        case "single", "single-changes", "single-observers": _ = try singlePuts(collection)
        case "bulk", "bulk-changes", "bulk-observers": _ = try bulkPut(collection)
        default:
            print("unknown workload \(only): single or bulk, alone or with -changes or -observers")
            exit(2)
        }
    }
    stop()
    exit(0)
}

// MARK: - Costs

// One store for the baseline and the candidates: a candidate's subscribers start before each of
// its rounds and stop after it, so that the two differ by them alone. With a store of their own,
// a candidate's rounds also differed by where the store's file and map lie: a second store with
// no observer read measurably apart from the first.
let (_, costs) = try openStore("costs")

/// What subscribes during a candidate's rounds.
enum Subscribers {
    /// Nothing: the rounds go through the starting and stopping as the others do (the floor).
    case none
    /// A `changes()` consumer that keeps up.
    case changes
    /// Eight `observe(id)` consumers of records the workloads write (IDs 0, 100, … 700).
    case observers
    /// Eight `observe(id)` consumers of records the workloads never write (IDs 50,000, 50,100, …
    /// 50,700): what the observers cost a writer that never wakes one.
    case unwrittenObservers

    /// Starts the subscribers on `collection`, each on a task of its own, and returns once every
    /// one is subscribed; the closure returned stops them, and returns once every subscription
    /// has ended. Each subscribes inside its task's scope, so that its sequence and iterator are
    /// gone, and the subscription with them, when the task signals its end.
    func start(on collection: HoardCollection<Member>) -> () -> Void {
        let started = DispatchSemaphore(value: 0)
        let stopped = DispatchSemaphore(value: 0)
        var tasks: [Task<Void, Never>] = []
        switch self {
        case .none:
            break
        case .changes:
            tasks.append(
                Task.detached {
                    do {
                        var iterator = collection.changes().makeAsyncIterator()
                        started.signal()
                        while await iterator.next() != nil {}
                    }
                    stopped.signal()
                })
        case .observers, .unwrittenObservers:
            let offset: Int64 = self == .unwrittenObservers ? 50_000 : 0
            for id in 0..<Int64(8) {
                tasks.append(
                    Task.detached {
                        do {
                            var iterator = try collection.observe(id * 100 + offset).makeAsyncIterator()
                            // The first value: every commit from here on is one the writer pays for.
                            _ = try await iterator.next()
                            started.signal()
                            while try await iterator.next() != nil {}
                        } catch {
                            started.signal()
                        }
                        stopped.signal()
                    })
            }
        }
        for _ in tasks { started.wait() }
        return {
            for task in tasks { task.cancel() }
            for _ in tasks { stopped.wait() }
        }
    }
}

/// CPU time of the calling thread, in nanoseconds: what a write costs its own thread, without
/// the time other threads (a woken consumer, the watch) took from the machine's two cores.
func threadCPU() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

func cpu(_ body: () throws -> UInt64) rethrows -> UInt64 {
    let start = threadCPU()
    _ = try body()
    return threadCPU() - start
}

for (title, measure) in [
    ("What observers cost a writer: the writing thread's CPU time (MDB_NOSYNC, Member records)", true),
    ("The same, wall-clock time", false),
] {
    func timed(_ body: () throws -> UInt64) rethrows -> UInt64 { measure ? try cpu(body) : try body() }
    // What each candidate subscribes, and the budget of its ratio.
    let candidates: [(String, Subscribers, Double?)] = [
        ("a changes() subscriber", .changes, 1.05), ("8 observe(id) subscribers", .observers, 1.01),
        ("8 observe(id) subscribers of records not written", .unwrittenObservers, nil),
        ("no observer (the floor)", .none, nil),
    ]
    let workloads: [(String, Int, (HoardCollection<Member>) throws -> UInt64)] = [
        ("\(singles) single puts", singles, singlePuts), ("a put of \(bulk)", bulk, bulkPut),
    ]
    var comparisons: [Comparison] = []
    for (workload, operations, run) in workloads {
        for (name, subscribers, budget) in candidates {
            comparisons.append(
                try compare(
                    "\(workload), \(name)", baseline: "no observer", operations: operations, rounds: rounds,
                    budget: budget,
                    baselineRound: {
                        _ = try run(costs)
                        return try timed { try run(costs) }
                    },
                    candidateRound: {
                        let stop = subscribers.start(on: costs)
                        defer { stop() }
                        // Unmeasured, as in the baseline's round: the subscribers and the watch
                        // settle into how they follow a writer that keeps writing (the watch set
                        // at its start stays unset while this process commits).
                        _ = try run(costs)
                        return try timed { try run(costs) }
                    }))
        }
    }
    report(title, comparisons)
}

// MARK: - Latency

func percentile(_ sorted: [UInt64], _ p: Double) -> Double {
    Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]) / 1000
}

func describe(_ name: String, _ latencies: [UInt64]) {
    let sorted = latencies.sorted()
    print(
        "| \(name) | \(sorted.count) | \(format(percentile(sorted, 0.5), 1)) µs | \(format(percentile(sorted, 0.99), 1)) µs | \(format(Double(sorted.last ?? 0) / 1000, 1)) µs |"
    )
}

/// Times written by one thread and read by another, one slot per event.
final class Times: @unchecked Sendable {
    // @unchecked: slot i is written by one thread before a semaphore hands it to the other.
    var values: [UInt64]
    init(_ count: Int) { values = Array(repeating: 0, count: count) }
}

/// Commits one put at a time on a thread of its own (a put's return time in `returned`) and
/// waits for the consumer to take its batch; the latency is that batch's `next()` return minus
/// the put's return (0 when the consumer was woken before the put had returned).
func inProcessLatency() throws -> [UInt64] {
    let (_, collection) = try openStore("latency")
    let changes = collection.changes()
    let returned = Times(events)
    let received = Times(events)
    let taken = DispatchSemaphore(value: 0)
    let consumer = Task.detached {
        var iterator = changes.makeAsyncIterator()
        for index in 0..<events {
            guard await iterator.next() != nil else { return }
            received.values[index] = now()
            taken.signal()
        }
    }
    let writer = Thread {
        for index in 0..<events {
            try? collection.put(members[index % members.count])
            returned.values[index] = now()
            taken.wait()
        }
    }
    writer.run()
    consumer.cancel()
    return zip(received.values, returned.values).map { $0 > $1 ? $0 - $1 : 0 }
}

/// A thread, without Foundation.
final class Thread: @unchecked Sendable {
    let body: () -> Void
    init(_ body: @escaping () -> Void) { self.body = body }
    func run() {
        let done = DispatchSemaphore(value: 0)
        DispatchQueue(label: "observation-bench.writer").async {
            self.body()
            done.signal()
        }
        done.wait()
    }
}

/// The other process puts one model a request; this one's consumer notes when the batch came.
func crossProcessLatency(_ mode: Store.OtherProcessChanges, count: Int) throws -> [UInt64] {
    var watching = options
    watching.otherProcesses = mode
    let (store, collection) = try openStore("cross", options: watching)
    let changes = collection.changes()
    let received = Times(count)
    let taken = DispatchSemaphore(value: 0)
    let consumer = Task.detached {
        var iterator = changes.makeAsyncIterator()
        for index in 0..<count {
            guard await iterator.next() != nil else { return }
            received.values[index] = now()
            taken.signal()
        }
    }
    let child = try Child(CommandLine.arguments[0], ["--child", store.path])
    var returned: [UInt64] = []
    for _ in 0..<count {
        try child.send("go")
        guard let line = try child.readLine(), let time = UInt64(line) else { break }
        returned.append(time)
        taken.wait()
    }
    child.finish()
    consumer.cancel()
    return zip(received.values, returned).map { $0 > $1 ? $0 - $1 : 0 }
}

/// Voluntary context switches of every thread of this process (wake-ups), from /proc.
func wakeUps() -> Int {
    guard let directory = opendir("/proc/self/task") else { return -1 }
    defer { closedir(directory) }
    var total = 0
    while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        guard !name.hasPrefix(".") else { continue }
        guard let file = fopen("/proc/self/task/\(name)/status", "r") else { continue }
        var line = [CChar](repeating: 0, count: 256)
        while fgets(&line, 256, file) != nil {
            let text = text(of: line)
            if text.hasPrefix("voluntary_ctxt_switches:") {
                total += Int(text.split(separator: ":")[1].trimmingCharacters(in: " \t\n")) ?? 0
            }
        }
        fclose(file)
    }
    return total
}

extension Substring {
    func trimmingCharacters(in set: String) -> Substring {
        var text = self
        while let first = text.first, set.contains(first) { text.removeFirst() }
        while let last = text.last, set.contains(last) { text.removeLast() }
        return text
    }
}

/// Wake-ups of this process over one second with no commits: with an observer watching in
/// `mode`, or (`nil`) none.
func idleWakeUps(_ mode: Store.OtherProcessChanges?) throws -> Int {
    var watching = options
    watching.otherProcesses = mode ?? .off
    let (_, collection) = try openStore("idle", options: watching)
    let stop = (mode == nil ? Subscribers.none : .changes).start(on: collection)
    usleep(100_000)  // the consumer and the watch settle into their waits first
    let before = wakeUps()
    usleep(1_000_000)
    let after = wakeUps()
    stop()
    return after - before
}

/// 1,000 single puts 1 ms apart, with a `changes()` consumer that keeps up or none: the CPU time
/// the process's other threads (the consumer's) spent a commit, in microseconds. Commits that far
/// apart are not found by a consumer's look before parking.
func consumerCPU(subscribed: Bool) throws -> Double {
    let (_, collection) = try openStore(subscribed ? "paced-changes" : "paced")
    let stop = (subscribed ? Subscribers.changes : .none).start(on: collection)
    let commits = 1_000
    let (process, writer) = (processCPUSeconds(), threadCPU())
    for index in 0..<commits {
        try collection.put(members[index])
        var pause = timespec(tv_sec: 0, tv_nsec: 1_000_000)
        nanosleep(&pause, nil)
    }
    let others = (processCPUSeconds() - process) * 1e9 - Double(threadCPU() - writer)
    stop()
    return others / Double(commits) / 1000
}

print(
    "A changes() consumer with puts 1 ms apart: the process's other threads spent \(format(try consumerCPU(subscribed: true), 1)) µs of CPU a commit (\(format(try consumerCPU(subscribed: false), 1)) µs without a subscriber)."
)
print("")

print("## From commit to observer (MDB_NOSYNC)")
print("")
print("| path | events | p50 | p99 | max |")
print("| --- | ---: | ---: | ---: | ---: |")
describe("this process: put returned → next() returned", try inProcessLatency())
describe(
    "another process, file watch: put returned → next() returned",
    try crossProcessLatency(.watchFile, count: events / 4))
describe(
    "another process, polling every 1 ms: put returned → next() returned",
    try crossProcessLatency(.poll(every: .milliseconds(1)), count: events / 8))
print("")
print(
    "Idle for 1 s, no commits: \(try idleWakeUps(nil)) wake-ups of the process without an observer, \(try idleWakeUps(.watchFile)) with one and the file watch, \(try idleWakeUps(.poll(every: .milliseconds(10)))) polling every 10 ms."
)

// MARK: - A child process with pipes

final class Child {
    let pid: pid_t
    let input: Int32
    let output: UnsafeMutablePointer<FILE>

    init(_ executable: String, _ arguments: [String]) throws {
        var toChild: [Int32] = [0, 0]
        var fromChild: [Int32] = [0, 0]
        guard pipe(&toChild) == 0, pipe(&fromChild) == 0 else { throw ChildError.spawn("pipe") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
        posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
        for fd in toChild + fromChild { posix_spawn_file_actions_addclose(&actions, fd) }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        guard posix_spawn(&pid, executable, &actions, nil, argv, environ) == 0 else {
            throw ChildError.spawn(executable)
        }
        close(toChild[0])
        close(fromChild[1])
        self.pid = pid
        input = toChild[1]
        guard let output = fdopen(fromChild[0], "r") else { throw ChildError.spawn("fdopen") }
        self.output = output
    }

    func send(_ line: String) throws {
        let bytes = Array((line + "\n").utf8)
        guard bytes.withUnsafeBytes({ write(input, $0.baseAddress, $0.count) }) == bytes.count else {
            throw ChildError.spawn("write")
        }
    }

    func readLine() throws -> String? {
        var buffer = [CChar](repeating: 0, count: 64)
        guard fgets(&buffer, 64, output) != nil else { return nil }
        return text(of: buffer).trimmingCharacters(in: "\n")
    }

    func finish() {
        close(input)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        fclose(output)
    }
}

enum ChildError: Error {
    case spawn(String)
}

/// The text of a C string in `buffer`, up to its terminating zero.
func text(of buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

extension String {
    func trimmingCharacters(in set: String) -> String { String(Substring(self).trimmingCharacters(in: set)) }
}
