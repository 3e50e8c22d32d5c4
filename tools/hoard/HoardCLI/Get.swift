import ArgumentParser
@_spi(LMDB) import Hoard
import LMDB

/// `hoard get`: one record, header and payload.
struct Get: StoreCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show one record: its header and its payload as JSON.",
        discussion: """
            The record's tags, when it has any, are shown after its ID. The ID is written as the collection's IDs are (a number, a string or a UUID); 0x… \
            gives raw key bytes; put -- before a negative number (hoard get PATH Note -- -5). The payload is shown with the key names of the version it was \
            written in, or with --as-current in the current version's names (the model's own \
            keys; a nested model's map is shown as stored). Exit status 1 when \
            there is no such record or it is damaged. Read-only.
            """
    )

    @OptionGroup var store: StoreOptions

    @Argument(help: "The collection.")
    var collection: String

    @Argument(help: "The record's ID.")
    var id: String

    @Flag(name: .customLong("as-current"), help: "Show the payload with the current version's key names.")
    var asCurrent = false

    func run() throws {
        let opened = try openStore(store.path)
        let handle = try openCollection(collection, in: opened)
        let key = try handle.key(id)
        let now = Store.systemClock()
        let shown: (json: JSON, text: [String], damaged: Bool)? = try opened.readLMDB { txn in
            try txn.withValue(forKey: key, in: handle.database) { bytes in
                let view = RecordView(bytes, keys: handle.payloadKeys)
                return (
                    view.json(collection: handle.shape, key: key, now: now, asCurrent: asCurrent),
                    describe(view, size: bytes.count, handle: handle, now: now), view.damage != nil
                )
            }
        }
        guard var shown else { throw CLIError.problem("no record with ID \(id) in collection \(collection)") }
        let tags = try opened.tags(ofKey: key, in: collection)
        if case .object(var fields) = shown.json {
            fields.append(("tags", .array(tags.map(JSON.string))))
            shown.json = .object(fields)
        }
        if !tags.isEmpty { shown.text.insert("\(Terminal.bold("tags"))      \(tags.joined(separator: ", "))", at: 1) }
        if store.json { say(shown.json.text) } else { shown.text.forEach(say) }
        if shown.damaged { throw CLIError.problem("\(collection)[\(id)] is damaged") }
    }

    private func describe(_ view: RecordView, size: Int, handle: CollectionHandle, now: Int64) -> [String] {
        var lines = ["\(Terminal.bold("id"))        \(id)"]
        if let header = view.header {
            let behind =
                header.version < handle.schema.currentVersion
                ? " (older than the current \(handle.schema.currentVersion))"
                : header.version > handle.schema.currentVersion
                    ? " (newer than the current \(handle.schema.currentVersion))" : " (current)"
            lines.append("\(Terminal.bold("version"))   \(header.version)\(behind)")
            lines.append("\(Terminal.bold("written"))   \(iso8601(milliseconds: header.writtenAt))")
            let expiry =
                header.expiresAt.map { iso8601(milliseconds: $0) + (header.isExpired(at: now) ? " (expired)" : "") }
                ?? "never"
            lines.append("\(Terminal.bold("expires"))   \(expiry)")
            lines.append("\(Terminal.bold("checksum"))  ok")
        } else {
            lines.append("\(Terminal.bold("header"))    \(Terminal.red("damaged"))")
        }
        let layout = view.header.map { "record format \($0.recordFormat), \($0.storedSize)-byte header + payload" }
        lines.append("\(Terminal.bold("size"))      \(size) bytes (\(layout ?? "header + payload"))")
        if let damage = view.damage { lines.append("\(Terminal.bold("damage"))    \(Terminal.red(damage))") }
        if var payload = view.payload, let header = view.header {
            if asCurrent { payload = handle.schema.renaming(payload, from: header.version).value }
            lines.append(JSON.cbor(payload).pretty)
        }
        return lines
    }
}
