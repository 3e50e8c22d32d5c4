import CrashHarness
import Foundation
@_spi(LMDB) import Hoard
import HoardTestSupport
import LMDB
import TestSupport
import Testing

/// Faults a storage engine meets in production, each injected for real: a full disk, the map
/// cap, I/O errors from an LD_PRELOAD shim, the reader table full, a reader killed inside its
/// transaction, two writer processes, a damaged record. After each: a clear error, earlier
/// commits intact (checked against the crash harness's model), and the next write succeeds.
@Suite("Faults", .serialized)
struct FaultTests {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    func driver(_ directory: String, seed: UInt64) throws -> CrashDriver {
        try CrashDriver(
            storePath: directory + "/store", workload: builtExecutable("CrashWorkload"),
            hoard: builtExecutable("hoard"), seed: seed)
    }

    @Test("a full disk: the write fails clearly, the store stays intact, the next write after space is freed succeeds")
    func diskFull() async throws {
        try await offPoolInTemporaryDirectory { dir in
            let driver = try driver(dir, seed: SeededGenerator.seedFromEnvironment())
            #expect(try driver.runWorkload(count: 2).status == 0)
            // The data file may grow by 64 KiB more: RLIMIT_FSIZE, the portable stand-in for a full disk.
            let full = try driver.runWorkload(count: 500, arguments: ["--grow-limit", "65536"])
            #expect(full.status == 1, "the workload did not fill the disk in 500 operations")
            #expect(full.stderr.contains("the disk may be full"), "\(full.stderr)")
            #expect(try driver.check() == nil)
            let after = try driver.runWorkload(count: 5)
            #expect(after.status == 0 && after.acks == 5, "\(after.stderr)")
            #expect(try driver.check() == nil)
        }
    }

    /// Builds tools/crash/faultshim.c into `directory` with the system's C compiler.
    func buildShim(in directory: String) throws -> String {
        let candidates: [String] = ["/usr/bin/cc", "/usr/bin/clang", "/usr/bin/gcc"]
        let compiler = candidates.first { path in access(path, X_OK) == 0 }
        let library = directory + "/faultshim.so"
        let built = try runProcess(
            try #require(compiler, "no C compiler for the LD_PRELOAD shim"),
            [
                "-shared", "-fPIC", "-o", library, Self.packageRoot + "/tools/crash/faultshim.c", "-ldl",
            ])
        #expect(built.status == 0, "\(built.stderr)")
        return library
    }

    @Test(
        "EIO or ENOSPC from LMDB's writes and syncs: the commit fails clearly, earlier commits survive, the next succeeds",
        arguments: [("pwrite", "EIO"), ("writev", "ENOSPC"), ("fdatasync", "EIO")])
    func ioFaults(call: String, error: String) async throws {
        try await offPoolInTemporaryDirectory { dir in
            let shim = try buildShim(in: dir)
            let driver = try driver(dir, seed: SeededGenerator.seedFromEnvironment() &+ 7)
            // Three operations committed before the fault: the model check below covers them.
            #expect(try driver.runWorkload(count: 3).status == 0)
            #expect(driver.acknowledged == 3)
            let faulty = try driver.runWorkload(
                count: 100,
                environment: [
                    "LD_PRELOAD": shim, "HOARD_FAULT_CALL": call, "HOARD_FAULT_AT": "4", "HOARD_FAULT_ERRNO": error,
                ])
            #expect(faulty.status == 1, "no \(call) fault in 100 operations: \(faulty.stderr)")
            #expect(faulty.stderr.contains("mdb_txn_commit failed"), "\(faulty.stderr)")
            #expect(faulty.stderr.contains(error == "EIO" ? "Input/output error" : "No space left"), "\(faulty.stderr)")
            #expect(try driver.check() == nil)
            let after = try driver.runWorkload(count: 5)
            #expect(after.status == 0 && after.acks == 5, "\(after.stderr)")
            #expect(try driver.check() == nil)
        }
    }

