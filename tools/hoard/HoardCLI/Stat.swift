import ArgumentParser
@_spi(LMDB) import Hoard
import LMDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `hoard stat`: the store and its collections at a glance.
struct Stat: StoreCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the store's size, readers and collections.",
        discussion: """
            Per collection: the model type, records, bytes, the current key-set version and how \
            many records each version holds (read from the record headers; payloads are not \
            decoded), how many have expired, and the capacity with its recorded usage for a \
            bounded collection (bytes: keys and records as stored, not pages). Readers: other \
            processes' open snapshots, with how many transactions the oldest lags behind (pages \
            freed after it cannot be reused while it stays open). Everything but the capacities \
            comes from one read snapshot. Read-only.
            """
    )

    @OptionGroup var store: StoreOptions

    func run() throws {
        let report = try StatReport(try openStore(store.path))
        if store.json { say(report.json.text) } else { report.print() }
    }
}

/// What `stat` reports, from one read snapshot.
struct StatReport {
    struct CollectionFigures {
        var name: String
        var type: String
        var records = 0
        var bytes = 0
        var currentVersion: Int
        var versions: [Int: Int] = [:]
        var expired = 0
        var unreadableHeaders = 0
        var capacity: CapacityUsage?
    }

    var path: String
    var format = 0
    var fileBytes = 0
    var mapBytes = 0
    var pageSize = 0
    var pagesUsed = 0
    var freePages = 0
    var readers = 0
    var staleReaders = 0
    /// The oldest snapshot another process holds open: its process and transaction.
    var oldestReader: (processID: Int32, transactionID: Int)?
    var lastTransaction = 0
    var collections: [CollectionFigures] = []

    init(_ store: Store) throws {
        path = store.path
        format = try store.recordedFormat()
        let environment = store.environment
        var file = stat()
        if stat(environment.dataFilePath, &file) == 0 { fileBytes = Int(file.st_size) }
        let handles = try openCollections(in: store)
        let now = Store.systemClock()
        // Readers are listed before this command's own snapshot begins, so it does not count itself.
        let slots = try environment.readers().filter { $0.transactionID != nil && $0.processID != getpid() }
        readers = slots.count
        staleReaders = slots.filter(\.isStale).count
        if let oldest = slots.min(by: { ($0.transactionID ?? 0) < ($1.transactionID ?? 0) }),
            let id = oldest.transactionID
        {
            oldestReader = (oldest.processID, id)
        }
        // Read before the snapshot: each is a read of its own (the capacity's record and a count).
        let capacities = try handles.map { try store.capacityUsage(of: $0.name) }
        let figures = try store.readLMDB { txn in
            pagesUsed = try environment.info().lastPageNumber + 1
            freePages = try txn.freePageCount()
            lastTransaction = txn.id
            var result: [CollectionFigures] = []
            for (handle, capacity) in zip(handles, capacities) {
                var figures = CollectionFigures(
                    name: handle.name, type: handle.schema.type, currentVersion: handle.schema.currentVersion)
                figures.capacity = capacity
                let statistics = try txn.statistics(of: handle.database)
                figures.records = statistics.entries
                figures.bytes = statistics.bytes
                var seen = 0
                try txn.forEach(in: handle.database) { _, record in
                    if let version = RecordHeader.peekVersion(record) {
                        figures.versions[version, default: 0] += 1
                        if let expiry = RecordHeader.peekExpiry(record), expiry <= now { figures.expired += 1 }
                    } else {
                        figures.unreadableHeaders += 1
                    }
                    seen += 1
                    if seen & 0xFFFF == 0 { try checkInterrupt() }
                    return .next
                }
                result.append(figures)
            }
            return result
        }
        collections = figures
        let info = try environment.info()
        mapBytes = info.mapSize
        pageSize = try environment.statistics().pageSize
    }

