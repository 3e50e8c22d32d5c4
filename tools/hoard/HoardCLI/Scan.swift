import ArgumentParser
@_spi(LMDB) import Hoard
import LMDB

/// `hoard scan`: records of a collection, as a table or JSON Lines.
struct Scan: StoreCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the records of a collection, as a table or (--json) JSON Lines.",
        discussion: """
            Records come in ID order (--reverse: backwards), optionally only those with a string-ID \
            prefix or in an ID range, of one key-set version, or expired. Read-only.
            """
    )

    @OptionGroup var store: StoreOptions

    @Argument(help: "The collection.")
    var collection: String

    @Option(help: "Only string IDs that start with this.")
    var prefix: String?

    @Option(help: "Only IDs from this one on (included).")
    var from: String?

    @Option(help: "Only IDs up to this one (included).")
    var to: String?

    @Option(help: "At most this many records.")
    var limit: Int?

    @Flag(help: "Newest IDs first: walk backwards.")
    var reverse = false

    @Option(help: "Only records written with this key-set version.")
    var version: Int?

    @Flag(help: "Only records that have expired (and are not purged yet).")
    var expired = false

    func validate() throws {
        if prefix != nil && (from != nil || to != nil) {
            throw ValidationError("--prefix cannot be combined with --from/--to")
        }
        if let limit, limit < 0 { throw ValidationError("--limit must not be negative") }
    }

    func run() throws {
        let opened = try openStore(store.path)
        let handle = try openCollection(collection, in: opened)
        let range: LMDB.KeyRange
        if let prefix {
            guard handle.keyKind == .string else {
                throw CLIError.usage("--prefix needs string IDs; \(collection) has \(handle.keyKind.rawValue) IDs")
            }
            range = .prefix(prefix.keyBytes)
        } else {
            range = LMDB.KeyRange(
                from: try from.map { .inclusive(try handle.key($0)) }, to: try to.map { .inclusive(try handle.key($0)) }
            )
        }
        let now = Store.systemClock()
        var table = Table("id", "version", "written", "expires", "bytes", "value")
        var shown = 0
        let limit = limit ?? .max
        try opened.readLMDB { txn in
            guard limit > 0 else { return }
            try txn.forEach(in: handle.database, range: range, reverse: reverse) { key, bytes in
                try checkInterrupt()
                if let version, RecordHeader.peekVersion(bytes) != version { return .next }
                if expired, !(RecordHeader.peekExpiry(bytes).map { $0 <= now } ?? false) { return .next }
                let view = RecordView(bytes, keys: handle.payloadKeys)
                if store.json {
                    say(view.json(collection: handle.shape, key: key, now: now, asCurrent: false).text)
                } else {
                    let value = view.payload.map { JSON.cbor($0).text } ?? Terminal.red(view.damage ?? "damaged")
                    table.add([
                        handle.describeKey(key),
                        view.header.map { String($0.version) } ?? "?",
                        view.header.map { iso8601(milliseconds: $0.writtenAt) } ?? "?",
                        view.header.map { $0.expiresAt.map { iso8601(milliseconds: $0) } ?? "never" } ?? "?",
                        String(bytes.count),
                        value.count > 80 ? String(value.prefix(79)) + "…" : value,
                    ])
                }
                shown += 1
                return shown < limit ? .next : .stop
            }
        }
        if !store.json { table.print() }
    }
}
