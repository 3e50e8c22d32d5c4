public import LMDB

// Tags on a collection's records, and invalidation by tag or of the whole collection (announced
// to the other replicas as keys are: HoardCollection+Invalidate.swift).

extension HoardCollection {
    /// Stores `model` with `tags` in a transaction of its own, replacing the tags its record had.
    ///
    /// A record keeps its tags until a put with tags replaces them (`tags: []` removes them) or
    /// the record goes; a put without tags leaves them as they were. ``invalidate(tag:)`` removes
    /// every record that carries a tag.
    ///
    /// - Throws: ``HoardError/invalidTag(collection:tag:reason:)`` for an empty tag or one longer
    ///   than 128 bytes of UTF-8; otherwise as `put(_:expiry:)` does. Nothing is stored then.
    public func put(_ model: Model, tags: some Sequence<String>, expiry: Expiry = .collectionDefault) throws {
        let tags = try TagIndex.normalized(tags, collection: name)
        try store.environment.write { txn in
            try migratePending(in: txn)
            try put(model, expiry: expiry, insertOnly: false, tags: tags, in: txn)
        }
    }

    /// Stores `model` with `tags` in `txn` (see ``put(_:tags:expiry:)-3spge``).
    ///
    /// - Throws: as ``put(_:tags:expiry:)-3spge`` does; abort `txn` to undo what it holds.
    public func put(
        _ model: Model, tags: some Sequence<String>, expiry: Expiry = .collectionDefault,
        in txn: borrowing WriteTransaction
    ) throws {
        try put(
            model, expiry: expiry, insertOnly: false, tags: try TagIndex.normalized(tags, collection: name), in: txn)
    }

    /// The tags of the record of `id`, sorted by their UTF-8 bytes; empty when it has none (or there is no record).
    ///
    /// - Throws: ``HoardError/invalidID(collection:reason:)``; `LMDBError` when LMDB fails.
    public func tags(of id: Model.ID) throws -> [String] {
        let key = try keyBytes(id)
        return try store.environment.read { txn in
            try store.tagIndex(of: name, in: txn)?.tags(of: key, in: txn)?.map { String(decoding: $0, as: UTF8.self) }
        } ?? []
    }

    /// The IDs of the records that carry `tag`, in key order.
    ///
    /// - Throws: `LMDBError` when LMDB fails.
    public func ids(taggedWith tag: String) throws -> [Model.ID] {
        try store.environment.read { txn in
            try store.tagIndex(of: name, in: txn)?.keys(tagged: Array(tag.utf8), in: txn).compactMap {
                Model.ID(keyBytes: $0)
            }
        } ?? []
    }

    /// Removes every record that carries `tag` in `txn`, and records in the same transaction that
    /// the tag must be announced to the other replicas, which remove their records of the tag when
    /// a bus delivers it. A fetch under way for one of the records removed does not store its
    /// result. Returns how many records were removed.
    ///
    /// - Throws: ``HoardError/invalidTag(collection:tag:reason:)`` for a tag no record can carry
    ///   (empty, or longer than 128 bytes); `LMDBError` when LMDB fails (abort `txn` to undo what it holds).
    @discardableResult
    public func invalidate(tag: String, in txn: borrowing WriteTransaction) throws -> Int {
        let tagBytes = try TagIndex.normalized([tag], collection: name)[0]
        var writer = try writer(in: txn)
        var removed = 0
        if let index = try store.tagIndex(of: name, in: txn) {
            let keys = try index.take(tagged: tagBytes, in: txn)
            for key in keys where try writer.remove(key, .invalidated, untagging: tagBytes, in: txn) { removed += 1 }
            store.replicationState.invalidations.noteRemoved(collection: name, keys: keys)
        }
        writer.countTagInvalidation()
        try writer.finish(in: txn)
        store.replicationState.invalidations.noteRemoved(collection: name, tags: [tagBytes])
        try announce(.tag(tagBytes), in: txn)
        return removed
    }

    /// Removes every record of the collection in `txn`, and records in the same transaction that
    /// the other replicas must remove theirs. No fetch under way stores its result. Returns how
    /// many records were removed.
    ///
    /// - Throws: `LMDBError` when LMDB fails (abort `txn` to undo what it holds).
    @discardableResult
    public func invalidateAll(in txn: borrowing WriteTransaction) throws -> Int {
        let removed = try removeAll(.invalidated, in: txn)
        store.replicationState.invalidations.noteCleared(collection: name)
        try announce(.all, in: txn)
        return removed
    }
}

extension HoardCollection where Model: Sendable {
    /// Stores `model` with `tags` as one write of the store's next group commit (see ``put(_:tags:expiry:)-3spge``).
    ///
    /// - Throws: as the synchronous form does, or the `LMDBError` of a commit that failed.
    public func put(_ model: Model, tags: some Sequence<String>, expiry: Expiry = .collectionDefault) async throws {
        let tags = try TagIndex.normalized(tags, collection: name)
        try await store.submit(nested: false) { txn in
            try self.migratePending(in: txn)
            try self.put(model, expiry: expiry, insertOnly: false, tags: tags, in: txn)
        }
    }

    /// Removes every record that carries `tag` and announces the tag to the other replicas (see
    /// ``invalidate(tag:in:)``), as one write of the store's next group commit; returns how many
    /// records were removed here.
    ///
    /// - Throws: ``HoardError/invalidTag(collection:tag:reason:)``, or the `LMDBError` of a commit
    ///   that failed (then nothing is removed or announced).
    @discardableResult
    public func invalidate(tag: String) async throws -> Int {
        try await store.withSpan("invalidate_tag", collection: name) { span in
            span?.attributes[SpanKey.tag] = tag
            let removed = try await store.submit(nested: false) { txn in try self.invalidate(tag: tag, in: txn) }
            span?.attributes[SpanKey.removed] = removed
            return removed
        }
    }

    /// Removes every record of the collection and announces it to the other replicas (see
    /// ``invalidateAll(in:)``), as one write of the store's next group commit; returns how many
    /// records were removed here.
    ///
    /// - Throws: the `LMDBError` of a commit that failed (then nothing is removed or announced).
    @discardableResult
    public func invalidateAll() async throws -> Int {
        try await store.withSpan("invalidate_all", collection: name) { span in
            let removed = try await store.submit(nested: false) { txn in try self.invalidateAll(in: txn) }
            span?.attributes[SpanKey.removed] = removed
            return removed
        }
    }
}
