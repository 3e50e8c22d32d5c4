internal import LMDB

// Reading a collection's tags (a put's `tags:` sets them; invalidation by tag is in
// HoardCollection+Invalidate.swift).

extension HoardCollection {
    /// The tags of the record of `id`, sorted by their UTF-8 bytes; empty when it has none (or there is no record).
    ///
    /// - Throws: ``HoardError/invalidID(collection:reason:)``; ``HoardError/storage(_:)`` when the storage fails.
    public func tags(of id: Model.ID) throws -> [String] {
        let key = try keyBytes(id)
        return try store.readLMDB { txn in
            try store.tagIndex(of: name, in: txn)?.tags(of: key, in: txn)?.map { String(decoding: $0, as: UTF8.self) }
        } ?? []
    }

    /// The IDs of the records that carry `tag`, in key order.
    ///
    /// - Throws: ``HoardError/storage(_:)`` when the storage fails.
    public func ids(taggedWith tag: String) throws -> [Model.ID] {
        try store.readLMDB { txn in
            try store.tagIndex(of: name, in: txn)?.keys(tagged: TagIndex.bytes(of: tag), in: txn).compactMap {
                Model.ID(keyBytes: $0)
            }
        } ?? []
    }
}
