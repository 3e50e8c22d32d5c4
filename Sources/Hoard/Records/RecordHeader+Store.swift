internal import LMDB

extension RecordHeader {
    /// Stores the record of this header and `payload` under `key` in `database`: the one way the
    /// store writes a record (put, migrations, synchronize). It is written straight into the
    /// space LMDB reserves for it, with no whole record assembled first.
    func store(
        payload: UnsafeRawBufferPointer, forKey key: UnsafeRawBufferPointer, in database: Database,
        options: PutOptions = [],
        txn: borrowing WriteTransaction
    ) throws {
        try txn.reserve(Self.size + payload.count, forKey: key, in: database, options: options) { record in
            write(payload: payload, into: record)
        }
    }

    /// Rewrites the header of the record under `key` in `database`, keeping its version and
    /// payload: the one way the store re-stamps a record (a renewal, a replica's keep-as-expired).
    /// `header` gets the stored write time and expiry and returns the new header's times, or
    /// `nil` to leave the record as it is. Returns `nil` when there is no valid record (a damaged
    /// one is not given a fresh checksum), `false` when `header` declined, `true` when rewritten.
    ///
    /// One search: a cursor the transaction keeps finds the record and replaces it in place. The
    /// new record is made on the stack (when small) before the write, since the bytes a read
    /// returns are LMDB's only until the next write.
    static func rewrite(
        forKey key: UnsafeRawBufferPointer, in database: Database, txn: borrowing WriteTransaction,
        header: (_ writtenAt: Int64, _ expiresAt: Int64?) -> RecordHeader?
    ) throws -> Bool? {
        try txn.withKeptCursor(in: database) { cursor in
            guard let record = try cursor.seek(exactly: key)?.value else { return nil }
            // The stored times are read before the record is checked: `renew` checks it.
            guard let new = header(peekWrittenAt(record) ?? 0, peekExpiry(record)) else {
                return (try? parse(record)) == nil ? nil : false
            }
            return try withUnsafeTemporaryAllocation(byteCount: record.count, alignment: 1) { renewed in
                guard new.renew(record, into: renewed) else { return nil }
                try cursor.replaceCurrent(key: key, reserving: renewed.count) {
                    $0.copyMemory(from: UnsafeRawBufferPointer(renewed))
                }
                return true
            }
        }
    }
}
