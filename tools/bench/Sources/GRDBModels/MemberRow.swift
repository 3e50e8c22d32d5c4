// The benchmarks' model as a plain Codable row, shared by write-bench and peers-bench: what GRDB's
// documentation has for a record, and what the file cache and JSON in LMDB encode with JSONEncoder.
public import BenchModels
public import GRDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `Member` as a row: columns by property.
public struct MemberRow: Codable, FetchableRecord, PersistableRecord, Equatable {
    public static let databaseTableName = "member"
    public var id: Int64
    public var name: String
    public var email: String
    public var age: Int
    public var city: String
    public var followers: Int

    public init(_ member: Member) {
        (id, name, email, age, city, followers) = (
            member.id, member.name, member.email, member.age, member.city, member.followers
        )
    }

    public var member: Member { Member(id: id, name: name, email: email, age: age, city: city, followers: followers) }
}

/// A new `DatabasePool` at `path` (WAL mode) holding the empty `member` table, its writer at
/// `synchronous = FULL`: GRDB opens WAL pools with NORMAL, where a commit is not flushed and an
/// operating-system crash may undo it; FULL flushes the WAL at every commit, as Hoard's durable
/// mode does. Set on the writer connection after opening (GRDB sets its own value when it opens
/// it), and checked: a pool that is not durable would make every comparison wrong, so the bench stops.
public func openDurableMemberPool(path: String) throws -> DatabasePool {
    let pool = try DatabasePool(path: path)
    let synchronous = try pool.writeWithoutTransaction { db in
        try db.execute(sql: "PRAGMA synchronous = FULL")
        return try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1
    }
    let journal = try pool.read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") ?? "?" }
    guard journal == "wal", synchronous == 2 else {
        print(
            "error: GRDB is not in WAL mode with synchronous = FULL (journal_mode=\(journal), synchronous=\(synchronous))"
        )
        exit(1)
    }
    try pool.write { db in
        try db.create(table: "member") { table in
            table.primaryKey("id", .integer)
            table.column("name", .text).notNull()
            table.column("email", .text).notNull()
            table.column("age", .integer).notNull()
            table.column("city", .text).notNull()
            table.column("followers", .integer).notNull()
        }
    }
    return pool
}
