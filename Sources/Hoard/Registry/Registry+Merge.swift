internal import LMDB
internal import VariableCoding
internal import CBOR

// Keeping shipped key sets frozen. Whatever declares key sets — a model's code when a collection
// is opened, a dump when `hoard load` restores one — is merged with the recorded entry by one
// function, and recorded by one function that reads and writes in the same write transaction:
// two processes that open a collection with different new versions at the same moment are
// serialized by LMDB's writer lock, so the second one sees what the first recorded.

extension Registry {
    /// Checks `Model`'s key sets against the recorded ones and records what is new.
    ///
    /// Checked first in a read transaction (entries only grow, so a registry that records it all
    /// needs no write); otherwise checked again and written in one write transaction.
    static func check<Model: VariablyCodable>(
        _ type: Model.Type, collection: String, keyKind: KeyKind, in store: Store
    ) throws {
        guard let meta = store.meta else { return }
        let declared = try CollectionSchema(declaring: Model.self, name: collection, keyKind: keyKind)
        let recorded = try read(collection, in: store)
        guard try merged(declared, into: recorded, refusingForgotten: true) != recorded, !store.options.readOnly else {
            return
        }
        let written = try store.writeLMDB { txn in
            try record(declared, refusingForgotten: true, in: txn, meta: meta)
        }
        guard let written else { return }
        store.logger.notice(
            "recorded key sets",
            metadata: [
                "collection": "\(collection)", "type": "\(written.type)", "current": "\(written.current)",
                "versions": "\(written.versions.keys.sorted().joined(separator: ","))",
            ])
    }

    /// Merges `incoming` into the entry recorded in `txn` and writes the result there when it
    /// differs; returns what it wrote, or `nil` when the registry held it all already.
    ///
    /// - Throws: what ``merged(_:into:refusingForgotten:)`` throws; nothing is written then.
    static func record(
        _ incoming: CollectionSchema, refusingForgotten: Bool, in txn: borrowing LMDB.WriteTransaction, meta: Database
    ) throws -> RegistryEntry? {
        let key = key(incoming.name)
        let recorded = try txn.withValue(forKey: key, in: meta) { try decode($0, collection: incoming.name) }
        let entry = try merged(incoming, into: recorded, refusingForgotten: refusingForgotten)
        guard entry != recorded else { return nil }
        try txn.put(try CBOREncoder(deterministic: true).encode(entry), forKey: key, in: meta)
        return entry
    }

    /// The entry that records both `recorded` and `incoming`: every recorded version stays, new
    /// versions, nested models and enum aliases are added, the current version is the higher one.
    ///
    /// - Parameter refusingForgotten: refuse `incoming` when it lacks a recorded version at or
    ///   below its current one (a model's code must still read those records); a version above it
    ///   was written by newer code (a rollback) and is kept either way. A dump's schema may lack
    ///   versions the store records; they are kept.
    /// - Throws: ``HoardError/keySetChanged(type:collection:version:differences:)`` when a recorded
    ///   version (of the model or of a nested one) has other key names, or an enum other aliases;
    ///   ``HoardError/keyKindChanged(type:collection:recorded:now:)`` when the ID kinds differ.
    static func merged(
        _ incoming: CollectionSchema, into recorded: RegistryEntry?, refusingForgotten: Bool
    ) throws -> RegistryEntry {
        let (type, collection) = (incoming.type, incoming.name)
        var entry = recorded ?? RegistryEntry(type: type, current: incoming.currentVersion, versions: [:])
        if let old = recorded?.key, let new = incoming.keyKind?.rawValue, old != new {
            throw HoardError.keyKindChanged(type: type, collection: collection, recorded: old, now: new)
        }
        entry.key = incoming.keyKind?.rawValue ?? recorded?.key
        for (version, names) in (recorded?.versions ?? [:]).sorted(by: { $0.key < $1.key }) {
            guard let number = Int(version), let now = incoming.versions[number] else {
                if !refusingForgotten || (Int(version) ?? 0) > incoming.currentVersion { continue }
                throw HoardError.keySetChanged(
                    type: type, collection: collection, version: Int(version) ?? 0,
                    differences: [
                        "version \(version) was recorded but the code no longer declares it; its records could not be read"
                    ]
                )
            }
            let differences = describeDifferences(recorded: names, now: now)
            if !differences.isEmpty {
                throw HoardError.keySetChanged(
                    type: type, collection: collection, version: number, differences: differences)
            }
        }
        for (version, names) in incoming.versions where entry.versions[String(version)] == nil {
            entry.versions[String(version)] = names
        }
        entry.nested = try merge(
            nested: incoming.nested, recorded: recorded?.nested ?? [:], type: type, collection: collection)
        entry.enums = try merge(
            enums: incoming.enums, recorded: recorded?.enums ?? [:], type: type, collection: collection)
        entry.current = max(entry.current, incoming.currentVersion)
        entry.type = type
        return entry
    }

