import LMDB
import TestSupport
import Testing

@Suite("Copies, statistics and sync")
struct MaintenanceTests {
    @Test("a compacting copy after deletes is smaller and holds the same data")
    func compactingCopy() throws {
        try withTemporaryEnvironment { env, path in
            let db = try env.openDatabase("c", create: true)
            let value = [UInt8](repeating: 3, count: 500)
            try env.write { txn in for i in 0..<10_000 { try txn.put(value, forKey: b(format6(i)), in: db) } }
            try env.write { txn in for i in 0..<10_000 where i % 10 != 0 { try txn.delete(b(format6(i)), in: db) } }
            try env.sync()

            let plain = path + "-copy"
            let compact = path + "-compact"
            try env.copy(to: plain)
            try env.copy(to: compact, compacting: true)
            let original = try fileSize(path + "/data.mdb")
            #expect(try fileSize(compact + "/data.mdb") < original / 2)
            #expect(try fileSize(compact + "/data.mdb") < fileSize(plain + "/data.mdb"))

            let copy = try Environment(path: compact, options: .init(readOnly: true))
            let copied = try copy.openDatabase("c")
            let entries = try copy.read { try $0.entries(in: copied) }
            #expect(entries.count == 1_000)
            #expect(entries.map(\.key) == (0..<10_000).filter { $0 % 10 == 0 }.map { b(format6($0)) })
            #expect(entries.allSatisfy { $0.value == value })

            // A copy never overwrites an existing store.
            #expect(throws: LMDBError.self) { try env.copy(to: compact) }
        }
    }

    @Test("info and statistics describe the store")
    func infoAndStatistics() throws {
        try withTemporaryEnvironment(.init(mapSize: 4 << 20, durability: .riskLastCommitOnOSCrash)) { env, _ in
            let db = try env.openDatabase("s", create: true)
            let before = try env.info()
            try env.write { txn in for i in 0..<1000 { try txn.put(b("value \(i)"), forKey: b("key \(i)"), in: db) } }
            let after = try env.info()
            #expect(after.mapSize == 4 << 20)
            #expect(after.lastTransactionID == before.lastTransactionID + 1)
            #expect(after.lastPageNumber > before.lastPageNumber)
            #expect(after.maxReaders == 126)
            let stat = try env.read { try $0.statistics(of: db) }
            #expect(stat.entries == 1000)
            #expect(stat.depth >= 2)
            #expect(stat.leafPages > 1)
            #expect(stat.bytes == (stat.branchPages + stat.leafPages + stat.overflowPages) * stat.pageSize)
            #expect(try env.read { $0.id } == after.lastTransactionID)
        }
    }

    @Test("the free list counts the pages deletes gave back")
    func freePages() throws {
        try withTemporaryEnvironment(.init(durability: .riskStoreOnOSCrash)) { env, _ in
            let db = try env.openDatabase("f", create: true)
            try env.write { txn in
                for i in 0..<5_000 { try txn.put([UInt8](repeating: 7, count: 200), forKey: b("key \(i)"), in: db) }
            }
            let before = try env.read { try $0.freePageCount() }
            let leaves = try env.read { try $0.statistics(of: db).leafPages }
            try env.write { txn in try txn.clear(db) }
            // The pages freed by the clear are on the free list once a later transaction has committed.
            try env.write { txn in try txn.put(b("v"), forKey: b("k"), in: db) }
            let after = try env.read { try $0.freePageCount() }
            #expect(after >= before + leaves, "free pages \(before) -> \(after); the tree had \(leaves) leaf pages")
        }
    }
}
