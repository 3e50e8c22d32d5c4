import CrashHarness
import Hoard
import LMDB
import TestSupport
import Testing

/// Kills a real workload process with SIGKILL at seeded points, over and over on one store, and
/// checks the store after every kill (tools/crash/Harness/Driver.swift; docs/RELIABILITY.md).
@Suite("Crash recovery", .serialized)
struct CrashTests {
    func driver(_ directory: String, seed: UInt64) throws -> CrashDriver {
        try CrashDriver(
            storePath: directory + "/store", workload: builtExecutable("CrashWorkload"), hoard: builtExecutable("hoard"), seed: seed
        )
    }

    @Test("durable mode: 160 kills lose no acknowledged commit and never leave a partial one")
    func durable() throws {
        try withTemporaryDirectory { dir in
            let report = try driver(dir, seed: SeededGenerator.seedFromEnvironment()).run(kills: 160)
            #expect(report.violations.isEmpty, "\(report.violations)")
            #expect(report.kills == 160)
            #expect(report.commitsVerified > 160, "kills should land after some acknowledged commits: \(report)")
            #expect(report.inFlightApplied > 0, "some kills should land between a commit and its acknowledgement: \(report)")
        }
    }

    @Test("no-sync mode: a process kill loses nothing either (60 kills)")
    func noSync() throws {
        try withTemporaryDirectory { dir in
            let driver = try driver(dir, seed: SeededGenerator.seedFromEnvironment() &+ 1)
            driver.durability = .riskStoreOnOSCrash
            let report = try driver.run(kills: 60)
            #expect(report.violations.isEmpty, "\(report.violations)")
            #expect(report.commitsVerified > 60)
        }
    }

    @Test("the driver catches a workload that splits one update across two transactions")
    func catchesSplitUpdates() throws {
        try withTemporaryDirectory { dir in
            let driver = try driver(dir, seed: SeededGenerator.seedFromEnvironment() &+ 2)
            driver.mode = .split
            let report = try driver.run(kills: 100)
            #expect(!report.violations.isEmpty, "100 kills of a split workload went unnoticed: \(report)")
            #expect(report.violations.first?.contains("matches neither") == true, "\(report.violations)")
        }
    }

    @Test("the driver catches a workload that acknowledges before it commits")
    func catchesEarlyAcknowledgements() throws {
        try withTemporaryDirectory { dir in
            let driver = try driver(dir, seed: SeededGenerator.seedFromEnvironment() &+ 3)
            driver.mode = .earlyAck
            let report = try driver.run(kills: 100)
            #expect(!report.violations.isEmpty, "100 kills of an early-acknowledging workload went unnoticed: \(report)")
        }
    }
}
