internal import LMDB

/// Where the invalidations of one collection are applied, without its model type: those made
/// here (``HoardCollection/invalidate(_:)-3713m`` and the others) and those another replica made
/// (``Replication/apply(_:through:bus:expecting:includingOwn:)``). One rule for what they leave,
/// so that every replica answers alike: where this process serves stale records on a failed fetch
/// (the collection's ``Freshness/staleIfError`` longer than its `staleWhileRevalidate`), the
/// records are kept, marked expired `staleWhileRevalidate` ago (served only when a fetch fails);
/// elsewhere they are removed.
struct InvalidationTarget {
    let store: Store
    let collection: String
    let database: Database
    /// Why the records go: ``RecordRemoval/invalidated`` here, ``RecordRemoval/remote`` for
    /// another replica's change.
    let reason: RecordRemoval

    /// The expiry an invalidated record is kept with, or `nil` when it is removed.
    private func keptExpiry() -> Int64? {
        guard let state = store.existingState(of: collection) else { return nil }
        let onError = state.staleIfErrorWindow.load(ordering: .relaxed)
        let revalidate = state.revalidateWindow.load(ordering: .relaxed)
        return onError > revalidate ? store.options.now() - revalidate : nil
    }

    /// Invalidates the records of `keys`, keeping the collection's capacity bookkeeping, and tells
    /// the fetches under way. `countingTag`: the call invalidates a tag made here (counted once).
    func invalidate(
        _ keys: [[UInt8]], countingTag: Bool = false, in txn: borrowing LMDB.WriteTransaction,
        result: inout ApplyResult
    ) throws {
        let expireAs = keptExpiry()
        var writer = try store.writer(of: collection, database: database, in: txn)
        for key in keys where !key.isEmpty && key.count <= store.environment.maxKeySize {
            // A record kept marked expired counts as marked also when it expired earlier already
            // (observers hear only of one rewritten).
            if let expireAs, try markExpired(key, at: expireAs, writer, in: txn) != nil {
                result.markedExpired += 1
                continue
            }
            if try writer.remove(key, reason, in: txn) { result.removed += 1 }
        }
        if countingTag { writer.countTagInvalidation() }
        try writer.finish(in: txn)
        store.replicationState.invalidations.noteRemoved(collection: collection, keys: keys)
        // A key whose last fetch failed is fetched again at its next read: the failure said
        // nothing of the value that replaced the one invalidated.
        store.existingState(of: collection)?.forgetFailedFetches(of: keys)
    }

    /// Invalidates the records that carry `tag` (NFC's UTF-8). Removed records take the tag's
    /// entries with them at once; kept ones keep them, and a later invalidation finds them again.
    func invalidate(tag: [UInt8], in txn: borrowing LMDB.WriteTransaction, result: inout ApplyResult) throws {
        store.replicationState.invalidations.noteRemoved(collection: collection, tags: [tag])
        if reason == .invalidated, keptExpiry() == nil {
            var writer = try store.writer(of: collection, database: database, in: txn)
            if let index = try store.tagIndex(of: collection, in: txn) {
                let keys = try index.take(tagged: tag, in: txn)
                for key in keys where try writer.remove(key, reason, untagging: tag, in: txn) { result.removed += 1 }
                store.replicationState.invalidations.noteRemoved(collection: collection, keys: keys)
            }
            writer.countTagInvalidation()
            return try writer.finish(in: txn)
        }
        let keys = try store.tagIndex(of: collection, in: txn)?.keys(tagged: tag, in: txn) ?? []
        try invalidate(keys, countingTag: reason == .invalidated, in: txn, result: &result)
    }

    /// Invalidates every record of the collection.
    func invalidateAll(in txn: borrowing LMDB.WriteTransaction, result: inout ApplyResult) throws {
        store.replicationState.invalidations.noteCleared(collection: collection)
        store.existingState(of: collection)?.forgetFailedFetches(of: nil)
        guard keptExpiry() != nil else {
            var writer = try store.writer(of: collection, database: database, in: txn)
            result.removed += try writer.removeAll(reason, in: txn)
            return try writer.finish(in: txn)
        }
        var keys: [[UInt8]] = []
        try txn.forEach(in: database) { key, _ in
            keys.append(Array(key))
            return .next
        }
        try invalidate(keys, in: txn, result: &result)
    }

    /// Rewrites the record under `key` with the expiry `at` (or its own, if earlier): whether it
    /// was rewritten (`false`: it expires earlier already), or `nil` when there is no readable
    /// record to keep (a damaged one is then removed by the caller).
    private func markExpired(
        _ key: [UInt8], at expiry: Int64, _ writer: RecordWriter, in txn: borrowing LMDB.WriteTransaction
    ) throws -> Bool? {
        try key.withUnsafeBytes { key in
            try writer.restamp(key, told: .expired, in: txn) { writtenAt, expiresAt in
                if let expiresAt, expiresAt <= expiry { return nil }
                return RecordHeader(version: 0, writtenAt: writtenAt, expiresAt: expiry)
            }
        }
    }
}
