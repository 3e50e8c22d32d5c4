import ArgumentParser
import CBOR
@_spi(LMDB) import Hoard
import LMDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `hoard verify`: read every record and report what is wrong.
struct Verify: StoreCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check every record of every collection; exit status 1 when anything is wrong.",
        discussion: """
            For each record: the header (magic, format, flags), the checksum, a key-set version the \
            registry knows (not newer than the current one), a payload that is one well-formed CBOR \
            map whose keys are key names of its version, and a key of the collection's ID kind. \
            Each problem is named with collection and ID. The tag index is checked against the \
            records: every tagged record exists and is listed under each of its tags, and nothing \
            else is. A store too damaged for LMDB to walk is \
            reported as structural damage. From one read snapshot; read-only.
            """
    )

    @OptionGroup var store: StoreOptions

    /// What verify found wrong: a record, as the `HoardError` the library gives for a damaged or
    /// newer record (one type for damaged records everywhere), or a whole collection.
    enum Problem {
        case record(HoardError)
        case collection(String, reason: String)

        var collection: String {
            switch self {
            case .record(.corruptRecord(let collection, _, _)), .record(.newerRecord(let collection, _, _, _)):
                collection
            case .record(let error): "\(error)"
            case .collection(let name, _): name
            }
        }

        var key: StoredKey? { if case .record(let error) = self { error.key } else { nil } }

        var reason: String {
            switch self {
            case .record(.corruptRecord(_, _, let reason)): reason
            case .record(.newerRecord(_, _, let version, let current)):
                "written with key-set version \(version), newer than the registry's current \(current)"
            case .record(let error): "\(error)"
            case .collection(_, let reason): reason
            }
        }

        /// The problem as `verify --json` lists it, and `dump --json` reports a record it skipped.
        var json: JSON {
            .object([
                ("collection", .string(collection)), ("id", .string(key?.text ?? "-")),
                ("key", .string(hexString(key?.bytes ?? []))), ("problem", .string(reason)),
            ])
        }

        /// What the problem is about: `Collection[ID]`.
        var label: String { "\(collection)[\(key?.text ?? "-")]" }
    }

    func run() throws {
        let (names, records, problems) = try Self.check(try openStore(store.path))
        if store.json {
            say(
                JSON.object([
                    ("collections", .int(Int64(names.count))),
                    ("records", .int(Int64(records))),
                    (
                        "problems",
                        .array(problems.map(\.json))
                    ),
                ]).text)
        } else {
            for problem in problems { say("\(problem.label): \(Terminal.red(problem.reason))") }
            let summary = "verified \(records) records in \(names.count) collection\(names.count == 1 ? "" : "s"): "
            say(
                summary
                    + (problems.isEmpty
                        ? Terminal.green("no problems")
                        : Terminal.red("\(problems.count) problem\(problems.count == 1 ? "" : "s")")))
        }
        if !problems.isEmpty { throw ExitCode(1) }
    }

    /// Every check of every record of `opened`: its collections, how many records, what is wrong.
    static func check(_ opened: Store) throws -> (names: [String], records: Int, problems: [Problem]) {
        var problems: [Problem] = []
        var records = 0
        let names = try opened.collectionNames()
        // Databases are opened before the snapshot: LMDB handles opened later are not valid in it.
        var found: [(name: String, schema: CollectionSchema, database: Database)] = []
        for name in names {
            let recorded: CollectionSchema?
            do {
                recorded = try opened.schema(of: name)
            } catch let error as HoardError {
                guard case .corruptRegistry = error else { throw error }
                problems.append(.collection(name, reason: "\(error): its records cannot be checked"))
                continue
            }
            guard let schema = recorded, let database = try opened.recordDatabase(of: name) else {
                problems.append(
                    .collection(name, reason: "the collection has no registry entry: its records cannot be named"))
                continue
            }
            found.append((name, schema, database))
        }
        try opened.readLMDB { txn in
            for (name, schema, database) in found {
                let check = RecordCheck(CollectionShape(schema))
                var progress = Progress("verify \(name)", total: try txn.count(in: database))
                var done = 0
                try txn.forEach(in: database) { key, record in
                    if let problem = check.problem(key: key, record: record) {
                        problems.append(.record(problem))
                    }
                    done += 1
                    if done & 0x3FFF == 0 {
                        try checkInterrupt()
                        progress.update(done)
                    }
                    return .next
                }
                records += done
                progress.finish()
            }
        }
        for (name, _, _) in found {
            for problem in try opened.tagIndexProblems(in: name) {
                problems.append(.collection(name, reason: "tag index: \(problem)"))
            }
        }
        return (names, records, problems)
    }
}

/// What `hoard verify PATH` reports wrong in the store at `path`, one line a problem (empty when
/// it is clean), for a tool that checks many stores in one process (the power-loss checker). The
/// store must not be open in this process.
///
/// - Throws: what opening the store read-only throws (`hoard verify` exits with status 3 then).
public func verifyProblems(ofStoreAt path: String) throws -> [String] {
    try Verify.check(try openStore(path)).problems.map { "\($0.label): \($0.reason)" }
}

