import LMDB
import TestSupport
import Testing

/// Key order as LMDB defines it: byte-wise, a prefix before its extensions.
func lexicographicallyLess(_ a: [UInt8], _ b: [UInt8]) -> Bool { a.lexicographicallyPrecedes(b) }

@Suite("Cursors and ranges")
struct CursorTests {
    /// Keys drawn from a small alphabet with many shared prefixes (including 0x00 and 0xFF), so that
    /// bounds land on, between, before and after stored keys.
    static func randomKey(_ rng: inout SeededGenerator) -> [UInt8] {
        let alphabet: [UInt8] = [0x00, 0x01, 0x41, 0x42, 0x7F, 0x80, 0xFE, 0xFF]
        return (0..<Int.random(in: 1...5, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! }
    }

    static func randomBound(_ rng: inout SeededGenerator) -> KeyRange.Bound? {
        switch Int.random(in: 0..<3, using: &rng) {
        case 0: nil
        case 1: .inclusive(randomKey(&rng))
        default: .exclusive(randomKey(&rng))
        }
    }

    @Test("ranges and prefixes, forward and backward, match an in-memory model on 10,000 keys")
    func rangesMatchModel() throws {
        let seed = SeededGenerator.seedFromEnvironment()
        var rng = SeededGenerator(seed: seed)
        try withTemporaryEnvironment { env, _ in
            let db = try env.openDatabase("keys", create: true)
            var model: [[UInt8]: [UInt8]] = [:]
            while model.count < 10_000 {
                var key = Self.randomKey(&rng)
                key += (0..<Int.random(in: 0...3, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                model[key] = Array("\(model.count)".utf8)
            }
            try env.write { txn in
                for (key, value) in model { try txn.put(value, forKey: key, in: db) }
            }
            let sorted = model.keys.sorted(by: lexicographicallyLess)

            var ranges: [KeyRange] = [.all, .prefix([0xFF]), .prefix([0xFF, 0xFF]), .prefix([0x00]), .prefix([])]
            for _ in 0..<300 {
                ranges.append(KeyRange(from: Self.randomBound(&rng), to: Self.randomBound(&rng)))
                ranges.append(.prefix(Self.randomKey(&rng)))
            }
            try env.read { txn in
                for range in ranges {
                    let expected = sorted.filter { range.contains($0) }
                    let forward = try txn.entries(in: db, range: range)
                    #expect(forward.map(\.key) == expected, "seed \(seed), range \(range)")
                    #expect(forward.allSatisfy { model[$0.key] == $0.value }, "seed \(seed)")
                    let backward = try txn.entries(in: db, range: range, reverse: true)
                    #expect(backward.map(\.key) == expected.reversed(), "seed \(seed), reverse range \(range)")
                    let limited = try txn.entries(in: db, range: range, reverse: true, limit: 3)
                    #expect(limited.map(\.key) == Array(expected.reversed().prefix(3)), "seed \(seed)")
                }
            }
        }
    }

    @Test("prefix scans stop at the prefix's end")
    func prefixes() throws {
        try withTemporaryEnvironment { env, _ in
            let db = try env.openDatabase("p", create: true)
            let keys = ["a", "ab", "abc", "abd", "ac", "b", "user:1", "user:2", "user;", "users"]
            try env.write { txn in for key in keys { try txn.put(b("v"), forKey: b(key), in: db) } }
            let found = try env.read { txn in
                try txn.entries(in: db, range: .prefix(b("ab"))).map { String(decoding: $0.key, as: UTF8.self) }
            }
            #expect(found == ["ab", "abc", "abd"])
            let users = try env.read { txn in
                try txn.entries(in: db, range: .prefix(b("user:")), reverse: true).map {
                    String(decoding: $0.key, as: UTF8.self)
                }
            }
            #expect(users == ["user:2", "user:1"])
        }
    }

    @Test("cursor moves and delete while iterating")
    func cursorMoves() throws {
        try withTemporaryEnvironment { env, _ in
            let db = try env.openDatabase("c", create: true)
            try env.write { txn in for i in 0..<10 { try txn.put(b("\(i)"), forKey: b("k\(i)"), in: db) } }
            try env.read { txn in
                let moves: [[UInt8]?] = try txn.withCursor(in: db) { cursor in
                    func key(_ entry: Cursor<ReadOnlyAccess>.Entry?) -> [UInt8]? { entry.map { Array($0.key) } }
                    return [
                        key(try cursor.current()),
                        key(try cursor.first()),
                        key(try cursor.next()),
                        key(try cursor.last()),
                        key(try cursor.next()),
                        key(try cursor.seek(atLeast: b("k45"))),
                        key(try cursor.previous()),
                        key(try cursor.seek(exactly: b("k45"))),
                        try cursor.seek(exactly: b("k7")).map { Array($0.value) },
                    ]
                }
                #expect(moves == [nil, b("k0"), b("k1"), b("k9"), nil, b("k5"), b("k4"), nil, b("7")])
            }
            // Delete the even keys through a cursor.
            try env.write { txn in
                try txn.withCursor(in: db) { cursor in
                    var entry = try cursor.first()
                    while let current = entry {
                        let number = Int(String(decoding: current.value, as: UTF8.self))!
                        if number % 2 == 0 { try cursor.deleteCurrent() }
                        entry = try cursor.next()
                    }
                }
            }
            let left = try env.read { try $0.entries(in: db).map { String(decoding: $0.value, as: UTF8.self) } }
            #expect(left == ["1", "3", "5", "7", "9"])
        }
    }

    @Test("a kept cursor replaces values in place, in its transaction and in nested ones, undone with them")
    func keptCursorReplaces() throws {
        try withTemporaryEnvironment { env, _ in
            let db = try env.openDatabase("c", create: true)
            let other = try env.openDatabase("d", create: true)
            try env.write { txn in
                for i in 0..<100 {
                    try txn.put(b("value \(i)"), forKey: b("k\(i)"), in: db)
                    try txn.put(b("other \(i)"), forKey: b("k\(i)"), in: other)
                }
            }
            /// Replaces the value of `key` through the transaction's kept cursor with that value
            /// uppercased, a search and a replacement; `false` when the key is absent.
            func shout(_ key: String, in database: Database, _ txn: borrowing WriteTransaction) throws -> Bool {
                try b(key).withUnsafeBytes { key in
                    try txn.withKeptCursor(in: database) { cursor in
                        guard let old = try cursor.seek(exactly: key)?.value else { return false }
                        let value = Array(String(decoding: old, as: UTF8.self).uppercased().utf8)
                        try cursor.replaceCurrent(key: key, reserving: value.count) { $0.copyBytes(from: value) }
                        return true
                    }
                }
            }
            try env.write { txn in
                // The same cursor serves one database after another and back; the written bytes count.
                let before = txn.bytesWritten
                #expect(try shout("k1", in: db, txn))
                #expect(try shout("k2", in: other, txn))
                #expect(try shout("k3", in: db, txn))
                #expect(try shout("absent", in: db, txn) == false)
                #expect(txn.bytesWritten == before + 3 * (2 + 7))
                // A nested transaction gets a cursor of its own; what it changes goes when it is undone.
                struct Undone: Error {}
                let undone = Result {
                    try txn.nested { child in
                        let shouted = try shout("k4", in: db, child)
                        #expect(shouted)
                        throw Undone()
                    }
                }
                #expect(throws: Undone.self) { try undone.get() }
                let kept = try txn.nested { child in try shout("k5", in: db, child) }
                #expect(kept)
                // The parent's cursor serves it again after its children ended.
                #expect(try shout("k6", in: db, txn))
            }
            let values = try env.read { txn in
                try (1...6).map { i in
                    try txn.value(forKey: b("k\(i)"), in: i == 2 ? other : db).map {
                        String(decoding: $0, as: UTF8.self)
                    }
                }
            }
            #expect(values == ["VALUE 1", "OTHER 2", "VALUE 3", "value 4", "VALUE 5", "VALUE 6"])
        }
    }
}
