@_spi(LMDB) package import Hoard
import LMDB

// For tools that read a store without its model types (the `hoard` CLI).
extension Store {
    /// The store format the store records (``Store/formatVersion``; 0 for a read-only store
    /// opened before anything was written).
    ///
    /// - Throws: ``HoardError/storage(_:)`` when the storage fails.
    package func recordedFormat() throws -> Int {
        guard let meta else { return 0 }
        return try readLMDB { txn in
            try txn.value(forKey: Array("format".utf8), in: meta).flatMap { Int(String(decoding: $0, as: UTF8.self)) }
        } ?? 0
    }

    /// The tags of the record under `key` in `collection`, sorted by their UTF-8 bytes; empty when it has none.
    ///
    /// - Throws: ``HoardError/storage(_:)`` when the storage fails.
    package func tags(ofKey key: [UInt8], in collection: String) throws -> [String] {
        try readLMDB { txn in
            try tagIndex(of: collection, in: txn)?.tags(of: key, in: txn)?.map { String(decoding: $0, as: UTF8.self) }
        } ?? []
    }

    /// How many records of `collection` carry each tag, by tag in the order of their UTF-8 bytes.
    ///
    /// - Throws: ``HoardError/storage(_:)`` when the storage fails.
    package func tagCounts(in collection: String) throws -> [(tag: String, records: Int)] {
        try readLMDB { txn in try tagIndex(of: collection, in: txn)?.counts(in: txn) } ?? []
    }

    /// Where the tag index of `collection` disagrees with its records, one sentence each (at most
    /// `limit`): entries of a record that is gone, a record's tags missing from a tag's entries or
    /// the other way round, entries that are not a list of tags. Empty when they agree.
    ///
    /// - Throws: ``HoardError/storage(_:)`` when the storage fails.
    package func tagIndexProblems(in collection: String, limit: Int = 20) throws -> [String] {
        guard let records = try recordDatabase(of: collection) else { return [] }
        let keyKind = try schema(of: collection).map { try self.keyKind(of: $0) } ?? .custom
        return try readLMDB { txn in
            try tagIndex(of: collection, in: txn)?.problems(records: records, keyKind: keyKind, in: txn, limit: limit)
        } ?? []
    }
}
