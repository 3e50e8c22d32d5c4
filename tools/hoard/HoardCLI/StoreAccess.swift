import ArgumentParser
import CBOR
import Foundation
@_spi(LMDB) import Hoard
import LMDB
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A failure the CLI reports in one line on standard error, with its exit status:
/// 1 problems found or an ID not found, 2 usage, 3 the store cannot be opened.
struct CLIError: Error {
    var status: Int32
    var message: String

    static func usage(_ message: String) -> CLIError { CLIError(status: 2, message: message) }
    static func cannotOpen(_ message: String) -> CLIError { CLIError(status: 3, message: message) }
    static func problem(_ message: String) -> CLIError { CLIError(status: 1, message: message) }
}

/// Options every store command takes.
struct StoreOptions: ParsableArguments {
    @Argument(help: "The store: a directory holding data.mdb and lock.mdb.")
    var path: String

    @Flag(name: .long, help: "Write JSON (JSON Lines for record listings) instead of tables.")
    var json = false
}

/// Ctrl-C and SIGTERM set this flag instead of ending the process, so that the running read
/// transaction ends properly and no stale reader slot is left behind; loops check it.
let interruptRequested = Atomic<Bool>(false)

func installInterruptHandler() {
    let handler: @convention(c) (Int32) -> Void = { _ in interruptRequested.store(true, ordering: .relaxed) }
    signal(SIGINT, handler)
    signal(SIGTERM, handler)
}

func checkInterrupt() throws {
    if interruptRequested.load(ordering: .relaxed) {
        throw CLIError(status: 130, message: "interrupted; nothing half-done was committed")
    }
}

/// Opens the store at `path`, read-only unless `writable`; every way this can fail becomes one
/// line and exit status 3. A writable open never creates a store unless `create`.
func openStore(_ path: String, writable: Bool = false, create: Bool = false) throws -> Store {
    var info = stat()
    if stat(path, &info) != 0 {
        if errno == ENOENT && create {
            // load into a new store
        } else if errno == ENOENT {
            throw CLIError.cannotOpen("\(path): no such store (the path does not exist)")
        } else {
            throw CLIError.cannotOpen("\(path): \(String(cString: strerror(errno)))")
        }
    } else {
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw CLIError.cannotOpen("\(path): not a store (a Hoard store is a directory holding data.mdb)")
        }
        if access(path + "/data.mdb", F_OK) != 0 && !create {
            if errno == EACCES { throw CLIError.cannotOpen("\(path): permission denied") }
            throw CLIError.cannotOpen("\(path): not a store (the directory holds no data.mdb)")
        }
    }
    do {
        let store = try Store(path: path, options: .init(readOnly: !writable))
        if !store.isInitialized {
            throw CLIError.cannotOpen("\(path): an empty LMDB environment, not a Hoard store")
        }
        return store
    } catch let error as HoardError {
        guard case .storage(let failure) = error else { throw CLIError.cannotOpen("\(error)") }
        throw CLIError.cannotOpen("\(path): \(describe(failure))")
    }
}

private func describe(_ failure: StorageFailure) -> String {
    switch failure.kind {
    case .permissionDenied where failure.code == EROFS: "read-only file system (\(failure))"
    case .permissionDenied: "permission denied (\(failure))"
    case .notLMDB where failure.code == -30794: "written by an incompatible LMDB version (MDB_VERSION_MISMATCH)"
    case .notLMDB: "not an LMDB environment, or a damaged one (MDB_INVALID)"
    default: "\(failure)"
    }
}

/// What the CLI knows of a collection without the app's types: its schema and how IDs are written.
struct CollectionShape {
    let name: String
    let schema: CollectionSchema
    /// How IDs are written (``Store/keyKind(of:)``).
    let keyKind: KeyKind
    /// How each version's payloads number their keys (record format 3), found once: a dump or a
    /// verify reads millions of payloads.
    let payloadKeys: PayloadKeys
    /// The names of each version's numbers as JSON strings, for `dump`'s lines.
    let payloadKeyJSON: [Int: [[UInt8]]]

    init(_ schema: CollectionSchema, keyKind: KeyKind? = nil) {
        name = schema.name
        self.schema = schema
        self.keyKind = keyKind ?? schema.keyKind ?? .custom
        let payloadKeys = PayloadKeys(schema)
        self.payloadKeys = payloadKeys
        payloadKeyJSON = Dictionary(
            uniqueKeysWithValues: schema.versions.keys.compactMap { version in
                payloadKeys.names(version).map { (version, JSONWriter.quotedNames($0)) }
            })
    }

