public import LMDB
internal import CBOR

// MARK: - Untyped access, for tools

extension Store {
    /// The names of the store's collections, sorted.
    public func collectionNames() throws -> [String] {
        let main = try environment.openDatabase(nil)
        let prefix = Array(Self.collectionPrefix.utf8)
        return try environment.read { txn in
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
    public func schema(of collection: String) throws -> CollectionSchema? {
        try Registry.read(collection, in: self).map { CollectionSchema(name: collection, entry: $0) }
    }

    /// The LMDB database holding `collection`'s records, or `nil` when there is none (and
    /// `create` is false). Its values are records as docs/FORMAT.md describes them.
    public func recordDatabase(of collection: String, create: Bool = false) throws -> Database? {
        do {
            return try environment.openDatabase(Self.collectionPrefix + collection, create: create && !options.readOnly)
        } catch let error as LMDBError where error.kind == .notFound {
            return nil
        }
    }

    /// Records `schema` in the registry (for restoring a dump), in `txn`: checked against what
    /// the store records and merged with it, as opening a collection does (a dump may lack
    /// versions the store records; they are kept).
    ///
    /// - Throws: ``HoardError/keySetChanged(type:collection:version:differences:)`` when a version
    ///   the store already records (of the model or of a nested one) has other key names, ``HoardError/keyKindChanged(type:collection:recorded:now:)``
    ///   when the ID kinds differ.
    public func record(_ schema: CollectionSchema, in txn: borrowing WriteTransaction) throws {
        guard let meta else { return }
        _ = try Registry.record(schema, refusingForgotten: false, in: txn, meta: meta)
    }
}
