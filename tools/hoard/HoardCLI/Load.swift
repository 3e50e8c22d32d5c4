import ArgumentParser
import Foundation
@_spi(LMDB) import Hoard
import LMDB
import VariableCoding

/// `hoard load`: restores a dump, streaming: memory does not grow with the dump.
///
/// Two passes over the input. The first reads the header and the collection lines (LMDB opens a
/// database only in a transaction of its own, so every collection's database is made before the
/// load's transaction). The second checks each record line as it reads it and writes it into
/// one write transaction, so the first bad line aborts it and nothing is loaded. A write may have
/// to run again after the map grows, and then reads the input again from the start: standard
/// input that is not a file (a pipe) is therefore copied to an unlinked temporary file first.
struct Load: StoreCommand {
    static let configuration = CommandConfiguration(
        abstract: "Import a dump from standard input (writes; creates the store when missing).",
        discussion: """
            Every line must be a line as `hoard dump` writes it (edited lines are refused: the \
            record bytes are what is restored), and every record pass the checks `hoard verify` \
            makes (header, checksum, a version its collection's registry knows, payload, key). All \
            records are written in one transaction: all of them or none, the first bad line ending \
            the load with nothing written. With --skip-damaged, a damaged record's line is skipped \
            and named instead, the others are loaded, and the exit status is 1; a dump written \
            with `hoard dump --include-damaged` loads only so. A record whose ID already holds \
            different bytes is an error unless --replace. Standard input that is not a file is \
            first copied to a temporary file in $TMPDIR (or /tmp).
            """
    )

    @Argument(help: "The store to load into.")
    var path: String

    @Flag(help: "Overwrite records that already exist with other bytes.")
    var replace = false

    @Flag(help: "Skip the lines of damaged records (each is named), load the rest, and exit 1.")
    var skipDamaged = false

    func run() throws {
        let input = try DumpInput.standardInput()
        let plan = try readCollections(input)
        let store = try openStore(path, writable: true, create: true)
        var databases: [String: Database] = [:]
        for name in plan.order {
            guard let database = try store.recordDatabase(of: name, create: true) else {
                throw CLIError.problem("cannot create collection \(name)")
            }
            databases[name] = database
        }
        var progress = Progress("load", total: input.size, unit: "bytes")
        let (written, same, skipped) = try store.writeLMDB { txn in
            for name in plan.order {
                if let schema = plan.schemas[name] { try store.record(schema, in: txn) }
            }
            var lines = LoadLines(
                store: store, plan: plan, databases: databases, replace: replace, skipDamaged: skipDamaged,
                progress: progress)
            try input.forEachLine { number, line, offset in
                try lines.load(line, number: number, offset: offset, txn: txn)
            }
            // A bounded collection is brought within its capacity in the same transaction.
            try lines.finish(in: txn)
            progress = lines.progress
            return (lines.written, lines.same, lines.skipped)
        }
        progress.finish()
        let count = plan.order.count
        say(
            "loaded \(written) records into \(count) collection\(count == 1 ? "" : "s") of \(path)\(same > 0 ? " (\(same) already there)" : "")"
        )
        // Named once the load committed: a write that runs again after the map grew reads the
        // input again.
        guard !skipped.isEmpty else { return }
        for line in skipped { printError(line) }
        printError("hoard load: skipped \(skipped.count) damaged record\(skipped.count == 1 ? "" : "s") (named above)")
        throw ExitCode(1)
    }

    /// What the first pass found: the collections' registry entries, in the order they come.
    struct Plan {
        var schemas: [String: CollectionSchema] = [:]
        var order: [String] = []
        /// The line numbers of the header and the collection lines, with the collection each names.
        var headerLine = 0
        var collectionLines: [Int: String] = [:]
    }

