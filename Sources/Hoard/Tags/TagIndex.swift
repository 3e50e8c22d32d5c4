@_spi(_Unicode) internal import Swift
package import LMDB

// Tags: names a record carries besides its key ("team:7", "catalog"), so that every record of a
// group can be invalidated at once. The index is one store-wide database, `hoard.tags`
// (docs/FORMAT.md), keyed by collection name and written by the RecordWriter in the same
// transaction as the records, so that it never says more or less than they do. Tags compare in
// Unicode's NFC, as Swift compares strings, and are stored in NFC's bytes.

/// The tags of one collection's records, in the store's `hoard.tags` database.
package struct TagIndex {
    let database: Database
    let collection: String
    /// The entries of a record's tags: `0x00`, the collection, the record's key -> the tags.
    private let recordPrefix: [UInt8]
    /// The entries of a tag's records: `0x01`, the collection, the tag -> nothing.
    private let tagPrefix: [UInt8]

    /// The longest key LMDB takes: a record's key and a tag must fit in one entry together.
    private let maxKeySize: Int

    init(database: Database, collection: String, maxKeySize: Int) {
        self.database = database
        self.collection = collection
        self.maxKeySize = maxKeySize
        let name = Self.lengthPrefixed(Array(collection.utf8))
        recordPrefix = [0x00] + name
        tagPrefix = [0x01] + name
    }

    /// The longest tag, in UTF-8 bytes.
    static let maxTagLength = 128

    static func lengthPrefixed(_ bytes: [UInt8]) -> [UInt8] {
        [UInt8(truncatingIfNeeded: bytes.count >> 8), UInt8(truncatingIfNeeded: bytes.count)] + bytes
    }

    func recordEntry(_ key: some Collection<UInt8>) -> [UInt8] { recordPrefix + key }

    /// The prefix of the entries of `tag`'s records.
    func entries(of tag: [UInt8]) -> [UInt8] { tagPrefix + Self.lengthPrefixed(tag) }

    /// The tags as a record's entry keeps them: each tag's UTF-8 length as two bytes big-endian, then its UTF-8.
    static func encode(_ tags: [[UInt8]]) -> [UInt8] { tags.flatMap(lengthPrefixed) }

    /// The tags of a record's entry, or `nil` for bytes that are not a list of tags.
    static func decode(_ bytes: some Collection<UInt8>) -> [[UInt8]]? {
        let bytes = Array(bytes)
        var tags: [[UInt8]] = []
        var index = 0
        while index < bytes.count {
            guard index + 2 <= bytes.count else { return nil }
            let length = Int(bytes[index]) << 8 | Int(bytes[index + 1])
            guard length > 0, index + 2 + length <= bytes.count else { return nil }
            tags.append(Array(bytes[(index + 2)..<(index + 2 + length)]))
            index += 2 + length
        }
        return tags
    }

    /// Makes `key`'s tags `tags` (sorted, without repeats: ``normalized(_:collection:)``),
    /// removing the entries of the ones it had.
    ///
    /// - Throws: ``HoardError/invalidTag(collection:tag:reason:)`` when a tag's entry for this key
    ///   would pass LMDB's key size; ``HoardError/storage(_:)`` when the storage fails.
    func set(_ tags: [[UInt8]], for key: some Collection<UInt8>, in txn: borrowing LMDB.WriteTransaction) throws {
        for tag in tags where entries(of: tag).count + key.count > maxKeySize {
            throw HoardError.invalidTag(
                collection: collection, tag: String(decoding: tag, as: UTF8.self),
                reason:
                    "with a record key of \(key.count) bytes its index entry would have \(entries(of: tag).count + key.count) bytes, more than the \(maxKeySize) LMDB allows"
            )
        }
        let entry = recordEntry(key)
        let encoded = Self.encode(tags)
        // Most puts give a record the tags it has: compared as bytes, without decoding.
        // `nil`: no entry; `.some(nil)`: the entry holds these tags already.
        let stored: [[UInt8]]?? = try txn.withValue(forKey: entry, in: database) { bytes in
            bytes.elementsEqual(encoded) ? nil : Self.decode(bytes) ?? []
        }
        let old: [[UInt8]]
        switch stored {
        case nil:
            if tags.isEmpty { return }
            old = []
        case .some(nil): return
        case .some(let decoded?): old = decoded
        }
        for tag in old where !tags.contains(tag) { _ = try txn.delete(entries(of: tag) + key, in: database) }
        if tags.isEmpty {
            _ = try txn.delete(entry, in: database)
            return
        }
        try txn.put(encoded, forKey: entry, in: database)
        for tag in tags where !old.contains(tag) { try txn.put([], forKey: entries(of: tag) + key, in: database) }
    }

    /// Removes `key`'s tags, when it has any (its record is gone); the entry under `removed`,
    /// when given, is gone already.
    func remove(_ key: some Collection<UInt8>, in txn: borrowing LMDB.WriteTransaction, removed: [UInt8]? = nil) throws
    {
        let entry = recordEntry(key)
        guard let old = try txn.value(forKey: entry, in: database) else { return }
        for tag in Self.decode(old) ?? [] where tag != removed {
            _ = try txn.delete(entries(of: tag) + key, in: database)
        }
        _ = try txn.delete(entry, in: database)
    }

    /// Removes the entries of `tag`'s records, in one pass of a cursor, and returns their keys in
    /// key order (their records are about to go: ``remove(_:in:removed:)`` with `tag`).
    func take(tagged tag: [UInt8], in txn: borrowing LMDB.WriteTransaction) throws -> [[UInt8]] {
        let prefix = entries(of: tag)
        var keys: [[UInt8]] = []
        try txn.withCursor(in: database) { cursor in
            var entry = try cursor.seek(atLeast: prefix)
            while let current = entry, current.key.starts(with: prefix) {
                keys.append(Array(current.key[prefix.count...]))
                try cursor.deleteCurrent()
                entry = try cursor.current()
            }
        }
        return keys
    }

    /// The keys of the records that carry `tag`, in key order.
    func keys<Access>(tagged tag: [UInt8], in txn: borrowing LMDB.Transaction<Access>) throws -> [[UInt8]] {
        let prefix = entries(of: tag)
        var keys: [[UInt8]] = []
        try txn.forEach(in: database, range: .prefix(prefix)) { key, _ in
            keys.append(Array(key[prefix.count...]))
            return .next
        }
        return keys
    }

    /// The tags of `key`'s record, or `nil` when it has none (or its entry is damaged).
    package func tags<Access>(
        of key: some Collection<UInt8>, in txn: borrowing LMDB.Transaction<Access>
    ) throws -> [[UInt8]]? {
        try txn.value(forKey: recordEntry(key), in: database).flatMap(Self.decode)
    }

    /// Removes every entry of the collection (its records are all gone).
    func removeAll(in txn: borrowing LMDB.WriteTransaction) throws {
        for prefix in [recordPrefix, tagPrefix] {
            var found: [[UInt8]] = []
            try txn.forEach(in: database, range: .prefix(prefix)) { key, _ in
                found.append(Array(key))
                return .next
            }
            for key in found { _ = try txn.delete(key, in: database) }
        }
    }

    /// How many records carry each tag.
    package func counts<Access>(in txn: borrowing LMDB.Transaction<Access>) throws -> [(tag: String, records: Int)] {
        var counts: [(tag: String, records: Int)] = []
        try txn.forEach(in: database, range: .prefix(tagPrefix)) { key, _ in
            let rest = key[tagPrefix.count...]
            guard rest.count >= 2 else { return .next }
            let length = Int(rest[rest.startIndex]) << 8 | Int(rest[rest.startIndex + 1])
            guard rest.count >= 2 + length else { return .next }
            let tag = String(decoding: rest[(rest.startIndex + 2)..<(rest.startIndex + 2 + length)], as: UTF8.self)
            if counts.last?.tag == tag {
                counts[counts.count - 1].records += 1
            } else {
                counts.append((tag, 1))
            }
            return .next
        }
        return counts
    }

    /// The entries of the collection that disagree with its records: a record's entry whose
    /// record is gone or whose tags are not a list, and a tag's entry that the record's entry
    /// does not list (or the other way round). For `hoard verify`.
    package func problems<Access>(
        records: Database, keyKind: KeyKind, in txn: borrowing LMDB.Transaction<Access>, limit: Int = 20
    ) throws -> [String] {
        var problems: [String] = []
        var listed: Set<[UInt8]> = []
        var recordEntries: [(key: [UInt8], value: [UInt8])] = []
        try txn.forEach(in: database, range: .prefix(recordPrefix)) { key, value in
            recordEntries.append((Array(key[recordPrefix.count...]), Array(value)))
            return .next
        }
        for (key, value) in recordEntries {
            guard let tags = Self.decode(value), !tags.isEmpty else {
                problems.append("the tags of key \(StoredKey(key, kind: keyKind)) are not a list of tags")
                continue
            }
            if try !txn.contains(key, in: records) {
                problems.append("key \(StoredKey(key, kind: keyKind)) has tags but no record")
            }
            for tag in tags {
                listed.insert(entries(of: tag) + key)
                if try !txn.contains(entries(of: tag) + key, in: database) {
                    problems.append(
                        "key \(StoredKey(key, kind: keyKind)) lists tag \(String(decoding: tag, as: UTF8.self)), whose entries lack it"
                    )
                }
            }
        }
        try txn.forEach(in: database, range: .prefix(tagPrefix)) { key, _ in
            if !listed.contains(Array(key)) {
                problems.append(
                    "a tag's entry \(StoredKey(Array(key[tagPrefix.count...]), kind: keyKind)) names a record that does not list it"
                )
            }
            return .next
        }
        return Array(problems.prefix(limit))
    }
}

