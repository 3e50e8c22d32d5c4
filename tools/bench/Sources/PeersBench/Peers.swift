import BenchModels
import BenchSupport
import Foundation
import GRDB
import GRDBModels
import Hoard
import LMDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An order-independent digest of models, so that every peer's answers can be compared: a fast
/// wrong answer must not win.
struct Digest {
    private(set) var value: UInt64 = 0
    private(set) var count = 0

    mutating func add(_ member: Member?) {
        guard let member else { return }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        func mix(_ bytes: some Sequence<UInt8>) {
            for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
            hash = (hash ^ 0xFF) &* 0x100_0000_01b3
        }
        mix(String(member.id).utf8)
        mix(member.name.utf8)
        mix(member.email.utf8)
        mix(String(member.age).utf8)
        mix(member.city.utf8)
        mix(String(member.followers).utf8)
        value &+= hash
        count += 1
    }

    /// Adds the models `other` digested.
    mutating func merge(_ other: Digest) {
        value &+= other.value
        count += other.count
    }

    var text: String { "\(count):\(String(value, radix: 16))" }
}

/// One way of storing the members, as a developer would use it for a cache. Every method works
/// on the peer's own directory; `nil` from an optional workload means the peer has no such query.
protocol Peer {
    init(directory: String) throws
    func insertAll(_ members: [Member]) throws
    /// Gets every ID inside one read transaction (where the peer has them).
    func getAllInOneRead(_ ids: [Int64]) throws -> Digest
    /// Gets every ID, each in a read of its own.
    func getEach(_ ids: [Int64]) throws -> Digest
    /// The 100 members from `start` on, in ID order.
    func range(from start: Int64) throws -> Digest?
    func scanAll() throws -> Digest
    /// Replaces one member with a durable write of its own.
    func updateDurably(_ member: Member) throws
    /// Makes the stored members equal to `fresh`, in one transaction where the peer has them.
    func synchronize(with fresh: [Member]) throws
    /// Lets go of every open handle (before the cold open).
    func release()
    /// Opens the store from its files and gets `id`.
    static func openAndGet(directory: String, _ id: Int64) throws -> Member?
}

// MARK: - Hoard

final class HoardPeer: Peer {
    static let cacheMode = "HOARD_PEER_CACHE"
    var store: Store?
    var users: HoardCollection<Member>?
    let directory: String

    static func options() -> Store.Options { getenv(cacheMode) != nil ? .cache : Store.Options() }

    init(directory: String) throws {
        self.directory = directory
        let store = try Store(path: directory + "/store", options: Self.options())
        (self.store, users) = (store, try store.collection(Member.self))
    }

    var collection: HoardCollection<Member> { users! }

    func insertAll(_ members: [Member]) throws { try collection.put(members) }

    func getAllInOneRead(_ ids: [Int64]) throws -> Digest {
        var digest = Digest()
        try store!.read { txn in for id in ids { digest.add(try collection.get(id, in: txn)) } }
        return digest
    }

    func getEach(_ ids: [Int64]) throws -> Digest {
        var digest = Digest()
        for id in ids { digest.add(try collection.get(id)) }
        return digest
    }

    func range(from start: Int64) throws -> Digest? {
        var digest = Digest()
        for member in try collection.scan(from: start, limit: 100) { digest.add(member) }
        return digest
    }

    func scanAll() throws -> Digest {
        var digest = Digest()
        try collection.forEach { member in
            digest.add(member)
            return .next
        }
        return digest
    }

    func updateDurably(_ member: Member) throws { try collection.put(member) }

    func synchronize(with fresh: [Member]) throws { try collection.synchronize(with: fresh) }

    func release() { (users, store) = (nil, nil) }

    static func openAndGet(directory: String, _ id: Int64) throws -> Member? {
        let store = try Store(path: directory + "/store", options: options())
        return try store.collection(Member.self).get(id)
    }
}

/// LMDB's floor for Hoard's records: the collection's records as the workloads left them,
/// copied under the same keys into a fresh LMDB in one transaction, in key order with
/// `MDB_APPEND`; the bytes that LMDB alone takes for the same keys and values. Called once no
/// store of the run is open (LMDB must not open one file twice in a process).
func floorBytes(ofStoreIn directory: String) throws -> Int {
    let floor = temporaryDirectory("floor")
    defer { _ = system("rm -rf '\(floor)'") }
    let source = try Environment(path: directory + "/store", options: .init(readOnly: true))
    let records = try source.openDatabase("c:Member")
    let target = try Environment(path: floor + "/lmdb", options: .init(durability: .riskStoreOnOSCrash))
    let copy = try target.openDatabase("Member", create: true)
    try source.read { txn in
        try target.write { out in
            try txn.forEach(in: records) { key, value in
                try out.put(value, forKey: key, in: copy, options: .append)
                return .next
            }
        }
    }
    return diskUsage(floor)
}

