import Foundation
@_spi(LMDB) import Hoard
import HoardTestSupport
import LMDB
import Logging
import Synchronization
import TestSupport
import Testing

/// A log handler that keeps what it is given, for tests.
struct CollectingLogHandler: LogHandler {
    let entries: Entries
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    final class Entries: Sendable {
        let items = Mutex<[(level: Logger.Level, message: String, metadata: Logger.Metadata)]>([])
        var all: [(level: Logger.Level, message: String, metadata: Logger.Metadata)] { items.withLock { $0 } }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        entries.items.withLock { $0.append((event.level, "\(event.message)", event.metadata ?? [:])) }
    }
}

@Suite("Logging")
struct LoggingTests {
    @Test("a store whose creation a power cut tore is created anew, with a warning naming it")
    func unfinishedCreationIsLogged() throws {
        let entries = CollectingLogHandler.Entries()
        let logger = Logger(label: "test") { _ in CollectingLogHandler(entries: entries) }
        try withTemporaryDirectory { dir in
            let path = dir + "/store"
            #expect(mkdir(path, 0o700) == 0)
            // Only the first sector of a new file's first write reached the disk: LMDB alone
            // refuses the file (its second meta page is zeros).
            do { _ = try Environment(path: dir + "/fresh") }
            var pages = try readFile(dir + "/fresh/data.mdb")
            pages.replaceSubrange(512..., with: [UInt8](repeating: 0, count: pages.count - 512))
            try writeFile(path + "/data.mdb", pages)
            let store = try Store(path: path, options: .init(logger: logger))
            try store.collection(Note.self).put(Note(id: 1, text: "a", stars: 1, pinned: false))
            #expect(try store.collection(Note.self).count() == 1)
        }
        #expect(
            entries.all.contains {
                $0.level == .warning && $0.message.contains("creation was cut short")
                    && "\($0.metadata["path"] ?? "")".hasSuffix("/store")
            })
    }

    @Test("the store logs through the logger it is given: opening, registry, skipped records, migration")
    func logs() throws {
        let entries = CollectingLogHandler.Entries()
        let logger = Logger(label: "test") { _ in CollectingLogHandler(entries: entries) }
        try withTemporaryDirectory { dir in
            let store = try Store(path: dir + "/store", options: .init(durability: .riskStoreOnOSCrash, logger: logger))
            let notes = try store.collection(Note.self)
            try notes.put(Note(id: 1, text: "a", stars: 1, pinned: false))
            try writeRecord(Note(id: 2, text: "b", stars: 1, pinned: false), version: 3, in: store) {
                $0[$0.count - 1] ^= 1
            }
            _ = try notes.scanSkippingDamaged()
            try writeRecord(Note(id: 3, text: "c", stars: 1, pinned: false), version: 1, in: store)
            try notes.migrate()
        }
        let all = entries.all
        #expect(all.contains { $0.level == .info && $0.message == "opened store" && $0.metadata["created"] == "true" })
        #expect(
            all.contains {
                $0.level == .notice && $0.message == "recorded key sets" && $0.metadata["collection"] == "Note"
            })
        #expect(
            all.contains {
                $0.level == .warning && $0.message == "skipped a damaged record"
                    && "\($0.metadata["error"] ?? "")".contains("Note[2]")
            })
        #expect(
            all.contains { $0.level == .info && $0.message == "migrated collection" && $0.metadata["migrated"] == "1" })
    }
}
