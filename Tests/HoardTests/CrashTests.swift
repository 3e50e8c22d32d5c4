import CrashHarness
@_spi(LMDB) import Hoard
import LMDB
import TestSupport
import Testing

/// Kills a real workload process with SIGKILL at seeded points, over and over on one store, and
/// checks the store after every kill (tools/crash/Harness/Driver.swift; docs/RELIABILITY.md).
@Suite("Crash recovery", .serialized)
struct CrashTests {
    func driver(_ directory: String, seed: UInt64) throws -> CrashDriver {
        try CrashDriver(
            storePath: directory + "/store", workload: builtExecutable("CrashWorkload"),
            hoard: builtExecutable("hoard"), seed: seed
        )
    }

    @Test("durable mode: 160 kills lose no acknowledged commit and never leave a partial one")
    func durable() async throws {
        try await offPoolInTemporaryDirectory { dir in
            let report = try driver(dir, seed: SeededGenerator.seedFromEnvironment()).run(kills: 160)
            #expect(report.violations.isEmpty, "\(report.violations)")
            #expect(report.kills == 160)
            // The driver waits for 0–4 acknowledgements (seeded) before each kill: about 320 in all.
            #expect(report.commitsVerified > 160, "kills should land after some acknowledged commits: \(report)")
        }
    }

    @Test("no-sync mode: a process kill loses nothing either (60 kills)")
    func noSync() async throws {
        try await offPoolInTemporaryDirectory { dir in
            let driver = try driver(dir, seed: SeededGenerator.seedFromEnvironment() &+ 1)
            driver.durability = .riskStoreOnOSCrash
            let report = try driver.run(kills: 60)
            #expect(report.violations.isEmpty, "\(report.violations)")
            #expect(report.commitsVerified > 60)
        }
    }

    @Test(
        "group commit: 16 writer tasks killed 40 times (durable) and 20 times (no-sync); every acknowledged write is there, no write half applied, no failed write stored"
    )
    func groupCommit() async throws {
        for durability in [Hoard.Durability.durable, .riskStoreOnOSCrash] {
            try await offPoolInTemporaryDirectory { dir in
                let driver = try ConcurrentCrashDriver(
                    storePath: dir + "/store", workload: builtExecutable("CrashWorkload"),
                    hoard: builtExecutable("hoard"),
                    seed: SeededGenerator.seedFromEnvironment() &+ 7
                )
                driver.durability = durability
                let kills = durability == .durable ? 40 : 20
                let report = try driver.run(kills: kills)
                #expect(report.violations.isEmpty, "\(durability): \(report.violations)")
                #expect(report.kills == kills)
                #expect(report.commitsVerified > kills, "kills should land after acknowledged writes: \(report)")
            }
        }
    }

    @Test("the group-commit driver catches a workload that acknowledges before it writes")
    func groupCommitCatchesEarlyAcknowledgements() async throws {
        try await offPoolInTemporaryDirectory { dir in
            let driver = try ConcurrentCrashDriver(
                storePath: dir + "/store", workload: builtExecutable("CrashWorkload"), hoard: builtExecutable("hoard"),
                seed: SeededGenerator.seedFromEnvironment() &+ 8
            )
            driver.earlyAck = true
            let report = try driver.run(kills: 60)
            #expect(!report.violations.isEmpty, "60 kills of an early-acknowledging workload went unnoticed: \(report)")
        }
    }

    @Test("the driver catches a workload that splits one update across two transactions")
    func catchesSplitUpdates() async throws {
        try await offPoolInTemporaryDirectory { dir in
            let driver = try driver(dir, seed: SeededGenerator.seedFromEnvironment() &+ 2)
            driver.mode = .split
            let report = try driver.run(kills: 100)
            #expect(!report.violations.isEmpty, "100 kills of a split workload went unnoticed: \(report)")
            #expect(report.violations.first?.contains("matches neither") == true, "\(report.violations)")
        }
    }

    @Test("the driver catches a workload that acknowledges before it commits")
    func catchesEarlyAcknowledgements() async throws {
        try await offPoolInTemporaryDirectory { dir in
            let driver = try driver(dir, seed: SeededGenerator.seedFromEnvironment() &+ 3)
            driver.mode = .earlyAck
            let report = try driver.run(kills: 100)
            #expect(
                !report.violations.isEmpty, "100 kills of an early-acknowledging workload went unnoticed: \(report)")
        }
    }

    @Test("migrate() killed between two batches resumes from its checkpoint and finishes")
    func migrateKilledBetweenBatches() async throws {
        try await offPoolInTemporaryDirectory { dir in
            let path = dir + "/store"
            let originals = (0..<1_000).map { Item(id: Int64($0) * 3, name: "item \($0)", value: $0) }
            do {
                let store = try Store(path: path)
                _ = try store.collection(Item.self)  // registers key sets 1 and 2
                try store.collection(ItemV1.self, named: "Item").put(originals.map(ItemV1.init))
            }
            let child = try ChildProcess(try builtExecutable("CrashWorkload"), [path, "--migrate-stepwise", "100"])
            #expect(try child.readLine() == "batch 100")
            try child.send("next")
            #expect(try child.readLine() == "batch 200")
            try child.send("next")
            #expect(try child.readLine() == "batch 300")
            // Batch 3 is committed and the process waits before batch 4: kill it there.
            child.kill()
            #expect(child.wait() == 128 + 9)

            let store = try Store(path: path)
            let items = try store.collection(Item.self)
            let versions = try originals.map { try items.header(of: $0.id)?.version }
            #expect(versions.prefix(300).allSatisfy { $0 == 2 }, "the three committed batches are kept")
            #expect(versions.dropFirst(300).allSatisfy { $0 == 1 }, "nothing of the fourth batch was written")
            let rest = try items.migrate(batchSize: 100)
            #expect(rest.finished && rest.migrated == 700, "\(rest)")
            #expect(rest.scanned == 700, "resumed after the checkpoint, not from the start: \(rest)")
            #expect(try originals.allSatisfy { try items.header(of: $0.id)?.version == 2 })
            #expect(try items.scan() == originals)
        }
    }
}
