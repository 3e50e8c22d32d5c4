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
}
