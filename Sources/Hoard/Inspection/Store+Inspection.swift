public import LMDB
internal import CBOR

// MARK: - Untyped access, for tools

extension Store {
    /// The names of the store's collections, sorted.
    ///
    /// - Throws: ``HoardError/storage(_:)`` when the storage fails.
    package func collectionNames() throws -> [String] {
        let main = try environment.openDatabase(nil)
        let prefix = Array(Self.collectionPrefix.utf8)
        return try readLMDB { txn in
            var names: [String] = []
            try txn.forEach(in: main, range: .prefix(prefix)) { key, _ in
                names.append(String(decoding: key.dropFirst(prefix.count), as: UTF8.self))
                return .next
            }
            return names
        }
    }

    /// The registry's description of `collection`, or `nil` when it has none.
    ///
    /// - Throws: ``HoardError/corruptRegistry(collection:reason:)`` when the entry is damaged.
    package func schema(of collection: String) throws -> CollectionSchema? {
        try Registry.read(collection, in: self).map { CollectionSchema(name: collection, entry: $0) }
    }

    /// Whether the store has been created: `false` only for an empty LMDB environment opened
    /// read-only, which holds no Hoard store yet (nor anything else).
    package var isInitialized: Bool { meta != nil }

    /// How `schema`'s collection encodes its IDs: as the registry records it, or, for an entry
    /// written before Hoard recorded it, as its first stored key shows (a string key starts
    /// with 0x01, `Int` keys have 8 bytes, UUIDs 16; anything else is read as ``KeyKind/custom``).
    ///
    /// - Throws: ``HoardError/storage(_:)`` when the storage fails.
    package func keyKind(of schema: CollectionSchema) throws -> KeyKind {
        if let kind = schema.keyKind { return kind }
        guard let database = try recordDatabase(of: schema.name) else { return .custom }
        let first = try readLMDB { txn in try txn.entries(in: database, limit: 1).first?.key }
        return switch first {
        case let key? where KeyKind.string.accepts(key): .string
        case let key? where key.count == 8: .int
        case let key? where key.count == 16: .uuid
        default: .custom
        }
    }

    /// The LMDB database holding `collection`'s records, or `nil` when there is none (and
    /// `create` is false). Its values are records as docs/FORMAT.md describes them.
    ///
    /// - Throws: ``HoardError/storage(_:)`` when the storage fails (the store has no room for another database, say).
    @_spi(LMDB) public func recordDatabase(of collection: String, create: Bool = false) throws -> Database? {
        do {
            return try environment.openDatabase(Self.collectionPrefix + collection, create: create && !options.readOnly)
        } catch let error as LMDBError where error.kind == .notFound {
            return nil
        } catch let error as LMDBError {
            throw HoardError.storage(StorageFailure(error))
        }
    }

    /// Records `schema` in the registry (for restoring a dump), in `txn`: checked against what
    /// the store records and merged with it, as opening a collection does (a dump may lack
    /// versions the store records; they are kept).
    ///
    /// - Throws: ``HoardError/keySetChanged(type:collection:version:differences:)`` when a version
    ///   the store already records (of the model or of a nested one) has other key names, ``HoardError/keyKindChanged(type:collection:recorded:now:)``
    ///   when the ID kinds differ.
    package func record(_ schema: CollectionSchema, in txn: borrowing LMDB.WriteTransaction) throws {
        guard let meta else { return }
        _ = try Registry.record(schema, refusingForgotten: false, in: txn, meta: meta)
    }
}
