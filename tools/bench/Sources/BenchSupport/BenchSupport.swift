// Measurement helpers shared by the benchmark executables: medians of interleaved rounds and
// a table of ratios against a baseline from the same run.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Nanoseconds from a monotonic clock.
@inline(__always)
public func now() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// Times `body` once, in nanoseconds.
@inline(__always)
public func time(_ body: () throws -> Void) rethrows -> UInt64 {
    let start = now()
    try body()
    return now() - start
}

public func median<Value: Comparable>(_ values: [Value]) -> Value {
    let sorted = values.sorted()
    return sorted[sorted.count / 2]
}

/// One compared pair: a candidate against its baseline, each the median of interleaved rounds.
public struct Comparison {
    public var name: String
    public var baseline: String
    public var operations: Int
    public var baselineNanos: UInt64
    public var candidateNanos: UInt64
    public var budget: Double?
    /// The median of each round's candidate time / the same round's baseline time, when the two
    /// were measured in rounds (``compare(_:baseline:operations:rounds:budget:baselineRound:candidateRound:)``).
    /// The two of a round run next to each other, so a drift of the machine over seconds moves
    /// both alike: on a shared machine this figure spreads less from run to run than ``ratio``
    /// (BENCHMARKS.md shows it for the observation bench's floor rows). A budget is still judged
    /// by ``ratio``.
    public var roundRatio: Double?

    public init(
        name: String, baseline: String, operations: Int, baselineNanos: UInt64, candidateNanos: UInt64,
        budget: Double? = nil, roundRatio: Double? = nil
    ) {
        (self.name, self.baseline, self.operations) = (name, baseline, operations)
        (self.baselineNanos, self.candidateNanos, self.budget) = (baselineNanos, candidateNanos, budget)
        self.roundRatio = roundRatio
    }

    /// candidate time / baseline time.
    public var ratio: Double { Double(candidateNanos) / Double(max(baselineNanos, 1)) }
    public var withinBudget: Bool { budget.map { ratio <= $0 } ?? true }
}

/// Runs baseline and candidate `rounds` times each, alternating so that drift of the machine
/// hits both alike, and keeps the medians (and the median of the rounds' ratios,
/// ``Comparison/roundRatio``). Which of the two goes first swaps every round, so that neither
/// always runs in the other's wake (the caches it left, the threads it woke).
public func compare(
    _ name: String,
    baseline: String,
    operations: Int,
    rounds: Int,
    budget: Double? = nil,
    baselineRound: () throws -> UInt64,
    candidateRound: () throws -> UInt64
) rethrows -> Comparison {
    var base: [UInt64] = []
    var cand: [UInt64] = []
    // One unmeasured warm-up of each.
    _ = try baselineRound()
    _ = try candidateRound()
    for round in 0..<rounds {
        if round.isMultiple(of: 2) {
            base.append(try baselineRound())
            cand.append(try candidateRound())
        } else {
            cand.append(try candidateRound())
            base.append(try baselineRound())
        }
    }
    return Comparison(
        name: name, baseline: baseline, operations: operations, baselineNanos: median(base),
        candidateNanos: median(cand), budget: budget,
        roundRatio: median(zip(cand, base).map { Double($0) / Double(max($1, 1)) }))
}

/// ``compare(_:baseline:operations:rounds:budget:baselineRound:candidateRound:)`` with each round
/// cut into `slices` slices that the two sides take in turn (baseline then candidate, then the
/// other way round): on a machine whose speed drifts within seconds (a shared virtual machine),
/// both sides of a round then run in the same moments. `slice(i)` times slice `i` of a round.
public func compareInterleaved(
    _ name: String,
    baseline: String,
    operations: Int,
    rounds: Int,
    slices: Int,
    budget: Double? = nil,
    baselineSlice: (Int) throws -> UInt64,
    candidateSlice: (Int) throws -> UInt64
) rethrows -> Comparison {
    var base: [UInt64] = []
    var cand: [UInt64] = []
    // One unmeasured warm-up of each, as a round.
    for slice in 0..<slices {
        _ = try baselineSlice(slice)
        _ = try candidateSlice(slice)
    }
    for _ in 0..<rounds {
        var (roundBase, roundCand): (UInt64, UInt64) = (0, 0)
        for slice in 0..<slices {
            if slice.isMultiple(of: 2) {
                roundBase += try baselineSlice(slice)
                roundCand += try candidateSlice(slice)
            } else {
                roundCand += try candidateSlice(slice)
                roundBase += try baselineSlice(slice)
            }
        }
        base.append(roundBase)
        cand.append(roundCand)
    }
    return Comparison(
        name: name, baseline: baseline, operations: operations, baselineNanos: median(base),
        candidateNanos: median(cand), budget: budget,
        roundRatio: median(zip(cand, base).map { Double($0) / Double(max($1, 1)) }))
}

/// Prints the comparisons as an aligned table; returns whether every budget holds.
@discardableResult
public func report(_ title: String, _ comparisons: [Comparison]) -> Bool {
    print("## \(title)")
    print("")
    print("| benchmark | baseline | ns/op baseline | ns/op candidate | ratio | median of round ratios | budget |")
    print("| --- | --- | ---: | ---: | ---: | ---: | --- |")
    for c in comparisons {
        let perBase = Double(c.baselineNanos) / Double(c.operations)
        let perCand = Double(c.candidateNanos) / Double(c.operations)
        let budget = c.budget.map { "≤ \(format($0, 2))× \(c.withinBudget ? "ok" : "MISSED")" } ?? "—"
        let rounds = c.roundRatio.map { "\(format($0, 3))×" } ?? "—"
        print(
            "| \(c.name) | \(c.baseline) | \(format(perBase, 1)) | \(format(perCand, 1)) | \(format(c.ratio, 3))× | \(rounds) | \(budget) |"
        )
    }
    print("")
    return comparisons.allSatisfy(\.withinBudget)
}

public func format(_ value: Double, _ decimals: Int) -> String {
    var scale = 1.0
    for _ in 0..<decimals { scale *= 10 }
    let rounded = (value * scale).rounded() / scale
    var text = String(rounded)
    if let dot = text.firstIndex(of: ".") {
        let have = text.distance(from: dot, to: text.endIndex) - 1
        if have < decimals { text += String(repeating: "0", count: decimals - have) }
    } else if decimals > 0 {
        text += "." + String(repeating: "0", count: decimals)
    }
    return text
}

/// Removes a store made in a ``temporaryDirectory(_:)`` at `directory`/store.
public func removeStore(in directory: String) {
    unlink(directory + "/store/data.mdb")
    unlink(directory + "/store/lock.mdb")
    rmdir(directory + "/store")
    rmdir(directory)
}

/// A fresh temporary directory.
public func temporaryDirectory(_ name: String) -> String {
    var template = Array("/tmp/hoard-bench-\(name)-XXXXXX".utf8CString)
    let path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
    return path
}

/// A small seeded generator, so that every run uses the same keys and order.
public struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Reads `--name value` from the command line.
public func option(_ name: String, default value: Int) -> Int {
    let args = CommandLine.arguments
    if let i = args.firstIndex(of: "--\(name)"), i + 1 < args.count, let parsed = Int(args[i + 1]) { return parsed }
    return value
}

/// CPU time this process has used, in seconds (user and system).
public func processCPUSeconds() -> Double {
    var usage = rusage()
    #if canImport(Glibc)
    getrusage(RUSAGE_SELF.rawValue, &usage)
    #else
    getrusage(RUSAGE_SELF, &usage)
    #endif
    func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}
