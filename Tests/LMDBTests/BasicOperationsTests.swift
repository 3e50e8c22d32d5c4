import LMDB
import TestSupport
import Testing

func b(_ text: String) -> [UInt8] { Array(text.utf8) }

@Suite("Basic operations")
struct BasicOperationsTests {
    @Test("put, get, overwrite, no-overwrite, delete")
    func putGetDelete() throws {
        try withTemporaryEnvironment { env, _ in
            let db = try env.openDatabase("items", create: true)
            try env.write { txn in
                try txn.put(b("one"), forKey: b("a"), in: db)
                try txn.put(b("two"), forKey: b("b"), in: db)
            }
            #expect(try env.read { try $0.value(forKey: b("a"), in: db) } == b("one"))
            #expect(try env.read { try $0.value(forKey: b("missing"), in: db) } == nil)

            // Overwrite replaces.
            try env.write { txn in try txn.put(b("uno"), forKey: b("a"), in: db) }
            #expect(try env.read { try $0.value(forKey: b("a"), in: db) } == b("uno"))

            // No-overwrite refuses and names the key; the stored value stays.
            #expect {
                try env.write { txn in try txn.put(b("x"), forKey: b("a"), in: db, options: .noOverwrite) }
            } throws: { error in
                let error = try #require(error as? LMDBError)
                return error.kind == .keyExists && error.description.contains("'a'")
                    && error.description.contains("'items'")
            }
            #expect(try env.read { try $0.value(forKey: b("a"), in: db) } == b("uno"))
            try env.write { txn in try txn.put(b("three"), forKey: b("c"), in: db, options: .noOverwrite) }

            // Delete reports whether the key was there.
            let deleted = try env.write { txn in (try txn.delete(b("b"), in: db), try txn.delete(b("b"), in: db)) }
            #expect(deleted == (true, false))
            #expect(try env.read { txn in try txn.contains(b("b"), in: db) } == false)
            #expect(try env.read { txn in try txn.count(in: db) } == 2)
        }
    }

    @Test("createDatabase fills the new database in the transaction that creates it, or creates nothing")
    func createDatabaseAtomically() throws {
        struct Refused: Error {}
        try withTemporaryEnvironment { env, _ in
            #expect(throws: Refused.self) {
                try env.createDatabase("half") { txn, db in
                    try txn.put(b("v"), forKey: b("k"), in: db)
                    throw Refused()
                }
            }
            // Neither the database nor what was written before the throw exists.
            let main = try env.openDatabase(nil)
            #expect(try env.read { try $0.contains(b("half"), in: main) } == false)
            #expect(throws: LMDBError.self) { try env.openDatabase("half") }

            let db = try env.createDatabase("whole") { txn, db in try txn.put(b("v"), forKey: b("k"), in: db) }
            #expect(try env.read { try $0.value(forKey: b("k"), in: db) } == b("v"))
            // Already open in this process: returned as it is, `initialize` not run again.
            var ranAgain = false
            #expect(try env.createDatabase("whole") { _, _ in ranAgain = true } == db)
            #expect(!ranAgain)
        }
    }

    @Test("errors can be caught by kind")
    func kindPattern() throws {
        try withTemporaryEnvironment { env, _ in
            let db = try env.openDatabase("items", create: true)
            try env.write { txn in try txn.put(b("1"), forKey: b("k"), in: db) }
            var matched = false
            do {
                try env.write { txn in try txn.put(b("2"), forKey: b("k"), in: db, options: .noOverwrite) }
            } catch let error as LMDBError where error.kind == .keyExists {
                matched = true
            }
            #expect(matched)
        }
    }

    @Test("append requires ascending keys")
    func appendOrder() throws {
        try withTemporaryEnvironment { env, _ in
            let db = try env.openDatabase("log", create: true)
            try env.write { txn in
                for i in 0..<1000 { try txn.put(b("v\(i)"), forKey: b(String(format6(i))), in: db, options: .append) }
            }
            #expect(try env.read { try $0.count(in: db) } == 1000)
            #expect {
                try env.write { txn in try txn.put(b("late"), forKey: b("000010"), in: db, options: .append) }
            } throws: { error in
                (error as? LMDBError)?.kind == .keyExists && "\(error)".contains("sort after")
            }
        }
    }

    @Test("reserve writes the value in place")
    func reserve() throws {
        try withTemporaryEnvironment { env, _ in
            let db = try env.openDatabase("r", create: true)
            try env.write { txn in
                try txn.reserve(5, forKey: b("k"), in: db) { buffer in
                    buffer.copyBytes(from: b("hello"))
                }
            }
            #expect(try env.read { try $0.value(forKey: b("k"), in: db) } == b("hello"))
        }
    }

    @Test("a throwing write closure leaves nothing behind")
    func abortOnThrow() throws {
        struct Boom: Error {}
        try withTemporaryEnvironment { env, _ in
            let db = try env.openDatabase("items", create: true)
            try env.write { txn in try txn.put(b("kept"), forKey: b("old"), in: db) }
            #expect(throws: Boom.self) {
                try env.write { txn in
                    try txn.put(b("lost"), forKey: b("new"), in: db)
                    try txn.put(b("changed"), forKey: b("old"), in: db)
                    _ = try txn.delete(b("old"), in: db)
                    throw Boom()
                }
            }
            #expect(try env.read { try $0.entries(in: db) }.map(\.key) == [b("old")])
            #expect(try env.read { try $0.value(forKey: b("old"), in: db) } == b("kept"))
        }
    }

    @Test("empty and too-long keys get a clear error")
    func keyLimits() throws {
        try withTemporaryEnvironment { env, _ in
            let db = try env.openDatabase("items", create: true)
            #expect(env.maxKeySize == 511)
            let long = [UInt8](repeating: 0x41, count: env.maxKeySize + 1)
            let exact = [UInt8](repeating: 0x42, count: env.maxKeySize)
            for key in [[], long] {
                #expect {
                    try env.write { txn in try txn.put(b("v"), forKey: key, in: db) }
                } throws: { error in
                    let error = try #require(error as? LMDBError)
                    return error.kind == .badKey && error.description.contains("1 to 511 bytes")
                }
                #expect(throws: LMDBError.self) { try env.read { try $0.value(forKey: key, in: db) } }
            }
            try env.write { txn in try txn.put(b("v"), forKey: exact, in: db) }
            #expect(try env.read { try $0.value(forKey: exact, in: db) } == b("v"))
        }
    }

    @Test("named databases: open, create, clear, drop, statistics")
    func databases() throws {
        try withTemporaryEnvironment { env, _ in
            #expect {
                try env.openDatabase("absent")
            } throws: { error in
                (error as? LMDBError)?.kind == .notFound && "\(error)".contains("no database named 'absent'")
            }
            let first = try env.openDatabase("first", create: true)
            let again = try env.openDatabase("first")
            #expect(first == again)
            let second = try env.openDatabase("second", create: true)
            try env.write { txn in
                for i in 0..<100 {
                    try txn.put(b("\(i)"), forKey: b("k\(i)"), in: first)
                    try txn.put(b("\(i)"), forKey: b("k\(i)"), in: second)
                }
            }
            #expect(try env.read { try $0.statistics(of: first) }.entries == 100)
            try env.write { txn in try txn.clear(first) }
            #expect(try env.read { try $0.count(in: first) } == 0)
            #expect(try env.read { try $0.count(in: second) } == 100)

            try env.write { txn in try txn.drop(second) }
            #expect(throws: LMDBError.self) { try env.openDatabase("second") }
            let recreated = try env.openDatabase("second", create: true)
            #expect(try env.read { try $0.count(in: recreated) } == 0)
            // The main database lists the named ones.
            #expect(try env.statistics().entries == 2)
        }
    }

    @Test("values persist across close and reopen")
    func reopen() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/store"
            do {
                let env = try Environment(path: path)
                let db = try env.openDatabase("p", create: true)
                try env.write { txn in try txn.put(b("durable"), forKey: b("k"), in: db) }
            }
            let env = try Environment(path: path)
            #expect(!env.wasCreated)
            let db = try env.openDatabase("p")
            #expect(try env.read { try $0.value(forKey: b("k"), in: db) } == b("durable"))
        }
    }

    @Test("a read-only environment refuses writes")
    func readOnly() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/store"
            do {
                let env = try Environment(path: path)
                let db = try env.openDatabase("p", create: true)
                try env.write { txn in try txn.put(b("v"), forKey: b("k"), in: db) }
            }
            let env = try Environment(path: path, options: .init(readOnly: true))
            let db = try env.openDatabase("p")
            #expect(try env.read { try $0.value(forKey: b("k"), in: db) } == b("v"))
            #expect {
                try env.write { txn in try txn.put(b("w"), forKey: b("k"), in: db) }
            } throws: { error in
                (error as? LMDBError)?.kind == .permissionDenied && "\(error)".contains("read-only")
            }
        }
    }
}

func format6(_ value: Int) -> String {
    let digits = String(value)
    return String(repeating: "0", count: max(0, 6 - digits.count)) + digits
}
