// The power-loss simulator's checker: run by `CrashWorkload --check-image` in a child process for
// each image (a damaged map can fault), with what the simulator knows on its standard input.
@_spi(LMDB) public import Hoard
import HoardCLI
import LMDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the simulator knows about an image: the transactions the recovered store may be at, and
/// every acknowledgement written before the crash with the last transaction committed before it.
public struct ImageExpectation: Sendable {
    /// The oldest and newest transaction the store may hold after recovery.
    public var lowest: Int
    public var highest: Int
    public var acknowledgements: [(line: String, transaction: Int)]

    public init(lowest: Int, highest: Int, acknowledgements: [(line: String, transaction: Int)]) {
        (self.lowest, self.highest, self.acknowledgements) = (lowest, highest, acknowledgements)
    }

    /// As lines: `range LOW HIGH`, then `TRANSACTION LINE` per acknowledgement.
    public var text: String {
        (["range \(lowest) \(highest)"] + acknowledgements.map { "\($0.transaction) \($0.line)" })
            .joined(separator: "\n") + "\n"
    }

    /// Reads ``text``; `nil` when it is not in that form.
    public init?(text: String) {
        let lines = text.split(separator: "\n")
        let range = lines.first?.split(separator: " ") ?? []
        guard range.count == 3, range[0] == "range", let low = Int(range[1]), let high = Int(range[2]) else {
            return nil
        }
        var acknowledgements: [(String, Int)] = []
        for line in lines.dropFirst() {
            guard let space = line.firstIndex(of: " "), let transaction = Int(line[..<space]) else { return nil }
            acknowledgements.append((String(line[line.index(after: space)...]), transaction))
        }
        self.init(lowest: low, highest: high, acknowledgements: acknowledgements)
    }
}

/// The checker's findings.
public struct ImageVerdict: Sendable {
    /// The broken promise, if any.
    public var violation: String?
    /// What the kill harness's rule (all acknowledgements count, the store's transaction aside)
    /// says of the same store: for the images that a SIGKILL leaves, the two must agree.
    public var killHarnessViolation: String?
    /// The transaction the store opened at.
    public var recovered = 0
    /// Whether the open found a creation cut short and made the store anew.
    public var recreated = false

    /// One line for the simulator: `ok|violation RECOVERED agrees|objects kept|recreated[: TEXT]`.
    public var line: String {
        let words = [
            violation == nil ? "ok" : "violation", String(recovered),
            killHarnessViolation == nil ? "agrees" : "objects",
            recreated ? "recreated" : "kept",
        ]
        return words.joined(separator: " ") + (violation.map { ": \($0)" } ?? "")
    }
}

/// Checks the image of a store at `path` as the harness checks a store after a kill, judged by
/// commit: the store opens (a new one from an image where creation was cut short), its transaction
/// lies in the expected range, `hoard verify` is clean, and its contents are the state after the
/// acknowledgements its transaction covers (or that plus the operation in flight). Then five more
/// operations run and the check is made again: damage can show only at the next write.
///
/// `hoard verify` runs in this process (`verifyProblems`), with the store closed meanwhile.
///
/// - Parameter writers: the group-commit workload's writers, `nil` for the sequential workload.
public func checkImage(
    path: String, seed: UInt64, writers: Int?, durability: Hoard.Durability, expectation: ImageExpectation
) async throws -> ImageVerdict {
    var verdict = ImageVerdict()
    do {
        // The transaction as LMDB recovered it, before the store writes anything of its own.
        let environment = try Environment(path: path)
        verdict.recovered = try environment.info().lastTransactionID
        verdict.recreated = environment.recoveredUnfinishedCreation
    } catch {
        verdict.violation = "LMDB does not open the image: \(error)"
        return verdict
    }
    if verdict.recovered < expectation.lowest || verdict.recovered > expectation.highest {
        verdict.violation =
            "the store opened at transaction \(verdict.recovered), outside \(expectation.lowest)...\(expectation.highest)"
    }
    let covered = expectation.acknowledgements.filter { $0.transaction <= verdict.recovered }.map(\.line)
    let all = expectation.acknowledgements.map(\.line)
    let check = ImageCheck(path: path, durability: durability)
    if let writers {
        try await check.groupCommit(writers: writers, covered: covered, all: all, into: &verdict)
    } else {
        try check.sequential(seed: seed, covered: covered, all: all, into: &verdict)
    }
    return verdict
}

/// The two workloads' checks of one image.
private struct ImageCheck {
    let path: String
    let durability: Hoard.Durability

    /// `hoard verify`'s complaint, or `nil` when the store is clean.
    func verify() -> String? {
        do {
            let problems = try verifyProblems(ofStoreAt: path)
            return problems.isEmpty ? nil : "hoard verify: \(problems.prefix(3).joined(separator: "; "))"
        } catch {
            return "hoard verify cannot open the store: \(error)"
        }
    }

    /// Opens the store (its clock at 0, so that expired records count), reads it with `body`,
    /// closes it and runs `hoard verify`. A store that does not open, or does not verify, breaks
    /// both rules' promises: it is recorded as such and the result is `nil`.
    func openAndVerify<R>(into verdict: inout ImageVerdict, _ body: (Store) throws -> R) -> R? {
        let result: R
        do {
            result = try body(try openWorkloadStore(path, durability: durability, clock: { 0 }))
        } catch {
            verdict.violation = verdict.violation ?? "the store does not open or read: \(error)"
            verdict.killHarnessViolation = "the store does not open or read"
            return nil
        }
        if let problem = verify() {
            verdict.violation = verdict.violation ?? problem
            verdict.killHarnessViolation = problem
            return nil
        }
        return result
    }

