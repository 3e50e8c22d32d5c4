package import LMDB

extension Store {
    /// The tag index of `collection`, or `nil` when no record of the store is tagged (then a write
    /// that removes records has no entries to remove: one `mdb_stat`, no look-up).
    @inline(__always)
    package func tagIndex<Access>(of collection: String, in txn: borrowing LMDB.Transaction<Access>) throws -> TagIndex?
    {
        guard let tags, try txn.count(in: tags) > 0 else { return nil }
        return TagIndex(database: tags, collection: collection, maxKeySize: environment.maxKeySize)
    }

    /// Prepares `txn` for a write that tags records: the store's first tagged record makes it
    /// format 2 in the same transaction, so that code from before tags, which would leave the
    /// index behind its records, refuses the store.
    func prepareTagging(in txn: borrowing LMDB.WriteTransaction) throws {
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