    /// Checks the nested models' key sets (`now`, from the code or a dump) against the recorded
    /// ones, as ``check(_:collection:keyKind:in:)`` does the model's own; returns what to record
    /// (`nil` when there is nothing).
    ///
    /// Refused: other key names for a recorded version of a nested type, and an outer version
    /// that would now read a nested type with another version than its records were written with.
    /// A path recorded but no longer nested is kept and not checked.
    static func merge(
        nested now: [NestedKeySets], recorded: [String: RegistryEntry.NestedEntry], type: String, collection: String
    ) throws -> [String: RegistryEntry.NestedEntry]? {
        var result = recorded
        for nested in now {
            let place = "\(nested.type) at '\(nested.path)' in \(type)"
            var entry = recorded[nested.path] ?? RegistryEntry.NestedEntry(type: nested.type, versions: [:], used: [:])
            for (outer, version) in entry.used.sorted(by: { $0.key < $1.key }) {
                guard let number = Int(outer), let today = nested.versionUsed[number], today != version else {
                    continue
                }
                throw HoardError.keySetChanged(
                    type: place, collection: collection, version: version,
                    differences: [
                        "records of \(type)'s version \(outer) hold its version \(version), the code would read them with its version \(today); "
                            + "number a nested type's new version above every version of the outer model in use"
                    ])
            }
            for (version, names) in entry.versions.sorted(by: { $0.key < $1.key }) {
                guard let number = Int(version), let today = nested.keyNames[number] else { continue }
                let differences = describeDifferences(recorded: names, now: today)
                if !differences.isEmpty {
                    throw HoardError.keySetChanged(
                        type: place, collection: collection, version: number, differences: differences)
                }
            }
            for (outer, version) in nested.versionUsed where entry.used[String(outer)] == nil {
                entry.used[String(outer)] = version
            }
            for (version, names) in nested.keyNames where entry.versions[String(version)] == nil {
                entry.versions[String(version)] = names
            }
            entry.type = nested.type
            result[nested.path] = entry
        }
        return result.isEmpty ? nil : result
    }

    /// Checks the enums' aliases (`now`, from the code or a dump) against the recorded ones: the
    /// raw values a recorded version writes never change ("none" is recorded too: an alias added
    /// later could take over another case's raw value). Returns what to record (`nil`: no enums).
    static func merge(
        enums now: [StoredEnumAliases], recorded: [String: RegistryEntry.EnumEntry], type: String, collection: String
    ) throws -> [String: RegistryEntry.EnumEntry]? {
        var result = recorded
        for enumeration in now {
            var entry = recorded[enumeration.path] ?? RegistryEntry.EnumEntry(type: enumeration.type, aliases: [:])
            for (outer, aliases) in entry.aliases.sorted(by: { $0.key < $1.key }) {
                guard let number = Int(outer), let today = enumeration.aliases[number] else { continue }
                let differences = describeDifferences(recorded: aliases, now: today, item: "case", value: "raw value")
                if !differences.isEmpty {
                    throw HoardError.keySetChanged(
                        type: "\(enumeration.type) at '\(enumeration.path)' in \(type)", collection: collection,
                        version: number, differences: differences
                    )
                }
            }
            for (outer, aliases) in enumeration.aliases where entry.aliases[String(outer)] == nil {
                entry.aliases[String(outer)] = aliases
            }
            entry.type = enumeration.type
            result[enumeration.path] = entry
        }
        return result.isEmpty ? nil : result
    }

}
