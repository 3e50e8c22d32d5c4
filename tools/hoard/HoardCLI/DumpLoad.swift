import ArgumentParser
import CBOR
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
        let line = JSONWriter()
        try opened.read { txn in
            for handle in handles {
                say(DumpLine.collection(handle.shape).text)
                var progress = Progress("dump \(handle.name)", total: try txn.count(in: handle.database))
                var done = 0
                try txn.forEach(in: handle.database) { key, record in
                    line.removeAll()
                    DumpLine.writeRecord(handle.shape, key: key, record: record, into: line)
                    Output.standard.line(line.bytes)
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

    /// Writes a record's line: `{"kind":"record","collection":…,"id":…,"version":…,"writtenAt":…,
    /// "expiresAt":…,["damage":…,]"value":…,"key":"<hex>","record":"<base64>"}`, straight into
    /// `line` (a dump writes a million of them; no JSON tree is built).
    static func writeRecord(
        _ handle: CollectionShape, key: UnsafeRawBufferPointer, record: UnsafeRawBufferPointer,
        into line: JSONWriter
    ) {
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
        if let (header, payload) = try? RecordHeader.parse(record), (try? CBORValue.validate(payload)) != nil {
            // An intact record: its payload is written from its bytes when it can be.
            writeHeader(header, into: line)
            line.append(#","value":"#)
            if !line.append(validatedCBOR: payload), let value = try? CBORValue(decoding: Array(payload)) {
                line.append(cbor: value)
            }
        } else {
            // A damaged one says what is wrong, with whatever could be read.
            let view = RecordView(record)
            if let header = view.header { writeHeader(header, into: line) }
            if let damage = view.damage {
                line.append(#","damage":"#)
                line.append(quoted: damage)
            }
            if let payload = view.payload {
                line.append(#","value":"#)
                line.append(cbor: payload)
            }
        }
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
