import ArgumentParser
import CBOR
import Hoard
import LMDB

/// `hoard migrate`: rewrite old-version records in the current version where names suffice.
struct Migrate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Rewrite records of older key-set versions in the current one (writes).",
        discussion: """
            Without the app's code only spelling can change: a key renamed between versions is \
            renamed, a property the current version dropped is dropped. A record is left alone, \
            and listed with the reason, when the current version has a property the record's \
            version lacks (its value must come from the app), or when a value's CBOR type differs \
            from what current-version records hold for that property (a type change: the app's \
            init(from:) converts it), or when a nested model's key names or an enum's aliased raw \
            values differ between the two versions. Write and expiry times are kept. Batches of 10,000 records \
            per transaction; a live writer is not blocked for longer than one batch.
            """
    )

    @OptionGroup var store: StoreOptions

    @Argument(help: "Only this collection.")
    var collection: String?

    @Flag(name: .customLong("dry-run"), help: "Report what would change; write nothing.")
    var dryRun = false

    struct Outcome {
        var collection: String
        var migrated = 0
        var upToDate = 0
        var left: [(id: String, reason: String)] = []
    }

    func run() throws {
        let opened = try openStore(store.path, writable: !dryRun)
        let handles = try openCollections(collection, in: opened)
        var outcomes: [Outcome] = []
        for handle in handles { outcomes.append(try migrate(handle, in: opened)) }
        if store.json {
            say(JSON.array(outcomes.map { outcome in
                .object([
                    ("collection", .string(outcome.collection)),
                    ("migrated", .int(Int64(outcome.migrated))),
                    ("upToDate", .int(Int64(outcome.upToDate))),
                    ("dryRun", .bool(dryRun)),
                    ("needsAppCode", .array(outcome.left.map { .object([("id", .string($0.id)), ("reason", .string($0.reason))]) })),
                ])
            }).text)
            return
        }
        for outcome in outcomes {
            let verb = dryRun ? "would rewrite" : "rewrote"
            say("\(Terminal.bold(outcome.collection)): \(verb) \(outcome.migrated) record\(outcome.migrated == 1 ? "" : "s") in the current version; \(outcome.upToDate) already current; \(outcome.left.count) left for the app's code")
            for (id, reason) in outcome.left { say("  \(outcome.collection)[\(id)]: \(reason)") }
        }
    }

    private func migrate(_ handle: CollectionHandle, in store: Store) throws -> Outcome {
        let schema = handle.schema
        var outcome = Outcome(collection: handle.name)
        guard let current = schema.versions[schema.currentVersion] else { return outcome }
        // The CBOR types current-version records hold, per property: the yardstick for type changes.
        let types = try currentTypes(handle, store: store)
        var resume: [UInt8]? = nil
        repeat {
            try checkInterrupt()
            // Each batch is read in a snapshot, then written in a short transaction that replaces
            // a record only if it still holds the bytes read: a live writer's newer record wins.
            var pending: [(key: [UInt8], old: [UInt8], new: [UInt8])] = []
            var next: [UInt8]? = nil
            try store.read { txn in
                var seen = 0
                let range = resume.map { KeyRange(from: .exclusive($0), to: nil) } ?? .all
                try txn.forEach(in: handle.database, range: range) { key, record in
                    seen += 1
                    if seen > 10_000 { next = Array(key); return .stop }
                    guard let (header, payload) = try? RecordHeader.parse(record) else { return .next }  // verify reports it
                    guard header.version < schema.currentVersion else { outcome.upToDate += 1; return .next }
                    let id = handle.describeKey(key)
                    guard let old = schema.versions[header.version], let value = try? CBORValue(decoding: payload) else {
                        outcome.left.append((id, "version \(header.version) is unknown to the registry or its payload is damaged"))
                        return .next
                    }
                    if let reason = blocker(value, old: old, current: current, version: header.version, types: types)
                        ?? nestedOrEnumBlocker(schema, version: header.version) {
                        outcome.left.append((id, reason))
                        return .next
                    }
                    let renamed = rename(value, in: schema, from: header.version).value
                    let rewritten = RecordHeader(version: schema.currentVersion, writtenAt: header.writtenAt, expiresAt: header.expiresAt)
                    pending.append((Array(key), Array(record), rewritten.record(with: renamed.encoded())))
                    return .next
                }
            }
            if dryRun {
                outcome.migrated += pending.count
            } else if !pending.isEmpty {
                outcome.migrated += try store.write { txn in
                    var written = 0
                    for entry in pending where try txn.value(forKey: entry.key, in: handle.database) == entry.old {
                        try txn.put(entry.new, forKey: entry.key, in: handle.database)
                        written += 1
                    }
                    return written
                }
            }
            resume = next
        } while resume != nil
        return outcome
    }

    /// Why a record cannot be migrated from names alone, or `nil`.
    private func blocker(_ value: CBORValue, old: [String: String], current: [String: String], version: Int, types: [String: Set<UInt8>]) -> String? {
        for property in current.keys.sorted() where old[property] == nil {
            return "property '\(property)' is new since version \(version): its value must come from the app"
        }
        for (property, oldName) in old.sorted(by: { $0.key < $1.key }) where current[property] != nil {
            guard let found = lookup(value, oldName.split(separator: ".").map(String.init)) else { continue }
            guard let seen = types[property] else {
                return "no current-version record holds property '\(property)' to compare its type with"
            }
            if !seen.contains(majorType(found)) {
                return "property '\(property)' holds \(typeName(majorType(found))) here but \(seen.sorted().map(typeName).joined(separator: "/")) in current records: a type change for the app's code"
            }
        }
        return nil
    }

    /// Why nested models or enums stop a record from being migrated, or `nil`: their maps are
    /// written in another version of the nested type than current records' (the record's header
    /// stamps only the outer version) and the key names differ, or an enum's aliases differ
    /// between the two versions. Only the app's code converts those values.
    private func nestedOrEnumBlocker(_ schema: CollectionSchema, version: Int) -> String? {
        for nested in schema.nested {
            let from = nested.versionUsed[version], to = nested.versionUsed[schema.currentVersion]
            guard from != to, from.flatMap({ nested.keyNames[$0] }) != to.flatMap({ nested.keyNames[$0] }) else { continue }
            let name: (Int?) -> String = { $0.map { "version \($0)" } ?? "no version" }
            return "nested \(nested.type) at '\(nested.path)' has \(name(from)) of its keys here and \(name(to)) in current records: its maps need the app's code"
        }
        // An enum's aliases apply to exactly one version: other aliases mean other raw values.
        for enumeration in schema.enums where (enumeration.aliases[version] ?? [:]) != (enumeration.aliases[schema.currentVersion] ?? [:]) {
            return "enum \(enumeration.type) at '\(enumeration.path)' writes other raw values in version \(version) than in the current one: its values need the app's code"
        }
        return nil
    }

    private func currentTypes(_ handle: CollectionHandle, store: Store) throws -> [String: Set<UInt8>] {
        let schema = handle.schema
        guard let current = schema.versions[schema.currentVersion] else { return [:] }
        return try store.read { txn in
            var types: [String: Set<UInt8>] = [:]
            try txn.forEach(in: handle.database) { _, record in
                guard RecordHeader.peekVersion(record) == schema.currentVersion,
                      let (_, payload) = try? RecordHeader.parse(record), let value = try? CBORValue(decoding: payload) else { return .next }
                for (property, name) in current {
                    if let found = lookup(value, name.split(separator: ".").map(String.init)) { types[property, default: []].insert(majorType(found)) }
                }
                return .next
            }
            return types
        }
    }
}

/// The CBOR major type of a value (7 for simple values and floats), the unit of "same type".
func majorType(_ value: CBORValue) -> UInt8 {
    switch value {
    case .unsigned, .negative: 0  // one integer type: the sign is not a type change
    case .bytes: 2
    case .text: 3
    case .array: 4
    case .map: 5
    case .tagged: 6
    case .bool: 20
    case .null, .undefined: 22
    case .simple: 7
    case .float: 25
    }
}

private func typeName(_ type: UInt8) -> String {
    switch type {
    case 0: "an integer"
    case 2: "a byte string"
    case 3: "text"
    case 4: "an array"
    case 5: "a map"
    case 6: "a tagged value"
    case 20: "a boolean"
    case 22: "null"
    case 25: "a float"
    default: "a simple value"
    }
}