    /// The first pass: the header (the first line that is not blank) and every collection line,
    /// checked as the second pass would; record lines are only skipped over.
    private func readCollections(_ input: DumpInput) throws -> Plan {
        var plan = Plan()
        let collectionPrefix = Array(#"{"kind":"collection""#.utf8)
        try input.forEachLine { number, line, _ in
            if plan.headerLine == 0 {
                try checkHeader(line, number: number)
                plan.headerLine = number
            } else if line.starts(with: collectionPrefix) {
                let schema = try DumpLineCheck.collection(String(decoding: line, as: UTF8.self), number: number)
                if plan.schemas[schema.name] == nil { plan.order.append(schema.name) }
                plan.schemas[schema.name] = schema
                plan.collectionLines[number] = schema.name
            }
        }
        guard plan.headerLine > 0 else { throw CLIError.problem("stdin is empty: nothing to load") }
        return plan
    }

    private func checkHeader(_ line: UnsafeRawBufferPointer, number: Int) throws {
        let object = try DumpLineCheck.object(String(decoding: line, as: UTF8.self), number: number)
        guard object["hoard"] as? String == "dump" else {
            throw CLIError.problem(
                "stdin line \(number): not a Hoard dump (the first line must be {\"hoard\":\"dump\",…})")
        }
        guard (object["format"] as? Int) == DumpLine.format else {
            throw CLIError.problem(
                "stdin line \(number): dump format \(object["format"] ?? "?") is not format \(DumpLine.format), which this hoard reads"
            )
        }
        if object["includesDamaged"] as? Bool == true && !skipDamaged {
            throw CLIError.problem(
                "stdin line \(number): this dump holds damaged records (hoard dump --include-damaged); nothing was loaded. Load the others with --skip-damaged"
            )
        }
    }
}

/// The second pass: checks one line at a time and writes its record in the load's transaction.
private struct LoadLines {
    let store: Store
    let plan: Load.Plan
    let databases: [String: Database]
    let replace: Bool
    let skipDamaged: Bool
    var progress: Progress

    var written = 0
    var same = 0
    /// A line per damaged record skipped (--skip-damaged).
    var skipped: [String] = []
    /// The checks of each collection, made once.
    var checks: [String: RecordCheck] = [:]
    /// What `verify` would find wrong with the record of the line just read, or `nil`.
    var damage: Verify.Problem?
    /// The collections whose collection line has been read (a record must come after it).
    var seen: Set<String> = []
    /// Per collection, the greatest key stored: a greater key is new, so it is appended
    /// (`MDB_APPEND`: no search, and pages filled instead of split in half) without a lookup.
    var greatestKey: [String: [UInt8]] = [:]
    /// The store's writer of each collection written to.
    var writers: [String: Hoard.RecordWriter] = [:]

    // Reused from line to line.
    var current: (name: [UInt8], shape: CollectionShape, database: Database, check: RecordCheck)?
    var key: [UInt8] = []
    var record: [UInt8] = []
    let rendered = JSONWriter()

    init(
        store: Store, plan: Load.Plan, databases: [String: Database], replace: Bool, skipDamaged: Bool,
        progress: Progress
    ) {
        (self.store, self.plan, self.databases) = (store, plan, databases)
        (self.replace, self.skipDamaged, self.progress) = (replace, skipDamaged, progress)
    }

    /// Stores `record` under `key` in collection `name` through the store's writer of it.
    private mutating func put(
        _ record: [UInt8], forKey key: [UInt8], in name: String, database: Database, options: PutOptions = [],
        txn: borrowing LMDB.WriteTransaction
    ) throws {
        if writers[name] == nil { writers[name] = try store.writer(of: name, database: database, in: txn) }
        // Not pinned: a dump larger than the bound is loaded as the bound allows.
        try writers[name]?.store(record: record, forKey: key, options: options, pinned: false, in: txn)
    }

    /// Ends every collection's writer: each bounded one is brought within its capacity.
    mutating func finish(in txn: borrowing LMDB.WriteTransaction) throws {
        for name in writers.keys.sorted() { try writers[name]?.finish(in: txn) }
    }