// MARK: - GRDB

/// GRDB 7 as its documentation recommends for this job: a Codable record, a `DatabasePool` (WAL
/// mode), one transaction per batch. With `expert`, the forms that differ use cached statements.
final class GRDBPeer: Peer {
    static let expertMode = "GRDB_PEER_EXPERT"
    var pool: DatabasePool?
    let expert = getenv(expertMode) != nil

    init(directory: String) throws {
        pool = try openDurableMemberPool(path: directory + "/db.sqlite")
    }

    static let selectOne = "SELECT id, name, email, age, city, followers FROM member WHERE id = ?"

    func insertAll(_ members: [Member]) throws {
        try pool!.write { db in
            if expert {
                let insert = try db.cachedStatement(
                    sql: "INSERT INTO member (id, name, email, age, city, followers) VALUES (?, ?, ?, ?, ?, ?)")
                for m in members {
                    try insert.execute(arguments: [m.id, m.name, m.email, m.age, m.city, m.followers])
                }
            } else {
                for member in members { try MemberRow(member).insert(db) }
            }
        }
    }

    func get(_ id: Int64, in db: GRDB.Database) throws -> Member? {
        if expert {
            let statement = try db.cachedStatement(sql: Self.selectOne)
            return try Row.fetchOne(statement, arguments: [id]).map { row in
                Member(id: row[0], name: row[1], email: row[2], age: row[3], city: row[4], followers: row[5])
            }
        }
        return try MemberRow.fetchOne(db, key: id)?.member
    }

    func getAllInOneRead(_ ids: [Int64]) throws -> Digest {
        try pool!.read { db in
            var digest = Digest()
            for id in ids { digest.add(try get(id, in: db)) }
            return digest
        }
    }

    func getEach(_ ids: [Int64]) throws -> Digest {
        var digest = Digest()
        for id in ids { digest.add(try pool!.read { db in try get(id, in: db) }) }
        return digest
    }

    func range(from start: Int64) throws -> Digest? {
        try pool!.read { db in
            var digest = Digest()
            let rows = try MemberRow.filter(Column("id") >= start).order(Column("id")).limit(100).fetchAll(db)
            for row in rows { digest.add(row.member) }
            return digest
        }
    }

    func scanAll() throws -> Digest {
        try pool!.read { db in
            var digest = Digest()
            if expert {
                let rows = try Row.fetchCursor(db, sql: "SELECT id, name, email, age, city, followers FROM member")
                while let row = try rows.next() {
                    digest.add(
                        Member(id: row[0], name: row[1], email: row[2], age: row[3], city: row[4], followers: row[5]))
                }
            } else {
                let rows = try MemberRow.fetchCursor(db)
                while let row = try rows.next() { digest.add(row.member) }
            }
            return digest
        }
    }

    func updateDurably(_ member: Member) throws {
        try pool!.write { db in try MemberRow(member).update(db) }
    }

    /// The natural way: in one transaction, upsert every fresh row and delete the rows whose IDs
    /// the fresh list lacks.
    func synchronize(with fresh: [Member]) throws {
        try pool!.write { db in
            var gone = try Int64.fetchSet(db, sql: "SELECT id FROM member")
            for member in fresh {
                try MemberRow(member).upsert(db)
                gone.remove(member.id)
            }
            _ = try MemberRow.deleteAll(db, keys: gone)
        }
    }

    func release() { pool = nil }

    static func openAndGet(directory: String, _ id: Int64) throws -> Member? {
        let pool = try DatabasePool(path: directory + "/db.sqlite")
        return try pool.read { db in try MemberRow.fetchOne(db, key: id)?.member }
    }
}

// MARK: - A file per key

/// A disk cache the way hyperoslo/Cache, PINCache and Nuke's DataCache keep entries: one file
/// per key, the value as JSON, written to a temporary file and renamed into place.
final class FilePeer: Peer {
    let directory: String
    let encoder = JSONEncoder()
    let decoder = JSONDecoder()

    init(directory: String) throws {
        self.directory = directory + "/files"
        mkdir(self.directory, 0o700)
    }

    func path(_ id: Int64) -> String { "\(directory)/\(id).json" }

    /// Writes the file through a temporary file and a rename; with `durable`, flushed first.
    func store(_ member: Member, durable: Bool) throws {
        let bytes = try encoder.encode(MemberRow(member))
        let temporary = path(member.id) + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        if durable { fsync(fd) }
        close(fd)
        guard written == bytes.count, rename(temporary, path(member.id)) == 0 else { throw POSIXError(.EIO) }
    }

