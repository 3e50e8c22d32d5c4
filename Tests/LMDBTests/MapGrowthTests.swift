import LMDB
import TestSupport
import Testing

@Suite("Map growth")
struct MapGrowthTests {
    static let mebibyte = 1 << 20

    @Test("a 1 MiB map grows past 64 MiB of data without the caller seeing MAP_FULL")
    func growsTransparently() throws {
        try withTemporaryEnvironment(.init(mapSize: Self.mebibyte, durability: .riskStoreOnOSCrash)) { env, _ in
            let db = try env.openDatabase("big", create: true)
            let value = [UInt8](repeating: 0xAB, count: 1000)
            var attempts = 0
            // One transaction far larger than the initial map: it must be rerun after growth.
            try env.write { txn in
                attempts += 1
                for i in 0..<8_000 { try txn.put(value, forKey: b("first-\(i)"), in: db) }
            }
            #expect(attempts > 1, "the first write should have outgrown the 1 MiB map and been run again")
            // Then many transactions until more than 64 MiB are stored.
            var total = 8_000 * value.count
            var batch = 0
            while total <= 66 * Self.mebibyte {
                try env.write { txn in
                    for i in 0..<4_000 { try txn.put(value, forKey: b("b\(batch)-\(i)"), in: db) }
                }
                total += 4_000 * value.count
                batch += 1
            }
            let expected = 8_000 + batch * 4_000
            #expect(try env.read { try $0.count(in: db) } == expected)
            #expect(try env.info().mapSize > 64 * Self.mebibyte)
            #expect(try env.read { try $0.value(forKey: b("b0-17"), in: db) } == value)
        }
    }

    @Test("onCommit actions run once, after the commit: not for a retried attempt, an undone child or an abort")
    func onCommitRunsOnceCommitted() throws {
        try withTemporaryEnvironment(.init(mapSize: Self.mebibyte, durability: .riskStoreOnOSCrash)) { env, _ in
            let db = try env.openDatabase("actions", create: true)
            let value = [UInt8](repeating: 0xCD, count: 1000)
            var ran: [String] = []
            var attempts = 0
            struct Undone: Error {}
            try env.write { txn in
                attempts += 1
                txn.onCommit { ran.append("outer") }
                _ = try? txn.nested { child in
                    child.onCommit { ran.append("undone child") }
                    throw Undone()
                }
                try txn.nested { child in child.onCommit { ran.append("child") } }
                #expect(ran.isEmpty, "an action ran before the commit")
                // Larger than the 1 MiB map: this attempt is undone and the write runs again.
                for i in 0..<2_000 { try txn.put(value, forKey: b("k\(i)"), in: db) }
            }
            #expect(attempts > 1, "the write was not retried")
            #expect(ran == ["outer", "child"])
            #expect(throws: Undone.self) {
                try env.write { txn in
                    txn.onCommit { ran.append("aborted") }
                    throw Undone()
                }
            }
            #expect(ran == ["outer", "child"])
        }
    }

    @Test("a write inside a closure that swallows MAP_FULL is still retried")
    func swallowedMapFull() throws {
        try withTemporaryEnvironment(.init(mapSize: Self.mebibyte, durability: .riskStoreOnOSCrash)) { env, _ in
            let db = try env.openDatabase("big", create: true)
            let value = [UInt8](repeating: 1, count: 2000)
            var sawMapFull = false
            try env.write { txn in
                for i in 0..<2_000 {
                    do {
                        try txn.put(value, forKey: b("k\(i)"), in: db)
                    } catch let error as LMDBError where error.kind == .mapFull {
                        sawMapFull = true
                        return  // the closure gives up quietly; the transaction is poisoned anyway
                    }
                }
            }
            #expect(sawMapFull)
            #expect(try env.read { try $0.count(in: db) } == 2_000)
        }
    }

    @Test("a configured cap gives a clear mapFull error and keeps committed data")
    func capReached() throws {
        let options = Environment.Options(
            mapSize: Self.mebibyte, maxMapSize: 2 * Self.mebibyte, durability: .riskStoreOnOSCrash)
        try withTemporaryEnvironment(options) { env, _ in
            let db = try env.openDatabase("capped", create: true)
            let value = [UInt8](repeating: 7, count: 1000)
            try env.write { txn in for i in 0..<100 { try txn.put(value, forKey: b("small-\(i)"), in: db) } }
            #expect {
                try env.write { txn in for i in 0..<4_000 { try txn.put(value, forKey: b("big-\(i)"), in: db) } }
            } throws: { error in
                let error = try #require(error as? LMDBError)
                return error.kind == .mapFull && error.description.contains("cap of \(2 * Self.mebibyte) bytes")
            }
            #expect(try env.info().mapSize == 2 * Self.mebibyte)
            #expect(try env.read { try $0.count(in: db) } == 100)
            // Small writes still fit.
            try env.write { txn in try txn.put(value, forKey: b("after"), in: db) }
            #expect(try env.read { try $0.count(in: db) } == 101)
        }
    }

    @Test("a process reopening a grown store adopts its map size")
    func reopenAfterGrowth() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/store"
            do {
                let env = try Environment(
                    path: path, options: .init(mapSize: Self.mebibyte, durability: .riskStoreOnOSCrash))
                let db = try env.openDatabase("g", create: true)
                try env.write { txn in
                    for i in 0..<5_000 { try txn.put([UInt8](repeating: 1, count: 1000), forKey: b("k\(i)"), in: db) }
                }
            }
            let env = try Environment(path: path, options: .init(mapSize: Self.mebibyte))
            #expect(try env.info().mapSize > 4 * Self.mebibyte)
            let db = try env.openDatabase("g")
            #expect(try env.read { try $0.count(in: db) } == 5_000)
        }
    }

    @Test("a map grown by another process is adopted by this one")
    func growthInAnotherProcess() throws {
        try withTemporaryEnvironment(.init(mapSize: Self.mebibyte, durability: .riskStoreOnOSCrash)) { env, path in
            _ = try env.openDatabase("shared", create: true)
            let child = try ChildProcess(try builtExecutable("LMDBProbe"), ["open", path])
            #expect(try child.readLine() == "open ok")
            let answer = try child.ask("fill shared 4000 2000")
            let childMapSize = try #require(Int(answer.dropFirst(3)), "\(answer)")
            #expect(childMapSize > 8 * Self.mebibyte)
            // This process still maps 1 MiB; its next transaction must adopt the larger map.
            let db = try env.openDatabase("shared")
            #expect(try env.read { try $0.count(in: db) } == 4000)
            #expect(try env.info().mapSize == childMapSize)
            try env.write { txn in try txn.put(b("v"), forKey: b("after"), in: db) }
            #expect(try child.ask("count shared") == "count 4001")
            try child.send("exit")
            #expect(child.wait() == 0)
        }
    }
}
