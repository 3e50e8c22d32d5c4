internal import LMDB
internal import VariableCoding
internal import CBOR

/// The key-set registry in the meta database: for every collection, the model type, the current
/// local version and the key names of every local version by property. Tools read a store with
/// it and no Swift types; it is also the ledger that keeps shipped key sets frozen.
struct RegistryEntry: Codable, Equatable {
    /// The Swift type name of the model.
    var type: String
    /// The highest current local version any code has opened the collection with.
    var current: Int
    /// Per local version (as text), key names by property name.
    var versions: [String: [String: String]]
    /// How IDs are encoded (a ``KeyKind`` raw value); absent in entries written before it was recorded.
    var key: String?
    /// The `VariablyCodable` models nested in the model's properties, by path ("frame",
    /// "box.corner"); absent when there are none, and in entries written before they were recorded.
    var nested: [String: NestedEntry]?

    /// The ``VariableEnum``s in the model and its nested models, by path; absent when there are
    /// none, and in entries written before they were recorded.
    var enums: [String: EnumEntry]?

    /// What a record's version means for one enum: per outer version (as text), the raw value
    /// by case for the cases that version aliases.
    struct EnumEntry: Codable, Equatable {
        var type: String
        var aliases: [String: [String: String]]
    }

    /// What a record's version means for one nested model.
    struct NestedEntry: Codable, Equatable {
        /// The nested model's Swift type name.
        var type: String
        /// Per local version of the nested type (as text): key name by property.
        var versions: [String: [String: String]]
        /// Per local version of the outer model (as text): the nested type's version coded with it.
        var used: [String: Int]
    }
}

enum Registry {
    static func key(_ collection: String) -> [UInt8] { Array("collection:\(collection)".utf8) }

    /// Checks the code's key sets against the recorded ones and records what is new.
    static func check<Model: VariablyCodable>(_ type: Model.Type, collection: String, keyKind: KeyKind, in store: Store) throws {
        guard let meta = store.meta else { return }
        let keySets = Model.keySets
        var declared: [String: [String: String]] = [:]
        for version in keySets.localVersions {
            declared[String(version)] = try keySets.keyNames(for: .local(version))
        }
        let recorded = try read(collection, in: store)
        var entry = recorded ?? RegistryEntry(type: String(describing: Model.self), current: keySets.currentVersion, versions: [:])
        if let kind = recorded?.key, kind != keyKind.rawValue {
            throw HoardError.keyKindChanged(type: String(describing: Model.self), collection: collection, recorded: kind, now: keyKind.rawValue)
        }
        entry.key = keyKind.rawValue
        for (version, names) in (recorded?.versions ?? [:]).sorted(by: { $0.key < $1.key }) {
            guard let now = declared[version] else {
                // A version above the code's current one was written by newer code (a rollback):
                // allowed, its records are reported one by one. A lower one the code should know.
                if let number = Int(version), number > keySets.currentVersion { continue }
                throw HoardError.keySetChanged(
                    type: String(describing: Model.self), collection: collection, version: Int(version) ?? 0,
                    differences: ["version \(version) was recorded but the code no longer declares it; its records could not be read"]
                )
            }
            let differences = describeDifferences(recorded: names, now: now)
            if !differences.isEmpty {
                throw HoardError.keySetChanged(type: String(describing: Model.self), collection: collection, version: Int(version) ?? 0, differences: differences)
            }
        }
        for (version, names) in declared where entry.versions[version] == nil {
            entry.versions[version] = names
        }
        entry.nested = try merge(
            nested: try keySets.nestedKeySets(), recorded: recorded?.nested ?? [:], type: String(describing: Model.self), collection: collection
        )
        entry.enums = try merge(
            enums: try keySets.enumAliases(), recorded: recorded?.enums ?? [:], type: String(describing: Model.self), collection: collection
        )
        entry.current = max(entry.current, keySets.currentVersion)
        entry.type = String(describing: Model.self)
        guard entry != recorded, !store.options.readOnly else { return }
        store.logger.notice("recorded key sets", metadata: [
            "collection": "\(collection)", "type": "\(entry.type)", "current": "\(entry.current)",
            "versions": "\(entry.versions.keys.sorted().joined(separator: ","))",
        ])
        let bytes = try CBOREncoder(deterministic: true).encode(entry)
        try store.environment.write { txn in try txn.put(bytes, forKey: key(collection), in: meta) }
    }