/// The checks `verify` makes of one record, which `dump` and `load` make too: the key of the
/// collection's ID kind, the header and checksum, a version the registry knows (not newer than its
/// current one), a payload that is one well-formed CBOR map whose keys are key names of its version.
struct RecordCheck {
    let shape: CollectionShape
    /// The top-level key names of each version.
    private let topLevel: [Int: KeyNames]

    init(_ shape: CollectionShape) {
        self.shape = shape
        topLevel = shape.schema.versions.mapValues {
            KeyNames(Set($0.values.map { String($0.prefix { $0 != "." }) }))
        }
    }

    /// What is wrong with one record, or `nil`.
    func problem(key: UnsafeRawBufferPointer, record: UnsafeRawBufferPointer) -> HoardError? {
        if case .failure(let problem) = intact(key: key, record: record) { problem } else { nil }
    }

    /// The record's header and payload when it passes every check, else what is wrong. Payloads
    /// are validated in place, without building values: verify must keep up with hundreds of
    /// thousands of records a second.
    func intact(
        key: UnsafeRawBufferPointer, record: UnsafeRawBufferPointer
    ) -> Result<(header: RecordHeader, payload: UnsafeRawBufferPointer), HoardError> {
        // The key is copied only for a record with a problem.
        var stored: StoredKey { StoredKey(key, kind: shape.keyKind) }
        let damaged = { (reason: String) in
            HoardError.corruptRecord(collection: shape.name, key: stored, reason: reason)
        }
        if !shape.keyKind.accepts(key) {
            return .failure(damaged("the key 0x\(hexString(key)) is not a \(shape.keyKind.rawValue) ID"))
        }
        let header: RecordHeader
        let payload: UnsafeRawBufferPointer
        do throws(RecordDamage) {
            (header, payload) = try RecordHeader.parse(record)
        } catch {
            return .failure(damaged(error.reason))
        }
        guard let known = topLevel[header.version] else {
            return .failure(
                header.version > shape.schema.currentVersion
                    ? .newerRecord(
                        collection: shape.name, key: stored, version: header.version,
                        current: shape.schema.currentVersion)
                    : damaged("written with key-set version \(header.version), which the registry does not record"))
        }
        var seen = KeyNames.Seen()
        // How many numbers a payload of record format 3 may use; -1: keys are names (formats 1, 2).
        let numbers = header.hasNumberedKeys ? shape.payloadKeys.names(header.version)?.count ?? 0 : -1
        do {
            let major = try CBORValue.validate(payload) { (key: CBORTopLevelKey) in
                switch key {
                case .number(let number) where numbers >= 0:
                    // Numbers stand for the version's top-level names (docs/FORMAT.md).
                    guard number < UInt64(numbers) else {
                        throw PayloadProblem(
                            "the payload has key \(number), which stands for no key of version \(header.version)")
                    }
                    guard seen.insert(Int(number)) else { throw PayloadProblem("the payload has key \(number) twice") }
                case .text(let bytes) where numbers < 0:
                    guard let index = known.index(of: bytes) else {
                        throw PayloadProblem(
                            "the payload has key '\(String(decoding: bytes, as: UTF8.self))', which is not a key of version \(header.version)"
                        )
                    }
                    guard seen.insert(index) else {
                        throw PayloadProblem("the payload has key '\(known.names[index])' twice")
                    }
                default:
                    throw PayloadProblem(
                        numbers < 0
                            ? "the payload has a map key that is not text"
                            : "the payload has a map key that is not a number (record format 3)")
                }
            }
            if major != 5 { return .failure(damaged("the payload is not a CBOR map")) }
        } catch let problem as PayloadProblem {
            return .failure(damaged(problem.reason))
        } catch {
            return .failure(damaged("the payload is not valid CBOR: \(error)"))
        }
        return .success((header, payload))
    }
}

private struct PayloadProblem: Error {
    let reason: String
    init(_ reason: String) { self.reason = reason }
}

/// The top-level key names of one version, matched as bytes (no String per key and record).
struct KeyNames {
    let names: [String]
    private let bytes: [[UInt8]]

    init(_ names: Set<String>) {
        self.names = names.sorted()
        bytes = self.names.map { Array($0.utf8) }
    }

    func index(of name: UnsafeRawBufferPointer) -> Int? {
        bytes.firstIndex { $0.count == name.count && $0.elementsEqual(name) }
    }

    /// Which names a payload has used so far.
    struct Seen {
        private var small: UInt64 = 0
        private var large: Set<Int> = []

        mutating func insert(_ index: Int) -> Bool {
            guard index < 64 else { return large.insert(index).inserted }
            defer { small |= 1 << UInt64(index) }
            return small & (1 << UInt64(index)) == 0
        }
    }
}