extension TagIndex {
    /// The bytes the index keeps `tag` as: the UTF-8 of its NFC form.
    static func bytes(of tag: String) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(tag.utf8.count)
        tag._withNFCCodeUnits { bytes.append($0) }
        return bytes
    }

    /// `tags` as the index keeps them: NFC's UTF-8, sorted, without repeats.
    ///
    /// - Throws: ``HoardError/invalidTag(collection:tag:reason:)`` for an empty tag or one longer
    ///   than ``maxTagLength`` bytes (in NFC).
    static func normalized(_ tags: some Sequence<String>, collection: String) throws -> [[UInt8]] {
        var bytes: [[UInt8]] = []
        for tag in tags {
            let utf8 = Self.bytes(of: tag)
            guard !utf8.isEmpty, utf8.count <= maxTagLength else {
                throw HoardError.invalidTag(
                    collection: collection, tag: tag,
                    reason: utf8.isEmpty
                        ? "a tag cannot be empty" : "it has \(utf8.count) bytes, more than \(maxTagLength)")
            }
            bytes.append(utf8)
        }
        // A few tags a record: sorted in place, repeats dropped as neighbours.
        bytes.sort { $0.lexicographicallyPrecedes($1) }
        var unique: [[UInt8]] = []
        unique.reserveCapacity(bytes.count)
        for tag in bytes where unique.last != tag { unique.append(tag) }
        return unique
    }
}
