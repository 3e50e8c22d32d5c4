import ArgumentParser
import CBOR
import Foundation
@_spi(LMDB) import Hoard
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

            Every record is checked as `hoard verify` checks it. A damaged record is left out and \
            named on standard error (with --json, as the object `verify --json` lists it); the rest \
            is dumped, and the last line on standard error counts what was left out: the exit \
            status is then 1. With --include-damaged, damaged records are written too, byte for \
            byte, for inspection; the dump says so, and `hoard load` loads such a dump only with \
            --skip-damaged.
            """
    )

    @OptionGroup var store: StoreOptions

    @Argument(help: "Only this collection.")
    var collection: String?

    @Flag(help: "Write damaged records too, byte for byte, for inspection (`hoard load` then needs --skip-damaged).")
    var includeDamaged = false

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
        say(DumpLine.header(includesDamaged: includeDamaged).text)
        let line = JSONWriter()
        var (records, damaged) = (0, 0)
        try opened.readLMDB { txn in
            for handle in handles {
                say(DumpLine.collection(handle.shape).text)
                let check = RecordCheck(handle.shape)
                var progress = Progress("dump \(handle.name)", total: try txn.count(in: handle.database))
                var done = 0
                try txn.forEach(in: handle.database) { key, record in
                    done += 1
                    if done & 0x3FF == 0 {
                        try checkInterrupt()
                        progress.update(done)
                    }
                    line.removeAll()
                    switch check.intact(key: key, record: record) {
                    case .success(let intact):
                        DumpLine.writeRecord(handle.shape, key: key, record: record, intact: intact, into: line)
                    case .failure(let problem):
                        damaged += 1
                        report(.record(problem))
                        guard includeDamaged else { return .next }
                        DumpLine.writeRecord(handle.shape, key: key, record: record, into: line)
                    }
                    Output.standard.line(line.bytes)
                    return .next
                }
                records += done
                progress.finish()
            }
        }
        guard damaged > 0 else { return }
        let written = includeDamaged ? records : records - damaged
        if store.json {
            printError(
                JSON.object([
                    ("records", .int(Int64(records))), ("damaged", .int(Int64(damaged))),
                    ("dumped", .int(Int64(written))), ("includesDamaged", .bool(includeDamaged)),
                ]).text)
        } else if includeDamaged {
            printError(
                "hoard dump: \(damaged) of \(records) records are damaged (named above); they are in the dump, as --include-damaged asks, and `hoard load` loads it only with --skip-damaged"
            )
        } else {
            printError(
                "hoard dump: left out \(damaged) damaged record\(damaged == 1 ? "" : "s") (named above); the dump holds the other \(written) of \(records)"
            )
        }
        throw ExitCode(1)
    }

    /// Names a damaged record on standard error, as `verify` does on standard output.
    private func report(_ problem: Verify.Problem) {
        printError(store.json ? problem.json.text : "\(problem.label): \(problem.reason)")
    }
}

/// The lines of a dump; `load` accepts a line only when rendering what it parsed gives the line back.
enum DumpLine {
    static let format = 1

    /// The first line. A dump that holds damaged records (`--include-damaged`) says so, for `load`.
    static func header(includesDamaged: Bool) -> JSON {
        .object(
            [("hoard", .string("dump")), ("format", .int(Int64(format)))]
                + (includesDamaged ? [("includesDamaged", .bool(true))] : []))
    }

    static func collection(_ handle: CollectionShape) -> JSON {
        guard case .object(let members) = handle.schemaJSON else { return handle.schemaJSON }
        return .object([("kind", .string("collection"))] + members)
    }

    /// Writes a record's line: `{"kind":"record","collection":…,"id":…,"version":…,"writtenAt":…,
    /// "expiresAt":…,["damage":…,]"value":…,"key":"<hex>","record":"<base64>"}`, straight into
    /// `line` (a dump writes a million of them; no JSON tree is built).
    static func writeRecord(
        _ handle: CollectionShape, key: UnsafeRawBufferPointer, record: UnsafeRawBufferPointer,
        into line: JSONWriter
    ) {
        if let (header, payload) = try? RecordHeader.parse(record), (try? CBORValue.validate(payload)) != nil,
            !header.hasNumberedKeys || handle.payloadKeyJSON[header.version] != nil
        {
            writeRecord(handle, key: key, record: record, intact: (header, payload), into: line)
            return
        }
        // A damaged one says what is wrong, with whatever could be read.
        writeStart(handle, key: key, into: line)
        let view = RecordView(record, keys: handle.payloadKeys)
        if let header = view.header { writeHeader(header, into: line) }
        if let damage = view.damage {
            line.append(#","damage":"#)
            line.append(quoted: damage)
        }
        if let payload = view.payload {
            line.append(#","value":"#)
            line.append(cbor: payload)
        }
        writeEnd(key: key, record: record, into: line)
    }

    /// Writes the line of an intact record whose header and payload (validated CBOR) are already
    /// parsed: `dump` has checked them, and does not parse them twice.
    static func writeRecord(
        _ handle: CollectionShape, key: UnsafeRawBufferPointer, record: UnsafeRawBufferPointer,
        intact: (header: RecordHeader, payload: UnsafeRawBufferPointer), into line: JSONWriter
    ) {
        writeStart(handle, key: key, into: line)
        writeHeader(intact.header, into: line)
        line.append(#","value":"#)
        // Written from its bytes when it can be.
        let header = intact.header
        let names = header.hasNumberedKeys ? handle.payloadKeyJSON[header.version] : nil
        if !line.append(validatedCBOR: intact.payload, names: names),
            let value = try? CBORValue(decoding: handle.payloadKeys.textKeyed(intact.payload, header: header))
        {
            line.append(cbor: value)
        }
        writeEnd(key: key, record: record, into: line)
    }

    private static func writeStart(_ handle: CollectionShape, key: UnsafeRawBufferPointer, into line: JSONWriter) {
        line.append(#"{"kind":"record","collection":"#)
        line.append(quoted: handle.name)
        line.append(#","id":"#)
        if handle.keyKind == .int, let id = Int64(keyBytes: key) {
            // The common kind, without a String per record (the same text `describeKey` gives).
            line.append(byte: UInt8(ascii: "\""))
            line.append(id)
            line.append(byte: UInt8(ascii: "\""))
        } else {
            line.append(quoted: handle.describeKey(key))
        }
    }

    private static func writeEnd(key: UnsafeRawBufferPointer, record: UnsafeRawBufferPointer, into line: JSONWriter) {
        line.append(#","key":""#)
        line.append(hex: key)
        line.append(#"","record":""#)
        line.append(base64: record)
        line.append(#""}"#)
    }

    private static func writeHeader(_ header: RecordHeader, into line: JSONWriter) {
        line.append(#","version":"#)
        line.append(Int64(header.version))
        line.append(#","writtenAt":""#)
        line.append(iso8601: header.writtenAt)
        if let expiresAt = header.expiresAt {
            line.append(#"","expiresAt":""#)
            line.append(iso8601: expiresAt)
            line.append(byte: UInt8(ascii: "\""))
        } else {
            line.append(#"","expiresAt":null"#)
        }
    }

}
