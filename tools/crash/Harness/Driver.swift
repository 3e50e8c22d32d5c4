@_spi(LMDB) public import Hoard
import LMDB
import TestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a run of the crash driver found.
public struct CrashReport: Sendable, CustomStringConvertible {
    public var seed: UInt64
    public var kills = 0
    /// Acknowledged commits whose effects were checked in the store after a kill.
    public var commitsVerified = 0
    /// Kills after which the store held the in-flight operation's effects as well.
    public var inFlightApplied = 0
    /// Broken promises, each with what was found; the driver stops at the first.
    public var violations: [String] = []

    /// The summary line of the soak script.
    public var description: String {
        "kills: \(kills), commits verified: \(commitsVerified), violations: \(violations.count) (seed \(seed), in-flight commits found applied: \(inFlightApplied))"
    }
}

/// Kills a real workload process with SIGKILL again and again over one store, and after each
/// kill checks every promise of the store: it opens without repair, no stale reader slot is left
/// for the next writer, `hoard verify` is clean, and the content equals the model after the last
/// acknowledged operation or after the one in flight — never a mix, never less.
public final class CrashDriver {
    public var storePath: String
    public var workload: String
    public var hoard: String
    public var seed: UInt64
    public var durability: Hoard.Durability = .durable
    public var mode: WorkloadMode = .correct
    /// Up to this many acknowledgements are awaited before the kill (chosen by the seed).
    public var maxAcks = 4
    /// After them, the kill comes after a seeded delay of up to this many microseconds. The delay
    /// chooses the kill point (inside an operation, between two, during start-up); nothing waits on it.
    public var maxDelayMicroseconds: UInt32 = 25_000

    /// The state after operations 1...acknowledged: what the store must hold (or that plus the
    /// operation in flight).
    public private(set) var model = ModelState()
    public private(set) var acknowledged = 0

    public init(storePath: String, workload: String, hoard: String, seed: UInt64) {
        self.storePath = storePath
        self.workload = workload
        self.hoard = hoard
        self.seed = seed
    }

    private var workloadArguments: [String] {
        [
            storePath, "--seed", String(seed), "--start", String(acknowledged + 1),
            "--durability", durability.workloadName, "--mode", mode.rawValue,
        ]
    }

    /// Runs the workload to its end — `count` operations, or fewer when it fails — with extra
    /// `arguments` and `environment` (fault injection), and takes in its acknowledgements.
    /// - Returns: its exit status and standard error.
    public func runWorkload(
        count: Int, arguments: [String] = [], environment: [String: String] = [:]
    ) throws -> (status: Int32, stderr: String, acks: Int) {
        let result = try runProcess(
            workload, workloadArguments + ["--count", String(count)] + arguments, environment: environment)
        let acks = result.stdout.split(separator: "\n").compactMap { $0.hasPrefix("ack ") ? Int($0.dropFirst(4)) : nil }
        if let problem = absorb(acks) { return (result.status, result.stderr + "\n" + problem, acks.count) }
        return (result.status, result.stderr, acks.count)
    }

    /// Applies acknowledged operations to the model; a gap or disorder is a violation.
    private func absorb(_ acks: [Int]) -> String? {
        for index in acks {
            guard index == acknowledged + 1 else {
                return "acknowledgement \(index) out of order after \(acknowledged)"
            }
            model.apply(Operation.at(index, seed: seed), index: index)
            acknowledged = index
        }
        return nil
    }

    /// Runs `kills` kill-and-check rounds; `progress` sees the report after each.
    public func run(kills: Int, progress: (CrashReport) -> Void = { _ in }) throws -> CrashReport {
        var report = CrashReport(seed: seed)
        var rng = SeededGenerator(seed: seed ^ 0xC0FF_EE00 ^ UInt64(acknowledged))
        for _ in 0..<kills {
            let child = try ChildProcess(workload, workloadArguments)
            let awaited = Int.random(in: 0...maxAcks, using: &rng)
            var seen = 0
            var acks: [Int] = []
            while seen < awaited, let line = try child.readLine() {
                guard let index = Int(line.dropFirst(4)), line.hasPrefix("ack ") else { continue }
                acks.append(index)
                seen += 1
            }
            usleep(UInt32.random(in: 0...maxDelayMicroseconds, using: &rng))
            child.kill()
            // Acknowledgements written before the kill landed are still in the pipe.
            while let line = try child.readLine() {
                if line.hasPrefix("ack "), let index = Int(line.dropFirst(4)) { acks.append(index) }
            }
            let status = child.wait()
            report.kills += 1
            if status != 128 + SIGKILL {
                report.violations.append(
                    "the workload ended with status \(status) before the kill (its stderr is above)")
                return report
            }
            if let problem = absorb(acks) {
                report.violations.append(problem)
                return report
            }
            report.commitsVerified += acks.count
            if let violation = try check(report: &report) {
                report.violations.append("after kill \(report.kills) (acknowledged \(acknowledged)): \(violation)")
                return report
            }
            progress(report)
        }
        return report
    }

    /// Checks the store after the workload ended (killed, or failed on an injected fault); moves
    /// the model on when the operation in flight turns out committed. Returns the violation, if any.
    public func check() throws -> String? {
        var report = CrashReport(seed: seed)
        return try check(report: &report)
    }

    private func check(report: inout CrashReport) throws -> String? {
        let store: Store
        do {
            store = try openWorkloadStore(storePath, durability: durability, clock: { 0 })
        } catch {
            return "the store does not open: \(error)"
        }
        let stale = try store.environment.readers().filter(\.isStale)
        if !stale.isEmpty { return "\(stale.count) stale reader slots after opening" }
        if let problem = try verifyStore(storePath, hoard: hoard) { return problem }

        let found = try workloadContents(of: store)
        if found == model { return nil }
        var next = model
        next.apply(Operation.at(acknowledged + 1, seed: seed), index: acknowledged + 1)
        if found == next {
            model = next
            acknowledged += 1
            report.inFlightApplied += 1
            return nil
        }
        return
            "the store matches neither the last acknowledged state nor the next one: \(found.difference(from: model))"
    }
}
