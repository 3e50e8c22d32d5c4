import ArgumentParser
import CBOR
import Foundation
@_spi(LMDB) import Hoard
import LMDB

/// `hoard put`: store one record from JSON written with the current version's key names.
struct Put: StoreCommand {
    static let configuration = CommandConfiguration(
        abstract: "Store one record from a JSON object with the current version's key names (writes).",
        discussion: """
            The value is a JSON object (from --value, or else standard input) whose keys are key \
            names of the collection's current key-set version, as `hoard get --as-current` shows \
            them: for fixing a record by hand or adding one from elsewhere. It is stored as CBOR \
            in the current version, written now, with no expiry; a record under the ID is \
            replaced. Refused before anything is written: a value that is not one JSON object, a \
            key that is not a key name of the current version, and a value under the ID's own \
            key that differs from ID. The app's code decides whether the values have the types it \
            reads: read the record back with it (or `hoard get`) after a put. One transaction.
            """
    )

    @OptionGroup var store: StoreOptions

    @Argument(help: "The collection.")
    var collection: String

    @Argument(help: "The record's ID.")
    var id: String

    @Option(name: .long, help: "The JSON object (default: read from standard input).")
    var value: String?

    func run() throws {
        let text = value ?? String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
        let parsed: JSONInput
        do {
            parsed = try JSONDecoder().decode(JSONInput.self, from: Data(text.utf8))
        } catch {
            throw CLIError.usage("the value is not valid JSON: \(error)")
        }
        guard case .object = parsed else {
            throw CLIError.usage("the value must be a JSON object (one record's payload)")
        }
        let opened = try openStore(store.path, writable: true)
        let handle = try openCollection(collection, in: opened)
        let key = try handle.key(id)
        let schema = handle.schema
        guard let names = schema.versions[schema.currentVersion] else {
            throw CLIError.problem(
                "collection \(collection) has no key names for its current version \(schema.currentVersion)")
        }
        let payload = parsed.cbor
        try check(payload, names: names, key: key, handle: handle)
        let header = RecordHeader(version: schema.currentVersion, writtenAt: Store.systemClock(), expiresAt: nil)
        let named = payload.deterministicallyOrdered().encoded()
        let record = header.record(
            with: try named.withUnsafeBytes { bytes in
                do throws(RecordDamage) {
                    return try handle.payloadKeys.numbered(bytes, version: schema.currentVersion)
                } catch {
                    throw CLIError.usage("the value cannot be stored: \(error.reason)")
                }
            })
        let replaced = try opened.writeLMDB { txn in
            let existed = try txn.contains(key, in: handle.database)
            var writer = try opened.writer(of: collection, database: handle.database, in: txn)
            try writer.store(record: record, forKey: key, in: txn)
            try writer.finish(in: txn)
            return existed
        }
        if store.json {
            say(
                JSON.object([
                    ("collection", .string(collection)), ("id", .string(handle.describeKey(key))),
                    ("replaced", .bool(replaced)),
                ]).text)
        } else {
            say(
                "\(replaced ? "replaced" : "stored") \(collection)[\(handle.describeKey(key))] in version \(schema.currentVersion)"
            )
        }
    }

    /// Refuses keys the current version does not name and an ID field that disagrees with the ID.
    private func check(_ payload: CBORValue, names: [String: String], key: [UInt8], handle: CollectionHandle) throws {
        guard case .map(let entries) = payload else { return }
        let topLevel = Set(names.values.map { String($0.prefix { $0 != "." }) })
        for entry in entries {
            guard case .text(let name) = entry.key, topLevel.contains(name) else {
                let shown = if case .text(let name) = entry.key { name } else { "\(entry.key)" }
                throw CLIError.usage(
                    "'\(shown)' is not a key name of \(collection)'s version \(handle.schema.currentVersion) (its names: \(topLevel.sorted().joined(separator: ", ")))"
                )
            }
        }
        // The model's `id` property, when the version names it, must hold the record's own ID.
        guard let idName = names["id"], let stored = payload[idName] else { return }
        let matches: Bool =
            switch (handle.keyKind, stored) {
            case (.int, .unsigned(let n)): Int64(exactly: n).map { $0.keyBytes == key } ?? false
            case (.int, .negative(let n)): n <= UInt64(Int64.max) && (-1 - Int64(n)).keyBytes == key
            case (.uint, .unsigned(let n)): n.keyBytes == key
            case (.string, .text(let text)): text.keyBytes == key
            case (.uuid, .text(let text)): UUID(uuidString: text)?.keyBytes == key
            default: true  // a custom ID: only its code knows how it is written
            }
        if !matches { throw CLIError.usage("the value's '\(idName)' is \(stored), not the ID \(id)") }
    }
}

/// Any JSON value, decoded with the numbers kept as integers where they are whole.
enum JSONInput: Decodable {
    case null, bool(Bool), int(Int64), uint(UInt64), double(Double), string(String), array([JSONInput]), object(
        [(String, JSONInput)])

    private struct Key: CodingKey {
        let stringValue: String
        init(stringValue: String) { self.stringValue = stringValue }
        var intValue: Int? { nil }
        init?(intValue: Int) { nil }
    }

    init(from decoder: any Decoder) throws {
        if let object = try? decoder.container(keyedBy: Key.self) {
            self = .object(try object.allKeys.map { ($0.stringValue, try object.decode(JSONInput.self, forKey: $0)) })
            return
        }
        if var array = try? decoder.unkeyedContainer() {
            var items: [JSONInput] = []
            while !array.isAtEnd { items.append(try array.decode(JSONInput.self)) }
            self = .array(items)
            return
        }
        let single = try decoder.singleValueContainer()
        if single.decodeNil() {
            self = .null
        } else if let value = try? single.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? single.decode(Int64.self) {
            self = .int(value)
        } else if let value = try? single.decode(UInt64.self) {
            self = .uint(value)
        } else if let value = try? single.decode(Double.self) {
            self = .double(value)
        } else {
            self = .string(try single.decode(String.self))
        }
    }

    /// The value as CBOR: whole numbers as integers, others as floats, objects as maps of text keys.
    var cbor: CBORValue {
        switch self {
        case .null: .null
        case .bool(let value): .bool(value)
        case .int(let value): value >= 0 ? .unsigned(UInt64(value)) : .negative(UInt64(-1 - value))
        case .uint(let value): .unsigned(value)
        case .double(let value): .float(value)
        case .string(let value): .text(value)
        case .array(let items): .array(items.map(\.cbor))
        case .object(let members): .map(members.map { CBORValue.Entry(.text($0.0), $0.1.cbor) })
        }
    }
}