    func describeKey(_ key: some Collection<UInt8>) -> String { keyKind.describe(key) }

    /// The key bytes of an ID given on the command line.
    func key(_ text: String) throws -> [UInt8] {
        guard let bytes = keyKind.keyBytes(parsing: text) else {
            throw CLIError.usage(
                "'\(text)' is not an ID of collection \(name) (its IDs are \(keyKind.rawValue) keys; 0x… gives raw key bytes)"
            )
        }
        return bytes
    }
}

/// A collection of an open store: its shape and its records database.
struct CollectionHandle {
    let shape: CollectionShape
    let database: Database

    var name: String { shape.name }
    var schema: CollectionSchema { shape.schema }
    var keyKind: KeyKind { shape.keyKind }
    var payloadKeys: PayloadKeys { shape.payloadKeys }
    func describeKey(_ key: some Collection<UInt8>) -> String { shape.describeKey(key) }
    func key(_ text: String) throws -> [UInt8] { try shape.key(text) }
}

/// The collection `name`, or every collection when `name` is `nil` (commands with an optional COLLECTION).
///
/// Over the whole store, a collection whose registry entry is damaged is skipped, not fatal: it is
/// named on standard error, the other collections are served, and the command then ends with exit
/// status 1 (`Skipped`). Commands whose output must be complete (dump) pass `skippingDamaged: false`.
func openCollections(_ name: String? = nil, in store: Store, skippingDamaged: Bool = true) throws -> [CollectionHandle]
{
    if let name { return [try openCollection(name, in: store)] }
    return try store.collectionNames().compactMap { name in
        do {
            return try openCollection(name, in: store)
        } catch let error as HoardError {
            guard skippingDamaged, case .corruptRegistry = error else { throw error }
            Output.standard.flush()
            printError("hoard: skipped collection \(name): \(error)")
            Skipped.note()
            return nil
        }
    }
}

/// Whether a command skipped part of the store; it then exits with status 1 after its output.
enum Skipped {
    private static let count = Atomic<Int>(0)
    static func note() { count.add(1, ordering: .relaxed) }
    static var any: Bool { count.load(ordering: .relaxed) > 0 }
}

/// The collection `name`; an unknown name is a usage error listing the ones there are.
func openCollection(_ name: String, in store: Store) throws -> CollectionHandle {
    guard let schema = try store.schema(of: name), let database = try store.recordDatabase(of: name) else {
        let names = try store.collectionNames()
        throw CLIError.usage(
            "no collection '\(name)' in \(store.path) (it has \(names.isEmpty ? "none" : names.joined(separator: ", ")))"
        )
    }
    return CollectionHandle(shape: CollectionShape(schema, keyKind: try store.keyKind(of: schema)), database: database)
}

// MARK: - Records

/// A record looked at without its model type.
struct RecordView {
    var header: RecordHeader?
    var damage: String?
    var payload: CBORValue?

    /// Parses `bytes`, a record of the collection whose versions `keys` number; its payload keyed
    /// by key names, whichever record format holds it. Damage is described, never thrown.
    init(_ bytes: UnsafeRawBufferPointer, keys: PayloadKeys) {
        do throws(RecordDamage) {
            let (header, payload) = try RecordHeader.parse(bytes)
            self.header = header
            let named = try keys.textKeyed(payload, header: header)
            do {
                self.payload = try CBORValue(decoding: named)
            } catch {
                damage = "the payload is not valid CBOR: \(error)"
            }
        } catch {
            damage = error.reason
        }
    }

    /// The record as one JSON object (get, scan and dump share it).
    func json(collection: CollectionShape, key: some Collection<UInt8>, now: Int64, asCurrent: Bool) -> JSON {
        var members: [(String, JSON)] = [
            ("collection", .string(collection.name)), ("id", .string(collection.describeKey(key))),
        ]
        if let header {
            members.append(("version", .int(Int64(header.version))))
            members.append(("writtenAt", .string(iso8601(milliseconds: header.writtenAt))))
            members.append(("expiresAt", header.expiresAt.map { .string(iso8601(milliseconds: $0)) } ?? .null))
            members.append(("expired", .bool(header.isExpired(at: now))))
        }
        if let damage { members.append(("damage", .string(damage))) }
        if var payload {
            if asCurrent, let header { payload = collection.schema.renaming(payload, from: header.version).value }
            members.append(("value", .cbor(payload)))
        }
        return .object(members)
    }
}