    mutating func load(
        _ line: UnsafeRawBufferPointer, number: Int, offset: Int, txn: borrowing LMDB.WriteTransaction
    ) throws {
        if number & 0x3FF == 0 {
            try checkInterrupt()
            progress.update(offset)
        }
        if number == plan.headerLine { return }
        if let name = plan.collectionLines[number] {
            seen.insert(name)
            return
        }
        guard let found = try recordLine(line) ?? slowCheck(line, number: number) else { return }
        let (shape, database) = found
        if let damage {
            guard skipDamaged else {
                throw CLIError.problem(
                    "stdin line \(number): \(damage.label): the record is damaged: \(damage.reason); nothing was loaded (--skip-damaged loads the others)"
                )
            }
            skipped.append("stdin line \(number): \(damage.label): \(damage.reason); skipped")
            return
        }
        let greatest = try greatestKey[shape.name] ?? lastKey(of: database, named: shape.name, txn: txn)
        if !greatest.lexicographicallyPrecedes(key) {
            if let existing = try txn.value(forKey: key, in: database) {
                if existing == record {
                    same += 1
                    return
                }
                guard replace else {
                    throw CLIError.problem(
                        "stdin line \(number): \(shape.name)[\(shape.describeKey(key))] exists with other bytes; nothing was loaded (use --replace to overwrite)"
                    )
                }
            }
            try put(record, forKey: key, in: shape.name, database: database, txn: txn)
        } else {
            try put(record, forKey: key, in: shape.name, database: database, options: .append, txn: txn)
            greatestKey[shape.name] = key
        }
        written += 1
    }

    /// The checks of `shape`'s collection, made once.
    private mutating func check(of shape: CollectionShape) -> RecordCheck {
        if let check = checks[shape.name] { return check }
        let check = RecordCheck(shape)
        checks[shape.name] = check
        return check
    }

    /// The greatest key `database` holds when the load reaches it (`[]` when it is empty).
    private mutating func lastKey(
        of database: Database, named name: String, txn: borrowing LMDB.WriteTransaction
    ) throws
        -> [UInt8]
    {
        let last = try txn.withCursor(in: database) { cursor in try cursor.last().map { Array($0.key) } ?? [] }
        greatestKey[name] = last
        return last
    }

    /// The fast path for a record line exactly as `hoard dump` writes it: the collection, key and
    /// record are taken from their places, and the line rendered again from the record must be
    /// the line, byte for byte. `nil` when anything differs; then ``slowCheck(_:number:)`` says why.
    private mutating func recordLine(_ line: UnsafeRawBufferPointer) throws -> (CollectionShape, Database)? {
        let prefix = #"{"kind":"record","collection":""#.utf8
        guard line.starts(with: prefix) else { return nil }
        // The collection's name, unless it has escapes (then the slow path reads it).
        let nameStart = prefix.count
        guard let nameEnd = line[nameStart...].firstIndex(where: { $0 == UInt8(ascii: "\"") || $0 == 0x5C }),
            line[nameEnd] == UInt8(ascii: "\"")
        else { return nil }
        let name = UnsafeRawBufferPointer(rebasing: line[nameStart..<nameEnd])
        if current == nil || !current!.name.elementsEqual(name) {
            let text = String(decoding: name, as: UTF8.self)
            guard seen.contains(text), let schema = plan.schemas[text], let database = databases[text] else {
                return nil
            }
            let shape = CollectionShape(schema)
            current = (Array(name), shape, database, check(of: shape))
        }
        guard let (shape, database, check) = current.map({ ($0.shape, $0.database, $0.check) }),
            let (keyText, recordText) = Self.keyAndRecord(line),
            Self.decodeHex(keyText, into: &key), !key.isEmpty,
            Self.decodeBase64(recordText, into: &record)
        else { return nil }
        // The record checked and rendered from one parse of its header and payload.
        let rendered = self.rendered
        let problem = key.withUnsafeBytes { key in
            record.withUnsafeBytes { record -> HoardError? in
                rendered.removeAll()
                switch check.intact(key: key, record: record) {
                case .success(let intact):
                    DumpLine.writeRecord(shape, key: key, record: record, intact: intact, into: rendered)
                    return nil
                case .failure(let problem):
                    DumpLine.writeRecord(shape, key: key, record: record, into: rendered)
                    return problem
                }
            }
        }
        let same =
            rendered.count == line.count && memcmp(rendered.bytes.baseAddress!, line.baseAddress!, line.count) == 0
        guard same else { return nil }
        damage = problem.map { .record($0) }
        return (shape, database)
    }