    @Test("a store whose creation fails at any of its first syncs still opens afterwards")
    func creationCutShort() async throws {
        try await offPoolInTemporaryDirectory { dir in
            let shim = try buildShim(in: dir)
            try makeSampleStore(dir + "/source")
            let dump = try runProcess(
                try builtExecutable("hoard"), ["dump", dir + "/source"], environment: ["NO_COLOR": "1"])
            #expect(dump.status == 0, "\(dump.stderr)")
            // `hoard load` into a new path creates the store, then writes the records: the n-th
            // data sync of the process fails, wherever in that sequence it falls.
            for n in 1...6 {
                let path = dir + "/new-\(n)"
                let load = try runProcess(
                    try builtExecutable("hoard"), ["load", path], input: Array(dump.stdout.utf8),
                    environment: [
                        "NO_COLOR": "1", "LD_PRELOAD": shim, "HOARD_FAULT_CALL": "fdatasync", "HOARD_FAULT_AT": "\(n)",
                        "HOARD_FAULT_ERRNO": "EIO",
                    ])
                // Whatever failed, what is there opens: nothing, an empty store or the whole load.
                let store = try Store(path: path, options: testOptions)
                let notes = try store.collection(Note.self).count()
                #expect(
                    notes == (load.status == 0 ? 5 : 0),
                    "sync \(n): status \(load.status), \(notes) notes; \(load.stderr)")
            }
        }
    }

    @Test("a copy cut short by a full disk leaves no store behind, and the next copy succeeds")
    func copyCutShort() async throws {
        try await offPoolInTemporaryDirectory { dir in
            let shim = try buildShim(in: dir)
            try makeSampleStore(dir + "/store")
            // The copy's first write fails (a small store is copied in one). Under its final name
            // even an empty file would open as an empty store: a backup that looks whole.
            let failed = try runProcess(
                try builtExecutable("hoard"), ["compact", dir + "/store", dir + "/copy"],
                environment: [
                    "NO_COLOR": "1", "LD_PRELOAD": shim, "HOARD_FAULT_CALL": "write", "HOARD_FAULT_AT": "1",
                    "HOARD_FAULT_ERRNO": "ENOSPC",
                ])
            #expect(failed.status != 0)
            #expect(failed.stderr.contains("No space left"), "\(failed.stderr)")
            #expect(access(dir + "/copy/data.mdb", F_OK) != 0, "a partial copy was left under the store's name")
            #expect(access(dir + "/copy/data.mdb.partial", F_OK) != 0)
            // Space again: the copy is whole and reads.
            let copied = try runProcess(
                try builtExecutable("hoard"), ["compact", dir + "/store", dir + "/copy"], environment: ["NO_COLOR": "1"]
            )
            #expect(copied.status == 0, "\(copied.stderr)")
            #expect(
                try runProcess(try builtExecutable("hoard"), ["verify", dir + "/copy"], environment: ["NO_COLOR": "1"])
                    .status == 0)
        }
    }

    @Test("the map cap: a clear error, committed data readable, writes succeed again once records are deleted")
    func mapCap() async throws {
        try await offPoolInTemporaryDirectory { dir in
            let store = try Store(
                path: dir + "/store", options: .init(durability: .riskStoreOnOSCrash, maxMapSize: 1 << 20))
            let items = try store.collection(Item.self)
            var stored = 0
            var failure: (any Error)?
            while failure == nil && stored < 100_000 {
                do {
                    try items.put(
                        (stored..<stored + 500).map {
                            Item(id: Int64($0), name: String(repeating: "x", count: 100), value: $0)
                        })
                    stored += 500
                } catch {
                    failure = error
                }
            }
            let error = try #require(failure, "no error within 100,000 items under a 1 MiB cap")
            #expect((error as? HoardError)?.storageKind == .mapFull, "\(error)")
            #expect("\(error)".contains("cap of 1048576 bytes"), "\(error)")
            #expect(try store.environment.info().mapSize <= 1 << 20, "the map starts within its cap")
            #expect(try items.count() == stored)
            #expect(try items.get(Int64(stored - 1))?.value == stored - 1)
            try store.write { txn in
                for id in 0..<Int64(stored / 2) { _ = try items.delete(id, in: txn) }
            }
            try items.put(Item(id: 1_000_000, name: "after", value: 1))
            #expect(try items.get(1_000_000)?.name == "after")
        }
    }

    @Test("the reader table full: a clear error, and reads work again when a slot is free")
    func readersFull() async throws {
        try await offPoolInTemporaryDirectory { dir in
            let store = try Store(path: dir + "/store", options: .init(durability: .riskStoreOnOSCrash, maxReaders: 2))
            try store.collection(Item.self).put(Item(id: 1, name: "one", value: 1))
            // Another process holds one slot; this process the other, then asks for a third.
            let holder = try ChildProcess(try builtExecutable("LMDBProbe"), ["open", dir + "/store"])
            #expect(try holder.readLine() == "open ok")
            #expect(try holder.ask("hold-read") == "holding")
            var caught: HoardError?
            try store.read { _ in
                do {
                    try store.read { _ in }
                } catch let error as HoardError {
                    caught = error
                }
            }
            #expect(caught?.storageKind == .readersFull, "\(String(describing: caught))")
            #expect(try holder.ask("release") == "released")
            try holder.send("exit")
            #expect(holder.wait() == 0)
            try store.read { _ in try store.read { _ in } }
            #expect(try store.collection(Item.self).get(1)?.name == "one")
        }
    }

    @Test("a reader process killed inside its transaction: its slot is reclaimed, writers go on")
    func killedReader() async throws {
        try await offPoolInTemporaryDirectory { dir in
            let path = dir + "/store"
            do {
                let store = try Store(path: path, options: .init(durability: .riskStoreOnOSCrash))
                try store.collection(Item.self).put(Item(id: 1, name: "one", value: 1))
            }
            let reader = try ChildProcess(try builtExecutable("LMDBProbe"), ["open", path])
            #expect(try reader.readLine() == "open ok")
            #expect(try reader.ask("hold-read") == "holding")
            reader.kill()
            #expect(reader.wait() == 128 + 9)
            let store = try Store(path: path, options: .init(durability: .riskStoreOnOSCrash))
            #expect(try store.environment.readers().filter(\.isStale).isEmpty)
            try store.collection(Item.self).put(Item(id: 2, name: "two", value: 2))
            #expect(try store.collection(Item.self).count() == 2)
        }
    }

    @Test("two writer processes at once: serialized by LMDB, both complete")
    func twoWriters() async throws {
        try await offPoolInTemporaryDirectory { dir in
            let path = dir + "/env"
            let probe = try builtExecutable("LMDBProbe")
            let first = try ChildProcess(probe, ["open", path])
            #expect(try first.readLine() == "open ok")
            let second = try ChildProcess(probe, ["open", path])
            #expect(try second.readLine() == "open ok")
            try first.send("batches one 40 250")
            try second.send("batches two 40 250")
            #expect(try first.readLine() == "ok")
            #expect(try second.readLine() == "ok")
            #expect(try first.ask("snapshot one") == "snapshot 10001 40")
            #expect(try first.ask("snapshot two") == "snapshot 10001 40")
            for child in [first, second] {
                try child.send("exit")
                #expect(child.wait() == 0)
            }
        }
    }

    @Test("a record damaged on disk: reported by name, the rest still reads, synchronize replaces it")
    func damagedRecord() async throws {
        try await offPoolInTemporaryDirectory { dir in
            let path = dir + "/store"
            do {
                let store = try Store(path: path, options: .init(durability: .riskStoreOnOSCrash))
                try store.collection(Item.self).put(
                    (1...50).map { Item(id: $0, name: "item-\($0)-marker", value: Int($0)) })
            }
            let file = path + "/data.mdb"
            let bytes = try readFile(file)
            let offset = try #require(firstOffset(of: "item-17-marker", in: bytes))
            try patchFile(file, at: offset + 5, with: [UInt8(ascii: "9")])

            let store = try Store(path: path, options: .init(durability: .riskStoreOnOSCrash))
            let items = try store.collection(Item.self)
            #expect(throws: HoardError.self) { try items.get(17) }
            let scan = try items.scanSkippingDamaged()
            #expect(scan.models.count == 49)
            #expect(
                scan.damaged.map(\.kind) == [.corruptRecord] && scan.damaged.first?.key?.id(as: Int64.self) == 17,
                "\(scan.damaged)")
            let verify = try runProcess(try builtExecutable("hoard"), ["verify", path])
            #expect(verify.status == 1 && verify.stdout.contains("Item[17]: checksum mismatch"), "\(verify.stdout)")
            // Not renewed either: a renewal would write a new checksum over the damaged payload.
            #expect(try store.write { txn in try items.touch(17, in: txn) } == false)
            #expect(throws: HoardError.self) { try items.get(17) }

            let result = try items.synchronize(
                with: (1...50).map { Item(id: $0, name: "item-\($0)-marker", value: Int($0)) })
            #expect(result.replaced.map { $0.key?.id(as: Int64.self) } == [17], "\(result.replaced)")
            if case .corruptRecord(let collection, _, let reason)? = result.replaced.first {
                #expect(collection == "Item" && reason.contains("checksum mismatch"), "\(reason)")
            } else {
                Issue.record("a damaged record is replaced as corruptRecord: \(result.replaced)")
            }
            #expect(try items.get(17)?.name == "item-17-marker")
            #expect(try runProcess(try builtExecutable("hoard"), ["verify", path]).status == 0)
        }
    }
}