    func sequential(seed: UInt64, covered: [String], all: [String], into verdict: inout ImageVerdict) throws {
        func last(_ lines: [String]) -> Int { lines.compactMap { Int($0.dropFirst(4)) }.max() ?? 0 }
        let acknowledged = last(covered)
        guard let found = openAndVerify(into: &verdict, workloadContents(of:)) else { return }
        // The states after each operation up to the ones either rule may accept.
        let killRule = last(all)
        var models = [ModelState()]
        for index in 1...(max(acknowledged, killRule) + 1) {
            var next = models[index - 1]
            next.apply(Operation.at(index, seed: seed), index: index)
            models.append(next)
        }
        if found != models[killRule] && found != models[killRule + 1] {
            verdict.killHarnessViolation = "neither the state after \(killRule) nor after \(killRule + 1)"
        }
        guard found == models[acknowledged] || found == models[acknowledged + 1] else {
            verdict.violation =
                verdict.violation
                ?? "transaction \(verdict.recovered) covers acknowledgement \(acknowledged); the store holds neither that state nor the next: \(found.difference(from: models[acknowledged]))"
            return
        }
        guard verdict.violation == nil else { return }
        if let problem = checkCopies(seed: seed) {
            verdict.violation = problem
            return
        }
        let done = found == models[acknowledged] ? acknowledged : acknowledged + 1
        var model = models[done]
        do {
            let store = try openWorkloadStore(path, durability: durability)
            for index in (done + 1)...(done + 5) {
                do {
                    try execute(Operation.at(index, seed: seed), index: index, store: store, mode: .correct)
                } catch {
                    verdict.violation = "operation \(index), after recovery, failed: \(error)"
                    return
                }
                model.apply(Operation.at(index, seed: seed), index: index)
            }
            logicalNow.store(0, ordering: .relaxed)
            let after = try workloadContents(of: store)
            if after != model {
                verdict.violation = "after five more operations: \(after.difference(from: model))"
                return
            }
        }
        if let problem = verify() { verdict.violation = "after five more operations: \(problem)" }
    }

    /// Checks every copy of the store beside it: a copy with a data file is whole, verifies
    /// clean, and holds the state when it was made (copies made before the crash point only).
    func checkCopies(seed: UInt64) -> String? {
        let parent = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        let prefix = Operation.copyPath(of: path, index: 0).dropLast()
        for copy in directoryEntries(parent).map({ parent + "/" + $0 }) where copy.hasPrefix(prefix) {
            guard let index = Int(copy.dropFirst(prefix.count)), access(copy + "/data.mdb", F_OK) == 0 else { continue }
            do {
                let contents = try workloadContents(
                    of: try openWorkloadStore(copy, durability: durability, clock: { 0 }))
                let expected = ModelState(seed: seed, operations: index - 1)
                if contents != expected {
                    return "the copy of operation \(index): \(contents.difference(from: expected))"
                }
                let problems = try verifyProblems(ofStoreAt: copy)
                if !problems.isEmpty { return "the copy of operation \(index): \(problems.prefix(3))" }
            } catch {
                return "the copy of operation \(index) does not open: \(error)"
            }
        }
        return nil
    }

    func groupCommit(writers: Int, covered: [String], all: [String], into verdict: inout ImageVerdict) async throws {
        func steps(_ lines: [String]) -> [Int: Int] {
            var result: [Int: Int] = [:]
            for line in lines {
                let words = line.split(separator: " ")
                guard words.count == 3, let task = Int(words[1]), let step = Int(words[2]) else { continue }
                result[task] = max(result[task] ?? 0, step)
            }
            return result
        }
        let read = openAndVerify(into: &verdict) { store in
            (
                killRule: try groupCommitViolation(in: store, writers: writers, acknowledged: steps(all)).problem,
                found: try groupCommitViolation(in: store, writers: writers, acknowledged: steps(covered))
            )
        }
        guard let read else { return }
        verdict.killHarnessViolation = read.killRule
        if let problem = read.found.problem { verdict.violation = verdict.violation ?? problem }
        let before = read.found.steps
        guard verdict.violation == nil else { return }
        // Five more steps of every writer, through group commit.
        do {
            try await runConcurrentWorkload(
                path: path, writers: writers, durability: durability, steps: 5, earlyAck: false)
        } catch {
            verdict.violation = "five more steps after recovery failed: \(error)"
            return
        }
        do {
            let store = try openWorkloadStore(path, durability: durability, clock: { 0 })
            let after = try groupCommitViolation(in: store, writers: writers, acknowledged: [:])
            if let problem = after.problem {
                verdict.violation = "after five more steps: \(problem)"
                return
            } else if let task = before.indices.first(where: { after.steps[$0] < before[$0] + 4 }) {
                verdict.violation =
                    "after five more steps: task \(task) went from step \(before[task]) to \(after.steps[task])"
                return
            }
        }
        if let problem = verify() { verdict.violation = "after five more steps: \(problem)" }
    }
}
