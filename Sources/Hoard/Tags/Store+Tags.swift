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
}
