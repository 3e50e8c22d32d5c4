import ArgumentParser
import Dispatch
@_spi(LMDB) import Hoard
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `hoard watch`: changes as they commit, by any process, until Ctrl-C.
struct Watch: StoreCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print changes to a store as they commit, by any process, until Ctrl-C.",
        discussion: """
            One line per record changed: the transaction, the collection, how it changed \
            (stored, deleted, evicted, purged, expired) and the ID; "cleared" when a collection \
            was emptied; "unknown" when a commit's records are not known (the writer keeps no \
            change log: see Store.Options.changeLog). Watches the collections the store has when \
            it starts. Read-only.
            """
    )

    @OptionGroup var store: StoreOptions

    @Argument(help: "The collection to watch; every collection when omitted.")
    var collection: String?

    func run() throws {
        let opened = try openStore(store.path)
        let handles = try openCollections(collection, in: opened)
        let json = store.json
        let sequences = handles.map { ($0, opened.changes(ofCollection: $0.name)) }
        let finished = DispatchSemaphore(value: 0)
        let watching = Task {
            await withTaskGroup(of: Void.self) { group in
                for (handle, changes) in sequences {
                    group.addTask {
                        for await batch in changes { Self.report(batch, of: handle, json: json) }
                    }
                }
            }
            finished.signal()
        }
        // The first line says the watch has begun: what commits after it is shown.
        Self.printing.withLock { _ in
            if json {
                say(
                    JSON.object([
                        ("watching", .array(handles.map { .string($0.name) })), ("path", .string(store.path)),
                    ]).text)
            } else {
                say("watching \(handles.map(\.name).joined(separator: ", ")) in \(store.path); Ctrl-C to stop")
            }
            Output.standard.flush()
        }
        // Ctrl-C and SIGTERM set the tool's flag (a dispatch signal source lost them on Linux
        // now and then: the signal must be blocked in every thread for its signalfd to see it);
        // it is looked at five times a second.
        while finished.wait(timeout: .now() + .milliseconds(200)) == .timedOut {
            if interruptRequested.load(ordering: .relaxed) { watching.cancel() }
        }
    }

    /// One collection's batch is written at a time.
    private static let printing = Mutex(())

    /// Writes the lines of `batch` and flushes them (a watch is read as it goes).
    private static func report(_ batch: ChangeBatch<RawKey>, of handle: CollectionHandle, json: Bool) {
        printing.withLock { _ in write(batch, of: handle, json: json) }
    }

    private static func write(_ batch: ChangeBatch<RawKey>, of handle: CollectionHandle, json: Bool) {
        let range = batch.transactions
        let transactions =
            range.lowerBound == range.upperBound ? "\(range.lowerBound)" : "\(range.lowerBound)-\(range.upperBound)"
        let origin = batch.origin == .thisProcess ? "this" : batch.origin == .otherProcess ? "other" : "both"
        func line(_ change: String, _ key: RawKey?) {
            if json {
                var members: [(String, JSON)] = [
                    ("transactions", .array([.int(Int64(range.lowerBound)), .int(Int64(range.upperBound))])),
                    ("collection", .string(handle.name)), ("change", .string(change)), ("origin", .string(origin)),
                ]
                if let key { members.append(("id", .string(handle.describeKey(key.bytes)))) }
                say(JSON.object(members).text)
            } else {
                say(
                    [transactions, handle.name, change, key.map { handle.describeKey($0.bytes) }].compactMap { $0 }
                        .joined(separator: "  "))
            }
        }
        switch batch.content {
        case .unknown:
            line("unknown", nil)
        case .records(let records):
            for (key, kind) in records.sorted(by: { $0.key.bytes.lexicographicallyPrecedes($1.key.bytes) }) {
                line(kind.description, key)
            }
        case .cleared(then: let records):
            line("cleared", nil)
            for (key, kind) in records.sorted(by: { $0.key.bytes.lexicographicallyPrecedes($1.key.bytes) }) {
                line(kind.description, key)
            }
        }
        Output.standard.flush()
    }
}
