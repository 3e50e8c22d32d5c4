import ArgumentParser
import Foundation
import Hoard
import LMDB
import VariableCoding

/// `hoard dump`: the store as JSON Lines, record bytes included, for `hoard load`.
struct Dump: StoreCommand {
    static let configuration = CommandConfiguration(
        abstract: "Export a store (or one collection) as JSON Lines on standard output.",
        discussion: """
            The first line names the dump format; then, per collection, one line with its registry \
            entry and one line per record: its ID and readable fields, plus the exact key (hex) and \
            record bytes (base64) that `hoard load` restores byte for byte. From one read snapshot. \
            Read-only.
            """
    )

    @OptionGroup var store: StoreOptions

    @Argument(help: "Only this collection.")
    var collection: String?

    func run() throws {
        let opened = try openStore(store.path)
        // A dump is a backup: one that silently lacks a collection would be restored as if whole.
        let handles: [CollectionHandle]
        do {
            handles = try openCollections(collection, in: opened, skippingDamaged: false)
        } catch let error as HoardError {
            guard case .corruptRegistry(let name, _) = error else { throw error }
            throw CLIError.problem(
                "\(error); nothing was dumped. The other collections can be dumped by name (hoard dump \(store.path) COLLECTION); \(name)'s records only as raw bytes, e.g. with mdb_dump -s c:\(name)"
            )
        }
        say(DumpLine.header.text)
        try opened.read { txn in
            for handle in handles {
                say(DumpLine.collection(handle.shape).text)
                var progress = Progress("dump \(handle.name)", total: try txn.count(in: handle.database))
                var done = 0
                try txn.forEach(in: handle.database) { key, record in
                    say(DumpLine.record(handle.shape, key: Array(key), record: Array(record)).text)
                    done += 1
                    if done & 0x3FF == 0 {
                        try checkInterrupt()
                        progress.update(done)
                    }
                    return .next
                }
                progress.finish()
            }
        }
    }
}

/// The lines of a dump; `load` accepts a line only when rendering what it parsed gives the line back.
enum DumpLine {
    static let format = 1

    static var header: JSON { .object([("hoard", .string("dump")), ("format", .int(Int64(format)))]) }

    static func collection(_ handle: CollectionShape) -> JSON {
        guard case .object(let members) = handle.schemaJSON else { return handle.schemaJSON }
        return .object([("kind", .string("collection"))] + members)
    }

    static func record(_ handle: CollectionShape, key: [UInt8], record: [UInt8]) -> JSON {
        let view = record.withUnsafeBytes { RecordView($0) }
        var members: [(String, JSON)] = [
            ("kind", .string("record")), ("collection", .string(handle.name)), ("id", .string(handle.describeKey(key))),
        ]
        if let header = view.header {
            members.append(("version", .int(Int64(header.version))))
            members.append(("writtenAt", .string(iso8601(milliseconds: header.writtenAt))))
            members.append(("expiresAt", header.expiresAt.map { .string(iso8601(milliseconds: $0)) } ?? .null))
        }
        if let damage = view.damage { members.append(("damage", .string(damage))) }
        if let payload = view.payload { members.append(("value", .cbor(payload))) }
        members.append(("key", .string(hexString(key))))
        members.append(("record", .string(Data(record).base64EncodedString())))
        return .object(members)
    }
}

/// `hoard load`: restores a dump.
struct Load: StoreCommand {
    static let configuration = CommandConfiguration(
        abstract: "Import a dump from standard input (writes; creates the store when missing).",
        discussion: """
            Every line is checked before anything is written: it must be a line as `hoard dump` \
            writes it (edited lines are refused: the record bytes are what is restored), every \
            record intact (header and checksum) and of a version its collection's registry knows. \
            Then all records are written in one transaction: all of them or none. A record whose ID \
            already holds different bytes is an error unless --replace.
            """
    )

    @Argument(help: "The store to load into.")
    var path: String

    @Flag(help: "Overwrite records that already exist with other bytes.")
    var replace = false

    struct Entry {
        var line: Int
        var collection: String
        var key: [UInt8]
        var record: [UInt8]
    }

    func run() throws {
        let input = FileHandle.standardInput.readDataToEndOfFile()
        var schemas: [String: CollectionSchema] = [:]
        var order: [String] = []
        var entries: [Entry] = []
        var sawHeader = false
        for (index, raw) in input.split(separator: 0x0A, omittingEmptySubsequences: false).enumerated() {
            let number = index + 1
            let text = String(decoding: raw, as: UTF8.self).trimmingCharacters(in: .whitespaces)
            if text.isEmpty { continue }
            guard let object = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] else {
                throw CLIError.problem("stdin line \(number): not a JSON object")
            }
            if !sawHeader {
                guard object["hoard"] as? String == "dump" else {
                    throw CLIError.problem(
                        "stdin line \(number): not a Hoard dump (the first line must be {\"hoard\":\"dump\",…})")
                }
                guard (object["format"] as? Int) == DumpLine.format else {
                    throw CLIError.problem(
                        "stdin line \(number): dump format \(object["format"] ?? "?") is not format \(DumpLine.format), which this hoard reads"
                    )
                }
                sawHeader = true
                continue
            }
            switch object["kind"] as? String {
            case "collection":
                let schema = try parseSchema(object, line: number)
                guard DumpLine.collection(handle(for: schema)).text == text else {
                    throw CLIError.problem("stdin line \(number): the collection line is not as `hoard dump` writes it")
                }
                if schemas[schema.name] == nil { order.append(schema.name) }
                schemas[schema.name] = schema
            case "record":
                guard let name = object["collection"] as? String, let schema = schemas[name] else {
                    throw CLIError.problem(
                        "stdin line \(number): a record of a collection without a collection line before it")
                }
                guard let keyText = object["key"] as? String, let key = KeyKind.custom.keyBytes(parsing: keyText),
                    !key.isEmpty,
                    let recordText = object["record"] as? String, let data = Data(base64Encoded: recordText)
                else {
                    throw CLIError.problem(
                        "stdin line \(number): the key (hex) or record (base64) is missing or malformed")
                }
                let record = [UInt8](data)
                let check: String? = record.withUnsafeBytes { bytes in
                    do throws(RecordDamage) {
                        let (header, _) = try RecordHeader.parse(bytes)
                        return schema.versions[header.version] == nil
                            ? "version \(header.version) is not in the collection's registry" : nil
                    } catch {
                        return "the record is damaged: \(error.reason)"
                    }
                }
                if let check { throw CLIError.problem("stdin line \(number) (\(name)): \(check)") }
                guard DumpLine.record(handle(for: schema), key: key, record: record).text == text else {
                    throw CLIError.problem(
                        "stdin line \(number) (\(name)): the line does not match its record bytes (was it edited? load restores the bytes)"
                    )
                }
                entries.append(Entry(line: number, collection: name, key: key, record: record))
            default:
                throw CLIError.problem(
                    "stdin line \(number): unknown kind \(object["kind"].map { "\($0)" } ?? "(none)") (expected collection or record)"
                )
            }
        }
        guard sawHeader else { throw CLIError.problem("stdin is empty: nothing to load") }