    /// The slow path: the line checked field by field, which names what is wrong (and, should
    /// the fast path have declined a good line, takes its record all the same).
    private mutating func slowCheck(_ line: UnsafeRawBufferPointer, number: Int) throws -> (CollectionShape, Database)?
    {
        let entry = try DumpLineCheck.record(
            String(decoding: line, as: UTF8.self), number: number,
            schemas: plan.schemas.filter { seen.contains($0.key) })
        guard let database = databases[entry.collection], let schema = plan.schemas[entry.collection] else {
            return nil
        }
        (key, record) = (entry.key, entry.record)
        let shape = CollectionShape(schema)
        let check = self.check(of: shape)
        damage = key.withUnsafeBytes { key in
            record.withUnsafeBytes { record in check.problem(key: key, record: record).map { .record($0) } }
        }
        return (shape, database)
    }

    /// The hex key and base64 record at the end of a record line: `…,"key":"<hex>","record":"<base64>"}`.
    static func keyAndRecord(_ line: UnsafeRawBufferPointer) -> (UnsafeRawBufferPointer, UnsafeRawBufferPointer)? {
        let quote = UInt8(ascii: "\"")
        let recordTag = #","record":""#.utf8
        let keyTag = #","key":""#.utf8
        let end = line.count - 2  // the quote closing the record's base64
        guard end > 0, line[end + 1] == UInt8(ascii: "}"), line[end] == quote,
            let recordOpen = lastQuote(in: line, before: end), recordOpen + 1 >= recordTag.count + 1
        else { return nil }
        let keyClose = recordOpen - recordTag.count  // the quote closing the key's hex
        guard line[(keyClose + 1)...recordOpen].elementsEqual(recordTag), line[keyClose] == quote,
            let keyOpen = lastQuote(in: line, before: keyClose), keyOpen + 1 >= keyTag.count,
            line[(keyOpen + 1 - keyTag.count)...keyOpen].elementsEqual(keyTag)
        else { return nil }
        return (
            UnsafeRawBufferPointer(rebasing: line[(keyOpen + 1)..<keyClose]),
            UnsafeRawBufferPointer(rebasing: line[(recordOpen + 1)..<end])
        )
    }

    /// The last `"` in `line` before `end`. (A `while` loop over the bytes: the generic
    /// `lastIndex(of:)` costs a debug build, which the tests run, a metadata lookup a byte.)
    static func lastQuote(in line: UnsafeRawBufferPointer, before end: Int) -> Int? {
        var index = end - 1
        while index >= 0 {
            if line[index] == UInt8(ascii: "\"") { return index }
            index -= 1
        }
        return nil
    }

    /// The value of each byte as a hex digit, or 0xFF.
    static let hexValues: [UInt8] = (0...255).map { byte in
        switch UInt8(byte) {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt8(byte) - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt8(byte) - UInt8(ascii: "a") + 10
        default: 0xFF
        }
    }

    /// The value of each byte as a base64 digit, or 0xFF.
    static let base64Values: [UInt8] = (0...255).map { byte in
        UInt8(JSONWriter.base64Digits.firstIndex(of: UInt8(byte)) ?? 0xFF)
    }

    /// Lowercase hex, as the dump writes it; `false` for anything else (the slow path then explains).
    static func decodeHex(_ text: UnsafeRawBufferPointer, into bytes: inout [UInt8]) -> Bool {
        guard text.count % 2 == 0 else { return false }
        var valid = true
        let total = text.count / 2
        bytes = [UInt8](unsafeUninitializedCapacity: total) { out, initialized in
            hexValues.withUnsafeBufferPointer { values in
                var index = 0
                while index < total {
                    let high = values[Int(text[2 * index])], low = values[Int(text[2 * index + 1])]
                    valid = valid && high | low < 16
                    out[index] = high << 4 | low
                    index += 1
                }
            }
            initialized = total
        }
        return valid
    }

