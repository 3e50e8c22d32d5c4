internal import LMDB

/// Where the invalidations of one collection are applied, without its model type: those made
/// here (``HoardCollection/invalidate(_:)-3713m`` and the others) and those another replica made
/// (``Replication/apply(_:through:bus:expecting:includingOwn:)``), by one rule, so that every
/// replica answers alike: the records are removed, the race guard notes them, and a key's retry
/// period after a failed fetch ends.
struct InvalidationTarget {
    let store: Store
    let collection: String
    let database: Database
    /// Why the records go: ``RecordRemoval/invalidated`` here, ``RecordRemoval/remote`` for
    /// another replica's change.
    let reason: RecordRemoval

    /// Invalidates the records of `keys`, keeping the collection's capacity bookkeeping, and tells
    /// the fetches under way.
    func invalidate(
        _ keys: [[UInt8]], in txn: borrowing LMDB.WriteTransaction, result: inout ApplyResult
    ) throws {
        var writer = try store.writer(of: collection, database: database, in: txn)
        for key in keys where !key.isEmpty && key.count <= store.environment.maxKeySize {
            if try writer.remove(key, reason, in: txn) { result.removed += 1 }
        }
        try writer.finish(in: txn)
        noteRemoved(keys)
    }

    /// Invalidates the records that carry `tag` (NFC's UTF-8); they take the tag's entries with them.
    func invalidate(tag: [UInt8], in txn: borrowing LMDB.WriteTransaction, result: inout ApplyResult) throws {
        store.replicationState.invalidations.noteRemoved(collection: collection, tags: [tag])
        var writer = try store.writer(of: collection, database: database, in: txn)
        if let index = try store.tagIndex(of: collection, in: txn) {
            let keys = try index.take(tagged: tag, in: txn)
            for key in keys where try writer.remove(key, reason, untagging: tag, in: txn) { result.removed += 1 }
            noteRemoved(keys)
        }
        if reason == .invalidated { writer.countTagInvalidation() }
        try writer.finish(in: txn)
    }

    /// Invalidates every record of the collection.
    func invalidateAll(in txn: borrowing LMDB.WriteTransaction, result: inout ApplyResult) throws {
        store.replicationState.invalidations.noteCleared(collection: collection)
        store.existingState(of: collection)?.forgetFailedFetches(of: nil)
        var writer = try store.writer(of: collection, database: database, in: txn)
        result.removed += try writer.removeAll(reason, in: txn)
        try writer.finish(in: txn)
    }

    /// Tells the race guard, and ends the keys' retry periods: a failure said nothing of the value
    /// that replaced the one invalidated.
    private func noteRemoved(_ keys: [[UInt8]]) {
        store.replicationState.invalidations.noteRemoved(collection: collection, keys: keys)
        store.existingState(of: collection)?.forgetFailedFetches(of: keys)
    }
}
