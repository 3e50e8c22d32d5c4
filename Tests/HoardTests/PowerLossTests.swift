import CrashHarness
import Foundation
import Hoard
import LMDB
import TestSupport
import Testing

/// The power-loss simulator (tools/crash/recorder.c, tools/crash/Harness/PowerLoss.swift): a
/// recorded run of the crash workload from no store, rebuilt as the disks a power cut at any call
/// could leave, each checked in a child process. docs/RELIABILITY.md, "Power loss", states the
/// file-system model and the promises these tests hold the store to.
@Suite("Power loss", .serialized)
struct PowerLossTests {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    func simulator(
        _ directory: String, seed: UInt64, durability: Hoard.Durability, writers: Int? = nil,
        mode: WorkloadMode = .correct, images: Int
    ) throws -> PowerLossSimulator {
        let simulator = PowerLossSimulator(
            workload: try builtExecutable("CrashWorkload"),
            recorder: try buildRecorder(packageRoot: Self.packageRoot, into: directory), seed: seed)
        simulator.durability = durability
        simulator.writers = writers
        simulator.mode = mode
        simulator.maxImages = images
        simulator.operations = writers == nil ? 20 : 60
        return simulator
    }

    @Test(
        "the recorder logs the workload's files, syncs and acknowledgements; replaying the log gives its files byte for byte"
    )
    func recorderReplays() async throws {
        try await offPoolInTemporaryDirectory { dir in
            let seed = SeededGenerator.seedFromEnvironment()
            let simulator = try simulator(dir, seed: seed, durability: .durable, images: 0)
            let run = try simulator.record(in: dir)
            let calls = run.calls
            let opens = calls.filter { $0.kind == .open }.map { String(decoding: $0.bytes, as: UTF8.self) }
            #expect(opens.contains(run.root + "/store/data.mdb"), "\(opens)")
            // LMDB's meta pages go through a second, O_DSYNC descriptor of the data file.
            #expect(calls.contains { $0.kind == .open && $0.a & UInt64(O_DSYNC) != 0 })
            #expect(calls.contains { $0.kind == .makeDirectory })
            #expect(calls.filter { $0.kind == .sync }.count > 20)
            #expect(calls.filter { $0.kind == .acknowledgement }.count == simulator.operations, "seed \(seed)")
            #expect(try simulator.replayMatches(run), "seed \(seed)")
        }
    }

    @Test("the recorder stops a process that maps a recorded file writable and shared: its writes would escape the log")
    func recorderRefusesWritableMapping() throws {
        try withTemporaryDirectory { dir in
            let recorder = try buildRecorder(packageRoot: Self.packageRoot, into: dir)
            #expect(mkdir(dir + "/root", 0o700) == 0)
            try writeFile(dir + "/root/data.mdb", [UInt8](repeating: 0, count: 4096))
            let script = "import mmap, os; fd = os.open('\(dir)/root/data.mdb', os.O_RDWR); mmap.mmap(fd, 4096)"
            let result = try runProcess(
                "/usr/bin/python3", ["-c", script],
                environment: [
                    "LD_PRELOAD": recorder, "HOARD_RECORD_ROOT": dir + "/root", "HOARD_RECORD_LOG": dir + "/log",
                ])
            #expect(result.status == 128 + SIGABRT, "\(result.status) \(result.stderr)")
            #expect(result.stderr.contains("writable shared mapping"), "\(result.stderr)")
        }
    }

    @Test(
        ".durable: every image of creation, puts with expiry, synchronize, migrate, purge, copies and group commit opens, verifies and holds an acknowledged state",
        arguments: [nil, 16])
    func durable(writers: Int?) async throws {
        try await offPoolInTemporaryDirectory { dir in
            let seed = SeededGenerator.seedFromEnvironment()
            let report = try simulator(dir, seed: seed, durability: .durable, writers: writers, images: 250).run()
            #expect(report.images == 250, "\(report)")
            #expect(report.violationCount == 0, "\(report)\n\(report.violations.joined(separator: "\n"))")
            #expect(report.replayMatches && report.allApplied > 0 && report.killHarnessDisagreements == 0, "\(report)")
            #expect(report.lostLastCommit == 0, "\(report)")
        }
    }

