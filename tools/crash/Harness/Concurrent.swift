// Crash recovery under group commit: many writer tasks in one workload process, their async
// writes gathered into shared commits, killed with SIGKILL at seeded points.
//
// Each task t writes its own steps k = 1, 2, …: a pair (record t of collection GA and record t
// of GB, both holding k) in one `store.write`, acknowledged ("ack t k") after the write's await
// returns. Every fifth step is a write that puts a marker record (collection GM) and then
// throws: its caller gets the error, and the marker must never be stored. After a kill, for
// every task: GA and GB hold the same step (a write is never half applied, though it shared a
// transaction with other tasks' writes), that step is at least the last one acknowledged (an
// acknowledged write is durable; a task's later step may have landed too), it is not a failing
// step, and GM is empty.
@_spi(LMDB) public import Hoard
import LMDB
import TestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a group-commit workload write fails on purpose.
struct RefusedStep: Error {}

/// Whether step `k` is one that writes a marker and throws.
func isFailingStep(_ k: Int) -> Bool { k % 5 == 0 }

/// Runs `writers` tasks of group-commit writes against the store at `path` until killed (or
/// `steps` steps each are done); with `earlyAck`, acknowledges each step before its write (a
/// broken workload the driver must catch).
public func runConcurrentWorkload(
    path: String, writers: Int, durability: Hoard.Durability, steps: Int, earlyAck: Bool
) async throws {
    let store = try openWorkloadStore(path, durability: durability)
    let a = try store.collection(Item.self, named: "GA")
    let b = try store.collection(Item.self, named: "GB")
    let markers = try store.collection(Item.self, named: "GM")
    try await withThrowingTaskGroup(of: Void.self) { group in
        for task in 0..<writers {
            group.addTask {
                // Go on after the last step that reached the store.
                let first = (try a.get(Int64(task))?.value ?? 0) + 1
                for k in first..<(first + steps) {
                    if isFailingStep(k) {
                        do {
                            try await store.write { txn in
                                try markers.put(
                                    Item(id: Int64(task * 1_000_000 + k), name: "marker", value: k), in: txn)
                                throw RefusedStep()
                            }
                        } catch is RefusedStep {}
                        continue
                    }
                    if earlyAck { emitLine("ack \(task) \(k)") }
                    try await store.write { txn in
                        try a.put(Item(id: Int64(task), name: "a", value: k), in: txn)
                        try b.put(Item(id: Int64(task), name: "b", value: k), in: txn)
                    }
                    if !earlyAck { emitLine("ack \(task) \(k)") }
                }
            }
        }
        try await group.waitForAll()
    }
}

/// Writes one line with one write(2), so that the driver sees exactly what was acknowledged.
public func emitLine(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
}

/// Kills a group-commit workload again and again and checks the store after each kill.
public final class ConcurrentCrashDriver {
    public let storePath: String
    public let workload: String
    public let hoard: String
    public let seed: UInt64
    public var writers = 16
    public var durability: Hoard.Durability = .durable
    public var earlyAck = false
    /// The last step acknowledged, per task.
    public private(set) var acknowledged: [Int: Int] = [:]

    public init(storePath: String, workload: String, hoard: String, seed: UInt64) {
        self.storePath = storePath
        self.workload = workload
        self.hoard = hoard
        self.seed = seed
    }

    public func run(kills: Int) throws -> CrashReport {
        var report = CrashReport(seed: seed)
        var rng = SeededGenerator(seed: seed ^ 0x6C0_33177)
        let arguments =
            [storePath, "--concurrent", String(writers), "--durability", durability.workloadName]
            + (earlyAck ? ["--mode", "early-ack"] : [])
        for _ in 0..<kills {
            let child = try ChildProcess(workload, arguments)
            let awaited = Int.random(in: 0...(writers * 2), using: &rng)
            var acks: [(Int, Int)] = []
            while acks.count < awaited, let line = try child.readLine() {
                if let ack = Self.parse(line) { acks.append(ack) }
            }
            usleep(UInt32.random(in: 0...20_000, using: &rng))
            child.kill()
            while let line = try child.readLine() {
                if let ack = Self.parse(line) { acks.append(ack) }
            }
            let status = child.wait()
            report.kills += 1
            if status != 128 + SIGKILL {
                report.violations.append("the workload ended with status \(status) before the kill")
                return report
            }
            for (task, step) in acks { acknowledged[task] = max(acknowledged[task] ?? 0, step) }
            report.commitsVerified += acks.count
            if let violation = try check() {
                report.violations.append("after kill \(report.kills): \(violation)")
                return report
            }
        }
        return report
    }

    private static func parse(_ line: String) -> (Int, Int)? {
        let words = line.split(separator: " ")
        guard words.count == 3, words[0] == "ack", let task = Int(words[1]), let step = Int(words[2]) else {
            return nil
        }
        return (task, step)
    }

    /// The violation the store shows now, or `nil`.
    public func check() throws -> String? {
        let store: Store
        do {
            store = try openWorkloadStore(storePath, durability: durability, clock: { 0 })
        } catch {
            return "the store does not open: \(error)"
        }
        if let problem = try verifyStore(storePath, hoard: hoard) { return problem }
        return try groupCommitViolation(in: store, writers: writers, acknowledged: acknowledged).problem
    }
}

/// `hoard verify` of the store at `path`: its complaint, or `nil` when it is clean.
public func verifyStore(_ path: String, hoard: String) throws -> String? {
    let verify = try runProcess(hoard, ["verify", path], environment: ["NO_COLOR": "1"])
    return verify.status == 0 ? nil : "hoard verify: status \(verify.status): \(verify.stdout)\(verify.stderr)"
}

/// Checks a group-commit workload's store against the last step `acknowledged` per task.
/// - Returns: the first broken promise (or `nil`), and each task's step as stored.
public func groupCommitViolation(
    in store: Store, writers: Int, acknowledged: [Int: Int]
) throws -> (problem: String?, steps: [Int]) {
    let a = try store.collection(Item.self, named: "GA")
    let b = try store.collection(Item.self, named: "GB")
    let markers = try store.collection(Item.self, named: "GM")
    if try markers.count() != 0 { return ("\(try markers.count()) records of failed writes are stored", []) }
    var steps: [Int] = []
    for task in 0..<writers {
        let stepA = try a.get(Int64(task))?.value ?? 0
        let stepB = try b.get(Int64(task))?.value ?? 0
        if stepA != stepB {
            return ("task \(task): its pair is half applied (GA holds step \(stepA), GB step \(stepB))", steps)
        }
        if stepA < acknowledged[task] ?? 0 {
            return ("task \(task): step \(acknowledged[task] ?? 0) was acknowledged, the store holds \(stepA)", steps)
        }
        if stepA > 0 && isFailingStep(stepA) {
            return ("task \(task): the store holds step \(stepA), a write that failed", steps)
        }
        steps.append(stepA)
    }
    return (nil, steps)
}
