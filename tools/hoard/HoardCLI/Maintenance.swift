import ArgumentParser
@_spi(LMDB) import Hoard
import LMDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `hoard purge-expired`: delete expired records.
struct PurgeExpired: StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "purge-expired",
        abstract: "Delete expired records (writes).",
        discussion: "One transaction per collection. Records whose header cannot be read are left for verify to report."
    )

    @OptionGroup var store: StoreOptions

    @Argument(help: "Only this collection.")
    var collection: String?

    func run() throws {
        let opened = try openStore(store.path, writable: true)
        let handles = try openCollections(collection, in: opened)
        var purged: [(String, Int)] = []
        for handle in handles {
            let count = try opened.writeLMDB { txn in
                try opened.purgeExpired(of: handle.name, database: handle.database, from: nil, scanning: .max, in: txn)
                    .purged
            }
            purged.append((handle.name, count))
        }
        if store.json {
            say(JSON.object(purged.map { ($0.0, .int(Int64($0.1))) }).text)
        } else {
            for (name, count) in purged { say("\(name): purged \(count) expired record\(count == 1 ? "" : "s")") }
        }
    }
}

/// `hoard compact`: a compacting copy.
struct Compact: StoreCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a compacted copy of the store to a new directory.",
        discussion: """
            The copy leaves out free pages; it is taken from one read snapshot, so the store may \
            be in use. DEST must not hold a store yet. The original is not changed.
            """
    )

    @OptionGroup var store: StoreOptions

    @Argument(help: "The new store directory (created when missing).")
    var destination: String

    func run() throws {
        let opened = try openStore(store.path)
        if access(destination + "/data.mdb", F_OK) == 0 {
            throw CLIError.usage("\(destination) already holds a store; choose a new directory")
        }
        let before = try fileBytes(opened.environment.dataFilePath)
        try opened.environment.copy(to: destination, compacting: true)
        let after = try fileBytes(destination + "/data.mdb")
        if store.json {
            say(
                JSON.object([
                    ("source", .string(store.path)), ("destination", .string(destination)),
                    ("bytesBefore", .int(Int64(before))), ("bytesAfter", .int(Int64(after))),
                ]).text)
        } else {
            say("compacted \(store.path) (\(byteSize(before))) into \(destination) (\(byteSize(after)))")
        }
    }

    private func fileBytes(_ path: String) throws -> Int {
        var info = stat()
        guard stat(path, &info) == 0 else { throw CLIError.problem("\(path): \(String(cString: strerror(errno)))") }
        return Int(info.st_size)
    }
}

/// `hoard rm`: delete records by ID.
struct Remove: StoreCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm",
        abstract: "Delete records by ID (writes).",
        discussion: "All in one transaction. Exit status 1 when an ID was not there (the others are still deleted)."
    )

    @OptionGroup var store: StoreOptions

    @Argument(help: "The collection.")
    var collection: String

    @Argument(help: "The IDs of the records to delete.")
    var ids: [String]

    func validate() throws {
        if ids.isEmpty { throw ValidationError("name at least one ID") }
    }

    func run() throws {
        let opened = try openStore(store.path, writable: true)
        let handle = try openCollection(collection, in: opened)
        let keys = try ids.map { try handle.key($0) }
        let missing = try opened.writeLMDB { txn in
            var missing: [String] = []
            var writer = try opened.writer(of: collection, database: handle.database, in: txn)
            for (id, key) in zip(ids, keys) where try !writer.remove(key, .deleted, in: txn) { missing.append(id) }
            try writer.finish(in: txn)
            return missing
        }
        let removed = ids.count - missing.count
        if store.json {
            say(
                JSON.object([("removed", .int(Int64(removed))), ("notFound", .array(missing.map { .string($0) }))]).text
            )
        } else {
            say("removed \(removed) record\(removed == 1 ? "" : "s") from \(collection)")
        }
        if !missing.isEmpty { throw CLIError.problem("not found in \(collection): \(missing.joined(separator: ", "))") }
    }
}
