internal import LMDB

extension Store {
    /// The tag index of `collection`, or `nil` when no record of the store is tagged (then a write
    /// that removes records has no entries to remove: one `mdb_stat`, no look-up).
    @inline(__always)
    func tagIndex<Access>(of collection: String, in txn: borrowing Transaction<Access>) throws -> TagIndex? {
        guard let tags, try txn.count(in: tags) > 0 else { return nil }
        return TagIndex(database: tags, collection: collection, maxKeySize: environment.maxKeySize)
    }

    /// Prepares `txn` for a write that tags records: the store's first tagged record makes it
    /// format 2 in the same transaction, so that code from before tags, which would leave the
    /// index behind its records, refuses the store.
    func prepareTagging(in txn: borrowing WriteTransaction) throws {
        guard let tags else { throw HoardError.notAHoardStore(path: path, found: []) }
        if try txn.count(in: tags) == 0 {
            let meta = try requireMeta()
            let formatKey = Array("format".utf8)
            let format = try txn.value(forKey: formatKey, in: meta).flatMap { Int(String(decoding: $0, as: UTF8.self)) }
            if (format ?? 0) < Self.taggedFormat {
                try txn.put(Array(String(Self.taggedFormat).utf8), forKey: formatKey, in: meta)
            }
        }
    }
}

// For tools that read a store without its model types (the `hoard` CLI).
extension Store {
    /// The format the store records: 1, or 2 once a record has been tagged (0 for a read-only
    /// store opened before anything was written).
    ///
    /// - Throws: `LMDBError` when LMDB fails.
    public func recordedFormat() throws -> Int {
        guard let meta else { return 0 }
        return try environment.read { txn in
            try txn.value(forKey: Array("format".utf8), in: meta).flatMap { Int(String(decoding: $0, as: UTF8.self)) }
        } ?? 0
    }

    /// The tags of the record under `key` in `collection`, sorted by their UTF-8 bytes; empty when it has none.
    ///
    /// - Throws: `LMDBError` when LMDB fails.
    public func tags(ofKey key: [UInt8], in collection: String) throws -> [String] {
        try environment.read { txn in
            try tagIndex(of: collection, in: txn)?.tags(of: key, in: txn)?.map { String(decoding: $0, as: UTF8.self) }
        } ?? []
    }

    /// How many records of `collection` carry each tag, by tag in the order of their UTF-8 bytes.
    ///
    /// - Throws: `LMDBError` when LMDB fails.
    public func tagCounts(in collection: String) throws -> [(tag: String, records: Int)] {
        try environment.read { txn in try tagIndex(of: collection, in: txn)?.counts(in: txn) } ?? []
    }

    /// Where the tag index of `collection` disagrees with its records, one sentence each (at most
    /// `limit`): entries of a record that is gone, a record's tags missing from a tag's entries or
    /// the other way round, entries that are not a list of tags. Empty when they agree.
    ///
    /// - Throws: `LMDBError` when LMDB fails.
    public func tagIndexProblems(in collection: String, limit: Int = 20) throws -> [String] {
        guard let records = try recordDatabase(of: collection) else { return [] }
        let keyKind = try schema(of: collection).map { try self.keyKind(of: $0) } ?? .custom
        return try environment.read { txn in
            try tagIndex(of: collection, in: txn)?.problems(records: records, keyKind: keyKind, in: txn, limit: limit)
        } ?? []
    }
}
