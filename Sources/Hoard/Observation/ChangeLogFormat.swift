internal import LMDB

/// The change log (docs/FORMAT.md): the database `hoard.changes`, one entry per write
/// transaction, keyed by its id (8 bytes, big-endian), holding the records it changed, written
/// in that transaction. Kept for the last N transactions (``Store/Options/changeLog``).
///
/// An entry's value is a format byte (1), then per change: the kind (one byte: 1 stored,
/// 2 deleted, 3 evicted, 4 purged, 5 expired, 255 the collection emptied), the collection's name
/// (a two-byte big-endian length, then UTF-8) and the key (a two-byte big-endian length, then
/// the bytes; empty for 255).
enum ChangeLogFormat {
    static let databaseName = "hoard.changes"
    static let format: UInt8 = 1

    static func key(_ transaction: Int) -> [UInt8] {
        withUnsafeBytes(of: UInt64(transaction).bigEndian) { Array($0) }
    }

    static func transaction(of key: UnsafeRawBufferPointer) -> Int? {
        guard key.count == 8 else { return nil }
        return Int(truncatingIfNeeded: key.reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
    }

    /// Writes `journal` as the entry of transaction `id`, and removes the entries older than the
    /// last `keeping` transactions.
    static func write(
        _ journal: ChangeJournal, transaction id: Int, keeping: Int, in log: Database,
        txn: borrowing LMDB.WriteTransaction
    ) throws {
        var value: [UInt8] = [format]
        journal.forEachBatch { collection, batch in
            let name = Array(collection.name.utf8)
            for index in batch.entries.indices {
                value.append(batch.entries[index].kind.rawValue)
                name.withUnsafeBytes { append($0, to: &value) }
                batch.keys.withBytes(in: batch.keyRange(index)) { append($0, to: &value) }
            }
        }
        try txn.put(value, forKey: key(id), in: log)
        let cutoff = id - keeping
        guard cutoff > 0 else { return }
        try txn.withCursor(in: log) { cursor in
            while let first = try cursor.first(), let old = transaction(of: first.key), old <= cutoff {
                try cursor.deleteCurrent()
            }
        }
    }

    private static func append(_ bytes: UnsafeRawBufferPointer, to value: inout [UInt8]) {
        let count = min(bytes.count, Int(UInt16.max))
        value.append(UInt8(count >> 8))
        value.append(UInt8(count & 0xFF))
        value.append(contentsOf: bytes.prefix(count))
    }

    /// The changes of entry `value` (transaction `id`), per collection.
    static func batches(_ value: UnsafeRawBufferPointer, transaction id: Int) throws -> [(String, RawChanges)] {
        guard value.first == format else {
            throw HoardError.observation(
                reason:
                    "the change log entry of transaction \(id) has format \(value.first.map(String.init) ?? "none"), not \(format)"
            )
        }
        var batches: [String: RawChanges] = [:]
        var order: [String] = []
        var offset = 1
        func field() throws -> UnsafeRawBufferPointer {
            guard offset + 2 <= value.count else { throw truncated(id) }
            let count = Int(value[offset]) << 8 | Int(value[offset + 1])
            guard offset + 2 + count <= value.count else { throw truncated(id) }
            defer { offset += 2 + count }
            return UnsafeRawBufferPointer(rebasing: value[(offset + 2)..<(offset + 2 + count)])
        }
        while offset < value.count {
            // `unknown` lives only in a journal: the log never holds it (a log keeps every key).
            guard let kind = RecordedKind(rawValue: value[offset]), kind != .unknown else {
                throw HoardError.observation(
                    reason: "the change log entry of transaction \(id) has an unknown change kind \(value[offset])")
            }
            offset += 1
            let name = String(decoding: try field(), as: UTF8.self)
            let key = try field()
            if batches[name] == nil {
                batches[name] = RawChanges(first: id, last: id, origin: .otherProcess)
                order.append(name)
            }
            batches[name]?.append(kind, key: key)
        }
        return order.compactMap { name in batches[name].map { (name, $0) } }
    }

    private static func truncated(_ id: Int) -> HoardError {
        .observation(reason: "the change log entry of transaction \(id) is truncated")
    }
}