    func read(_ id: Int64) throws -> Member? {
        guard let data = FileManager.default.contents(atPath: path(id)) else { return nil }
        return try decoder.decode(MemberRow.self, from: data).member
    }

    func insertAll(_ members: [Member]) throws { for member in members { try store(member, durable: false) } }

    func getAllInOneRead(_ ids: [Int64]) throws -> Digest { try getEach(ids) }

    func getEach(_ ids: [Int64]) throws -> Digest {
        var digest = Digest()
        for id in ids { digest.add(try read(id)) }
        return digest
    }

    func range(from start: Int64) throws -> Digest? { nil }  // files have no order to scan by

    func scanAll() throws -> Digest {
        var digest = Digest()
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) where name.hasSuffix(".json") {
            digest.add(try read(Int64(name.dropLast(5)) ?? -1))
        }
        return digest
    }

    func updateDurably(_ member: Member) throws { try store(member, durable: true) }

    /// The natural way: rewrite every fresh entry, delete the files of IDs the list lacks.
    func synchronize(with fresh: [Member]) throws {
        var gone = Set(
            try FileManager.default.contentsOfDirectory(atPath: directory).compactMap { Int64($0.dropLast(5)) })
        for member in fresh {
            try store(member, durable: false)
            gone.remove(member.id)
        }
        for id in gone { unlink(path(id)) }
    }

    func release() {}

    static func openAndGet(directory: String, _ id: Int64) throws -> Member? {
        try FilePeer(directory: directory).read(id)
    }
}

// MARK: - JSON in LMDB

/// `JSONEncoder` bytes stored with the project's LMDB layer: what an app's own JSON cache would
/// become on LMDB, without Hoard's records, key sets or CBOR.
final class JSONLMDBPeer: Peer {
    var environment: Environment?
    var database: LMDB.Database?
    let encoder = JSONEncoder()
    let decoder = JSONDecoder()

    init(directory: String) throws {
        environment = try Environment(path: directory + "/json-lmdb", options: .init(maxDatabases: 4))
        database = try environment!.openDatabase("members", create: true)
    }

    func key(_ id: Int64) -> [UInt8] { id.keyBytes }

    func insertAll(_ members: [Member]) throws {
        try environment!.write { txn in
            for member in members {
                try txn.put(try encoder.encode(MemberRow(member)), forKey: key(member.id), in: database!)
            }
        }
    }

    func get(_ id: Int64, in txn: borrowing LMDB.Transaction<some LMDB.TransactionAccess>) throws -> Member? {
        try txn.withValue(forKey: key(id), in: database!) { bytes in
            try decoder.decode(MemberRow.self, from: Data(bytes)).member
        }
    }

    func getAllInOneRead(_ ids: [Int64]) throws -> Digest {
        var digest = Digest()
        try environment!.read { txn in for id in ids { digest.add(try get(id, in: txn)) } }
        return digest
    }

    func getEach(_ ids: [Int64]) throws -> Digest {
        var digest = Digest()
        for id in ids { digest.add(try environment!.read { txn in try get(id, in: txn) }) }
        return digest
    }

    func range(from start: Int64) throws -> Digest? {
        var digest = Digest()
        try environment!.read { txn in
            try txn.forEach(in: database!, range: KeyRange(from: .inclusive(key(start)))) { _, value in
                digest.add(try decoder.decode(MemberRow.self, from: Data(value)).member)
                return digest.count < 100 ? .next : .stop
            }
        }
        return digest
    }

    func scanAll() throws -> Digest {
        var digest = Digest()
        try environment!.read { txn in
            try txn.forEach(in: database!) { _, value in
                digest.add(try decoder.decode(MemberRow.self, from: Data(value)).member)
                return .next
            }
        }
        return digest
    }

    func updateDurably(_ member: Member) throws {
        try environment!.write { txn in
            try txn.put(try encoder.encode(MemberRow(member)), forKey: key(member.id), in: database!)
        }
    }

    /// In one transaction: put every fresh value, delete the keys the fresh list lacks.
    func synchronize(with fresh: [Member]) throws {
        try environment!.write { txn in
            var gone = Set<[UInt8]>()
            try txn.forEach(in: database!) { key, _ in
                gone.insert(Array(key))
                return .next
            }
            for member in fresh {
                try txn.put(try encoder.encode(MemberRow(member)), forKey: key(member.id), in: database!)
                gone.remove(key(member.id))
            }
            for key in gone { try txn.delete(key, in: database!) }
        }
    }

    func release() { (database, environment) = (nil, nil) }

    static func openAndGet(directory: String, _ id: Int64) throws -> Member? {
        let peer = try JSONLMDBPeer(directory: directory)
        return try peer.environment!.read { txn in try peer.get(id, in: txn) }
    }
}