    /// Standard base64 with padding; `false` for anything else (the slow path then explains).
    static func decodeBase64(_ text: UnsafeRawBufferPointer, into bytes: inout [UInt8]) -> Bool {
        guard text.count % 4 == 0 else { return false }
        let equals = UInt8(ascii: "=")
        let padding =
            text.isEmpty ? 0 : (text[text.count - 1] == equals ? 1 : 0) + (text[text.count - 2] == equals ? 1 : 0)
        var valid = true
        let total = text.count / 4 * 3
        bytes = [UInt8](unsafeUninitializedCapacity: total) { out, initialized in
            base64Values.withUnsafeBufferPointer { values in
                var (input, output) = (0, 0)
                while input < text.count {
                    let last = input + 4 == text.count
                    let a = values[Int(text[input])], b = values[Int(text[input + 1])]
                    let c = last && padding == 2 ? 0 : values[Int(text[input + 2])]
                    let d = last && padding >= 1 ? 0 : values[Int(text[input + 3])]
                    valid = valid && a | b | c | d < 64
                    let chunk = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
                    out[output] = UInt8(chunk >> 16)
                    out[output + 1] = UInt8(chunk >> 8 & 0xFF)
                    out[output + 2] = UInt8(chunk & 0xFF)
                    (input, output) = (input + 4, output + 3)
                }
            }
            initialized = total - padding
        }
        return valid
    }
}

/// A dump's lines checked one field at a time, with an error that names what is wrong: the
/// collection lines (few) always, record lines when the fast path declines them.
enum DumpLineCheck {
    static func object(_ text: String, number: Int) throws -> [String: Any] {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] else {
            throw CLIError.problem("stdin line \(number): not a JSON object")
        }
        return object
    }

    static func collection(_ text: String, number: Int) throws -> CollectionSchema {
        let schema = try parseSchema(try object(text, number: number), line: number)
        guard DumpLine.collection(CollectionShape(schema)).text == text else {
            throw CLIError.problem("stdin line \(number): the collection line is not as `hoard dump` writes it")
        }
        return schema
    }

    struct Entry {
        var collection: String
        var key: [UInt8]
        var record: [UInt8]
    }

    /// A line that is not a record line as `hoard dump` writes it, checked to say why; a line that
    /// turns out to be one is returned.
    static func record(_ text: String, number: Int, schemas: [String: CollectionSchema]) throws -> Entry {
        let object = try object(text, number: number)
        switch object["kind"] as? String {
        case "record": break
        case "collection":
            throw CLIError.problem("stdin line \(number): the collection line is not as `hoard dump` writes it")
        case _ where object["hoard"] != nil:
            throw CLIError.problem("stdin line \(number): a second dump header")
        default:
            throw CLIError.problem(
                "stdin line \(number): unknown kind \(object["kind"].map { "\($0)" } ?? "(none)") (expected collection or record)"
            )
        }
        guard let name = object["collection"] as? String, let schema = schemas[name] else {
            throw CLIError.problem("stdin line \(number): a record of a collection without a collection line before it")
        }
        guard let keyText = object["key"] as? String, let key = KeyKind.custom.keyBytes(parsing: keyText),
            !key.isEmpty,
            let recordText = object["record"] as? String, let data = Data(base64Encoded: recordText)
        else {
            throw CLIError.problem("stdin line \(number): the key (hex) or record (base64) is missing or malformed")
        }
        // Whether the record is damaged is for the caller to check (``RecordCheck``).
        let record = [UInt8](data)
        let rendered = JSONWriter()
        key.withUnsafeBytes { key in
            record.withUnsafeBytes {
                DumpLine.writeRecord(CollectionShape(schema), key: key, record: $0, into: rendered)
            }
        }
        guard rendered.bytes.elementsEqual(text.utf8) else {
            throw CLIError.problem(
                "stdin line \(number) (\(name)): the line does not match its record bytes (was it edited? load restores the bytes)"
            )
        }
        return Entry(collection: name, key: key, record: record)
    }

    static func parseSchema(_ object: [String: Any], line: Int) throws -> CollectionSchema {
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
    static func parseVersions<Value>(_ versions: [String: Value], line: Int) throws -> [Int: Value] {
        var parsed: [Int: Value] = [:]
        for (text, value) in versions {
            let number = try versionNumber(text, line: line)
            guard parsed.updateValue(value, forKey: number) == nil else {
                throw CLIError.problem("stdin line \(line): version \(number) appears twice")
            }
        }
        return parsed
    }

    static func versionNumber(_ text: String, line: Int) throws -> Int {
        guard let number = Int(text), number >= 0 else {
            throw CLIError.problem("stdin line \(line): '\(text)' is not a version number")
        }
        return number
    }
}

/// A dump read line by line from a file that can be read again from its start: standard input
/// when it is a file, else a copy of it in an unlinked temporary file (which disappears with the
/// process, also when it is killed).
final class DumpInput {
    let descriptor: Int32
    /// The dump's size in bytes.
    let size: Int

