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

    /// The recorded entry of `collection`, or `nil`.
    static func read(_ collection: String, in store: Store) throws -> RegistryEntry? {
        guard let meta = store.meta else { return nil }
        return try store.readLMDB { txn in
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
        let versionKeys =
            Array(entry.versions.keys)
            + (entry.nested ?? [:]).values.flatMap { Array($0.versions.keys) + Array($0.used.keys) }
            + (entry.enums ?? [:]).values.flatMap { Array($0.aliases.keys) }
        if let bad = versionKeys.first(where: { key in Int(key).map { $0 < 1 || String($0) != key } ?? true }) {
            throw HoardError.corruptRegistry(collection: collection, reason: "'\(bad)' is not a version number")
        }
        return entry
    }

    static func describeDifferences(
        recorded: [String: String], now: [String: String], item: String = "property", value: String = "key"
    ) -> [String] {
        var result: [String] = []
        for name in Set(recorded.keys).union(now.keys).sorted() {
            switch (recorded[name], now[name]) {
            case let (old?, new?) where old != new:
                result.append("\(item) '\(name)': \(value) '\(old)' recorded, '\(new)' now")
            case (nil, let new?): result.append("\(item) '\(name)' (\(value) '\(new)') added")
            case (let old?, nil): result.append("\(item) '\(name)' (\(value) '\(old)') removed")
            default: break
            }
        }
        return result
    }
}