    var json: JSON {
        .object([
            ("path", .string(path)),
            ("format", .int(Int64(format))),
            ("fileBytes", .int(Int64(fileBytes))),
            ("mapBytes", .int(Int64(mapBytes))),
            ("pageSize", .int(Int64(pageSize))),
            ("pagesUsed", .int(Int64(pagesUsed))),
            ("freePages", .int(Int64(freePages))),
            ("readers", .int(Int64(readers))),
            ("staleReaders", .int(Int64(staleReaders))),
            (
                "oldestReader",
                oldestReader.map {
                    .object([("pid", .int(Int64($0.processID))), ("transaction", .int(Int64($0.transactionID)))])
                } ?? .null
            ),
            ("lastTransaction", .int(Int64(lastTransaction))),
            (
                "collections",
                .array(
                    collections.map { c in
                        .object([
                            ("name", .string(c.name)),
                            ("type", .string(c.type)),
                            ("records", .int(Int64(c.records))),
                            ("bytes", .int(Int64(c.bytes))),
                            ("currentVersion", .int(Int64(c.currentVersion))),
                            (
                                "versions",
                                .object(
                                    c.versions.sorted { $0.key < $1.key }.map {
                                        (String($0.key), .int(Int64($0.value)))
                                    })
                            ),
                            ("expired", .int(Int64(c.expired))),
                            ("unreadableHeaders", .int(Int64(c.unreadableHeaders))),
                            ("capacity", c.capacity.map(Self.json) ?? .null),
                        ])
                    })
            ),
        ])
    }

    static func json(_ usage: CapacityUsage) -> JSON {
        .object([
            ("records", usage.capacity.records.map { .int(Int64($0)) } ?? .null),
            ("bytes", usage.capacity.bytes.map { .int(Int64($0)) } ?? .null),
            ("usedRecords", .int(Int64(usage.records))),
            ("usedBytes", usage.bytes.map { .int(Int64($0)) } ?? .null),
        ])
    }

    /// "812 of 1000 records, 1.2 MiB of 2.0 MiB", or "-" for an unbounded collection.
    static func describe(_ usage: CapacityUsage?) -> String {
        guard let usage else { return "-" }
        var parts: [String] = []
        if let records = usage.capacity.records { parts.append("\(usage.records) of \(records) records") }
        if let bytes = usage.capacity.bytes { parts.append("\(byteSize(usage.bytes ?? 0)) of \(byteSize(bytes))") }
        return parts.joined(separator: ", ")
    }

    func print() {
        say("\(Terminal.bold("store"))        \(path) (format \(format))")
        say(
            "\(Terminal.bold("file"))         \(byteSize(fileBytes)); map \(byteSize(mapBytes)), \(pagesUsed) pages of \(pageSize) bytes used, \(freePages) free"
        )
        say(
            "\(Terminal.bold("readers"))      \(readers) other\(staleReaders > 0 ? ", \(Terminal.red("\(staleReaders) stale"))" : "")\(oldestReader.map { ", oldest: pid \($0.processID), \(lastTransaction - $0.transactionID) transactions behind" } ?? "")"
        )
        say("\(Terminal.bold("transaction"))  \(lastTransaction)")
        guard !collections.isEmpty else {
            say("no collections")
            return
        }
        say("")
        var table = Table("collection", "type", "records", "bytes", "version", "older versions", "expired", "capacity")
        for c in collections {
            let older = c.versions.filter { $0.key < c.currentVersion }.sorted { $0.key < $1.key }.map {
                "v\($0.key): \($0.value)"
            }
            let newer = c.versions.filter { $0.key > c.currentVersion }.sorted { $0.key < $1.key }.map {
                "v\($0.key) (newer): \($0.value)"
            }
            var notes = older + newer
            if c.unreadableHeaders > 0 { notes.append(Terminal.red("\(c.unreadableHeaders) unreadable")) }
            table.add([
                c.name, c.type, String(c.records), byteSize(c.bytes), String(c.currentVersion),
                notes.isEmpty ? "-" : notes.joined(separator: ", "), String(c.expired), Self.describe(c.capacity),
            ])
        }
        table.print()
    }
}