    private init(descriptor: Int32, size: Int) {
        self.descriptor = descriptor
        self.size = size
    }

    static func standardInput() throws -> DumpInput {
        var info = stat()
        if fstat(0, &info) == 0 && info.st_mode & S_IFMT == S_IFREG {
            return DumpInput(descriptor: 0, size: Int(info.st_size))
        }
        let directory = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array((directory + "/hoard-load-XXXXXX").utf8CString)
        let copy = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard copy >= 0 else {
            throw CLIError.problem(
                "cannot make a temporary file in \(directory) to hold standard input: \(String(cString: strerror(errno))); nothing was loaded"
            )
        }
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        var size = 0
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else {
                throw CLIError.problem(
                    "cannot read standard input: \(String(cString: strerror(errno))); nothing was loaded")
            }
            if count == 0 { break }
            try checkInterrupt()
            var done = 0
            while done < count {
                let wrote = buffer.withUnsafeBytes { write(copy, $0.baseAddress! + done, count - done) }
                if wrote < 0 && errno == EINTR { continue }
                guard wrote > 0 else {
                    throw CLIError.problem(
                        "cannot copy standard input to a temporary file in \(directory): \(String(cString: strerror(errno))); nothing was loaded"
                    )
                }
                done += wrote
            }
            size += count
        }
        return DumpInput(descriptor: copy, size: size)
    }

    /// The longest line read (a record line is its record's size in base64, and a little more).
    static let maxLineLength = 256 << 20

    /// Calls `body` with each line that is not blank, spaces and tabs around it removed, its
    /// number (from 1) and the offset in the input where it ends; from the start of the input each time.
    func forEachLine(_ body: (Int, UnsafeRawBufferPointer, Int) throws -> Void) throws {
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var filled = 0  // bytes in the buffer
        var offset = 0  // where the buffer's first byte is in the input
        var number = 0
        var atEnd = false
        while !atEnd || filled > 0 {
            if !atEnd {
                let count = buffer.withUnsafeMutableBytes {
                    pread(descriptor, $0.baseAddress! + filled, $0.count - filled, off_t(offset + filled))
                }
                if count < 0 && errno == EINTR { continue }
                guard count >= 0 else {
                    throw CLIError.problem(
                        "cannot read the dump: \(String(cString: strerror(errno))); nothing was loaded")
                }
                if count == 0 { atEnd = true }
                filled += count
            }
            // Every complete line in the buffer (and, at the end, the last one without a newline).
            let consumed = try buffer.withUnsafeBytes { bytes -> Int in
                var start = 0
                while start < filled {
                    let found = memchr(bytes.baseAddress! + start, 0x0A, filled - start)
                    guard
                        let newline = found.map({ UnsafeRawPointer($0) - bytes.baseAddress! }) ?? (atEnd ? filled : nil)
                    else { break }
                    number += 1
                    var (first, last) = (start, newline)
                    while first < last && (bytes[first] == 0x20 || bytes[first] == 0x09) { first += 1 }
                    while last > first && (bytes[last - 1] == 0x20 || bytes[last - 1] == 0x09) { last -= 1 }
                    if first < last {
                        try body(number, UnsafeRawBufferPointer(rebasing: bytes[first..<last]), offset + newline)
                    }
                    start = min(newline + 1, filled)
                }
                return start
            }
            if consumed == 0 && filled == buffer.count {
                // One line fills the buffer: make room for it.
                guard buffer.count < Self.maxLineLength else {
                    throw CLIError.problem(
                        "stdin line \(number + 1) is longer than \(Self.maxLineLength >> 20) MiB; nothing was loaded")
                }
                buffer += [UInt8](repeating: 0, count: buffer.count)
            }
            // Keep the incomplete line for the next read.
            buffer.withUnsafeMutableBytes { bytes in
                bytes.baseAddress!.copyMemory(from: bytes.baseAddress! + consumed, byteCount: filled - consumed)
            }
            offset += consumed
            filled -= consumed
            if atEnd && filled == 0 { break }
        }
    }

    deinit {
        if descriptor != 0 { close(descriptor) }
    }
}