    /// Checks the nested models' key sets (`now`, from the code or a dump) against the recorded
    /// ones, as ``check(_:collection:keyKind:in:)`` does the model's own; returns what to record
    /// (`nil` when there is nothing).
    ///
    /// Two changes are refused: other key names for a recorded version of a nested type, and an
    /// outer version that would now be read with another version of a nested type than the one
    /// its records were written with (a nested type's new version numbered at or below an outer
    /// version already in use). A path recorded but no longer nested is kept and not checked:
    /// the model's own ledger covers its properties.
    static func merge(
        nested now: [NestedKeySets], recorded: [String: RegistryEntry.NestedEntry], type: String, collection: String
    ) throws -> [String: RegistryEntry.NestedEntry]? {
        var result = recorded
        for nested in now {
            let place = "\(nested.type) at '\(nested.path)' in \(type)"
            var entry = recorded[nested.path] ?? RegistryEntry.NestedEntry(type: nested.type, versions: [:], used: [:])
            for (outer, version) in entry.used.sorted(by: { $0.key < $1.key }) {
                guard let number = Int(outer), let today = nested.versionUsed[number], today != version else { continue }
                throw HoardError.keySetChanged(type: place, collection: collection, version: version, differences: [
                    "records of \(type)'s version \(outer) hold its version \(version), the code would read them with its version \(today); "
                        + "number a nested type's new version above every version of the outer model in use",
                ])
            }
            for (version, names) in entry.versions.sorted(by: { $0.key < $1.key }) {
                guard let number = Int(version), let today = nested.keyNames[number] else { continue }
                let differences = describeDifferences(recorded: names, now: today)
                if !differences.isEmpty {
                    throw HoardError.keySetChanged(type: place, collection: collection, version: number, differences: differences)
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

    /// Checks the enums' aliases (`now`, from the code or a dump) against the recorded ones:
    /// the raw values a recorded version writes never change (an alias added, changed or
    /// removed would read its stored records differently; "none" is recorded too, since an
    /// alias added later can take over another case's raw value). Returns what to record (`nil`
    /// when there are no enums).
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
                        type: "\(enumeration.type) at '\(enumeration.path)' in \(type)", collection: collection, version: number, differences: differences
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

    /// The recorded entry of `collection`, or `nil`.
    static func read(_ collection: String, in store: Store) throws -> RegistryEntry? {
        guard let meta = store.meta else { return nil }
        return try store.environment.read { txn in
            try txn.withValue(forKey: key(collection), in: meta) { try decode($0, collection: collection) }
        }
    }

    /// A stored entry's bytes as an entry; damage becomes ``HoardError/corruptRegistry(collection:reason:)``.
    static func decode(_ bytes: UnsafeRawBufferPointer, collection: String) throws -> RegistryEntry {
        let entry: RegistryEntry
        do {
            entry = try CBORDecoder().decode(RegistryEntry.self, from: bytes)
        } catch {
            throw HoardError.corruptRegistry(collection: collection, reason: "\(error)")
        }
        // Versions are keyed by their decimal text; "01" beside "1" would make one version two.
        let versionKeys = Array(entry.versions.keys) + (entry.nested ?? [:]).values.flatMap { Array($0.versions.keys) + Array($0.used.keys) }
            + (entry.enums ?? [:]).values.flatMap { Array($0.aliases.keys) }
        if let bad = versionKeys.first(where: { key in Int(key).map { $0 < 1 || String($0) != key } ?? true }) {
            throw HoardError.corruptRegistry(collection: collection, reason: "'\(bad)' is not a version number")
        }
        return entry
    }

    static func describeDifferences(recorded: [String: String], now: [String: String], item: String = "property", value: String = "key") -> [String] {
        var result: [String] = []
        for name in Set(recorded.keys).union(now.keys).sorted() {
            switch (recorded[name], now[name]) {
            case let (old?, new?) where old != new: result.append("\(item) '\(name)': \(value) '\(old)' recorded, '\(new)' now")
            case (nil, let new?): result.append("\(item) '\(name)' (\(value) '\(new)') added")
            case (let old?, nil): result.append("\(item) '\(name)' (\(value) '\(old)') removed")
            default: break
            }
        }
        return result
    }
}
