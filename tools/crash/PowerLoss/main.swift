// crash-images: the power-loss simulator at length (tools/crash/Harness/PowerLoss.swift), with
// the summary lines docs/RELIABILITY.md quotes.
//
//   tools/crash/powerloss.sh [IMAGES] [SEED]      (builds in release mode and runs this)
//
//   CrashImages --images N [--seed S] [--durability durable|cache|nosync] [--writers N]
//               [--operations N] [--subsets K] [--tear-size BYTES] [--mode correct|split|early-ack]
//
// Without --durability, runs durable and cache; without --writers (0: the sequential workload,
// N: the group-commit one with N writers), the sequential workload and the group-commit one with 16 writers, each with a quarter of the images. Exit status 1 on any
// violation in the durable and cache modes (the no-sync mode is the positive control: it must
// show violations, and status 1 says it did not).
import CrashHarness
import Hoard
import LMDB
import TestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

let images = commandLineValue("images").flatMap(Int.init) ?? 20_000
let seed = commandLineValue("seed").flatMap(UInt64.init) ?? UInt64(time(nil))
let modes: [Hoard.Durability] =
    commandLineValue("durability").map { [Hoard.Durability(workloadName: $0)] } ?? [
        .durable, .riskLastCommitOnOSCrash,
    ]
let workloads: [Int?] = commandLineValue("writers").flatMap(Int.init).map { [$0 == 0 ? nil : $0] } ?? [nil, 16]
let products = try productsDirectory()
let packageRoot = String(products[..<(products.range(of: "/.build/")?.lowerBound ?? products.endIndex)])

let directory = try makeTemporaryDirectory()
defer { removeTree(directory) }
let recorder = try buildRecorder(packageRoot: packageRoot, into: directory)
var failed = false
for durability in modes {
    for writers in workloads {
        let simulator = PowerLossSimulator(
            workload: try builtExecutable("CrashWorkload"), recorder: recorder, seed: seed)
        simulator.durability = durability
        simulator.writers = writers
        simulator.mode = WorkloadMode(rawValue: commandLineValue("mode") ?? "correct") ?? .correct
        simulator.maxImages = images / (modes.count * workloads.count)
        // A run long enough for the images asked for: a sequential operation gives about 50
        // distinct images, a group-commit step (of every writer) about 10.
        simulator.operations = max(30, simulator.maxImages / (writers == nil ? 40 : 6))
        if let operations = commandLineValue("operations").flatMap(Int.init) { simulator.operations = operations }
        if let subsets = commandLineValue("subsets").flatMap(Int.init) { simulator.subsets = subsets }
        if let tear = commandLineValue("tear-size").flatMap(Int.init) { simulator.tearSize = tear }
        let name = "\(durability.workloadName), \(writers.map { "group commit, \($0) writers" } ?? "sequential")"
        let report = try simulator.run { report in print("[\(name)] \(report)") }
        print("\(name): \(report)")
        for violation in report.violations { print("VIOLATION: \(violation)") }
        let expectViolations =
            durability == .riskStoreOnOSCrash || simulator.mode != .correct || simulator.tearSize < 512
        failed =
            failed || (report.violationCount > 0) != expectViolations || !report.replayMatches
            || report.killHarnessDisagreements > 0
    }
}
exit(failed ? 1 : 0)