        let store = try openStore(path, writable: true, create: true)
        var databases: [String: Database] = [:]
        for name in order {
            guard let database = try store.recordDatabase(of: name, create: true) else {
                throw CLIError.problem("cannot create collection \(name)")
            }
            databases[name] = database
        }
        var progress = Progress("load", total: entries.count)
        let (written, same) = try store.write { txn in
            var written = 0, same = 0
            for name in order { try store.record(schemas[name]!, in: txn) }
            for (index, entry) in entries.enumerated() {
                guard let database = databases[entry.collection] else { continue }
                if let existing = try txn.value(forKey: entry.key, in: database) {
                    if existing == entry.record { same += 1; continue }
                    guard replace else {
                        let id =
                            schemas[entry.collection].map { handle(for: $0).describeKey(entry.key) }
                            ?? hexString(entry.key)
                        throw CLIError.problem(
                            "stdin line \(entry.line): \(entry.collection)[\(id)] exists with other bytes; nothing was loaded (use --replace to overwrite)"
                        )
                    }
                }
                try txn.put(entry.record, forKey: entry.key, in: database)
                written += 1
                if index & 0x3FF == 0 {
                    try checkInterrupt()
                    progress.update(index)
                }
            }
            return (written, same)
        }
        progress.finish()
        say(
            "loaded \(written) records into \(order.count) collection\(order.count == 1 ? "" : "s") of \(path)\(same > 0 ? " (\(same) already there)" : "")"
        )
    }

    private func handle(for schema: CollectionSchema) -> CollectionShape { CollectionShape(schema) }

    private func parseSchema(_ object: [String: Any], line: Int) throws -> CollectionSchema {
        guard let name = object["collection"] as? String, !name.isEmpty,
            let type = object["type"] as? String,
            let current = object["currentVersion"] as? Int,
            let kindText = object["keyKind"] as? String, let kind = KeyKind(rawValue: kindText),
            let versions = object["versions"] as? [String: [String: String]]
        else {
            throw CLIError.problem(
                "stdin line \(line): a collection line needs collection, type, currentVersion, keyKind and versions")
        }
        var nested: [NestedKeySets] = []
        for item in object["nested"] as? [Any] ?? [] {
            guard let item = item as? [String: Any], let path = item["path"] as? String,
                let type = item["type"] as? String,
                let used = item["used"] as? [String: Int],
                let versions = item["versions"] as? [String: [String: String]]
            else {
                throw CLIError.problem("stdin line \(line): a nested entry needs path, type, used and versions")
            }
            nested.append(
                NestedKeySets(
                    path: path, type: type,
                    versionUsed: try parseVersions(used, line: line),
                    keyNames: try parseVersions(versions, line: line)
                ))
        }
        var enums: [StoredEnumAliases] = []
        for item in object["enums"] as? [Any] ?? [] {
            guard let item = item as? [String: Any], let path = item["path"] as? String,
                let type = item["type"] as? String,
                let aliases = item["aliases"] as? [String: [String: String]]
            else {
                throw CLIError.problem("stdin line \(line): an enums entry needs path, type and aliases")
            }
            enums.append(StoredEnumAliases(path: path, type: type, aliases: try parseVersions(aliases, line: line)))
        }
        return CollectionSchema(
            name: name, type: type, currentVersion: current, keyKind: kind,
            versions: try parseVersions(versions, line: line),
            nested: nested, enums: enums
        )
    }

    /// A map keyed by version numbers as text ("1"), keyed by the numbers; "1" and "01" in one map are refused.
    private func parseVersions<Value>(_ versions: [String: Value], line: Int) throws -> [Int: Value] {
        var parsed: [Int: Value] = [:]
        for (text, value) in versions {
            let number = try versionNumber(text, line: line)
            guard parsed.updateValue(value, forKey: number) == nil else {
                throw CLIError.problem("stdin line \(line): version \(number) appears twice")
            }
        }
        return parsed
    }

    private func versionNumber(_ text: String, line: Int) throws -> Int {
        guard let number = Int(text), number >= 0 else {
            throw CLIError.problem("stdin line \(line): '\(text)' is not a version number")
        }
        return number
    }
}