    @Test(
        ".cache: every image holds the state after the last commit that returned or the one before, never less",
        arguments: [nil, 16])
    func cache(writers: Int?) async throws {
        try await offPoolInTemporaryDirectory { dir in
            let seed = SeededGenerator.seedFromEnvironment()
            let report = try simulator(
                dir, seed: seed, durability: .riskLastCommitOnOSCrash, writers: writers, images: 250
            )
            .run()
            #expect(report.images == 250, "\(report)")
            #expect(report.violationCount == 0, "\(report)\n\(report.violations.joined(separator: "\n"))")
            #expect(report.replayMatches && report.killHarnessDisagreements == 0, "\(report)")
            // The promise is exercised: some images did lose the last commit.
            #expect(report.lostLastCommit > 0, "\(report)")
        }
    }

    @Test(
        "broken promises are caught within 100 images: no syncs, acknowledging before the commit, one update in two commits",
        arguments: [
            (Hoard.Durability.riskStoreOnOSCrash, WorkloadMode.correct, nil as Int?),
            (.durable, .earlyAck, nil), (.durable, .earlyAck, 16), (.durable, .split, nil),
        ])
    func positiveControls(durability: Hoard.Durability, mode: WorkloadMode, writers: Int?) async throws {
        try await offPoolInTemporaryDirectory { dir in
            let seed = SeededGenerator.seedFromEnvironment()
            let simulator = try simulator(
                dir, seed: seed, durability: durability, writers: writers, mode: mode, images: 100)
            simulator.stopAtFirstViolation = true
            let report = try simulator.run()
            #expect(report.violationCount > 0, "\(report)")
        }
    }

    @Test("a new store's creation: no image fails to open, a torn first write of the meta pages included")
    func creation() async throws {
        try await offPoolInTemporaryDirectory { dir in
            let seed = SeededGenerator.seedFromEnvironment()
            let simulator = try simulator(dir, seed: seed, durability: .durable, images: 400)
            simulator.creationOnly = true
            simulator.tornPrefixes = true
            simulator.passes = 1
            let report = try simulator.run()
            // The creation writes two meta pages (two non-zero sectors) into an empty file: few
            // distinct images, among them (its first write torn after the first page, which every
            // seed builds) first pages that LMDB alone would refuse for good.
            #expect(report.images >= 10 && report.recreatedCreations > 0, "\(report)")
            #expect(report.violationCount == 0, "\(report)\n\(report.violations.joined(separator: "\n"))")
        }
    }

    @Test("meta pages torn into 8-byte pieces (beyond LMDB's assumption of atomic 512-byte sectors) damage a store")
    func tornMetaPages() async throws {
        try await offPoolInTemporaryDirectory { dir in
            // A fixed seed: this shows LMDB's documented limit, found first by ALICE (OSDI'14).
            let simulator = try simulator(dir, seed: 3, durability: .durable, images: 600)
            simulator.tearSize = 8
            simulator.metaWritesOnly = true
            simulator.subsets = 12
            simulator.passes = 1
            simulator.stopAtFirstViolation = true
            let report = try simulator.run()
            #expect(report.violationCount > 0, "\(report)")
        }
    }

    @Test("a store in the cache mode flushes when it closes: after a clean shutdown nothing is pending")
    func cacheCloseFlushes() async throws {
        try await offPoolInTemporaryDirectory { dir in
            let simulator = try simulator(
                dir, seed: SeededGenerator.seedFromEnvironment(), durability: .riskLastCommitOnOSCrash, images: 0)
            let run = try simulator.record(in: dir)
            var last: CrashState?
            var pendingBeforeClose = 0
            run.forEachCrashState { state in
                if state.point > 0, run.calls[state.point - 1].kind == .acknowledgement {
                    pendingBeforeClose = state.pendingCount
                }
                last = state
                return true
            }
            // Between commits the last meta page waits for the next flush; at the end, nothing does.
            #expect(pendingBeforeClose > 0)
            #expect(last?.pendingCount == 0, "\(last?.pendingCount ?? -1) changes pending after the store closed")
        }
    }
}
