internal import LMDB

// Migrations of records written with an older local key set: lazily (remembered on read,
// rewritten by the next write) and eagerly (`migrate()`, in checkpointed batches).

/// What a collection does with a record it reads in an older key-set version.
public enum MigrationPolicy: Sendable, Hashable {
    /// Leave it as it is; it is migrated on every read.
    case never
    /// Remember it and rewrite it in the current version in the collection's next write
    /// transaction, or at ``HoardCollection/flushMigrations()-1zcyw``.
    case lazy
}

/// How far an eager ``HoardCollection/migrate(batchSize:progress:)`` has come.
public struct MigrationProgress: Sendable, Hashable {
    /// Records looked at in this call.
    public var scanned = 0
    /// Records rewritten in the current version in this call.
    public var migrated = 0
    /// Records left as they are because they cannot be migrated here (damaged, or from a newer version).
    public var failed = 0
    /// Whether the whole collection has been gone through.
    public var finished = false
}

extension HoardCollection {
    /// How many keys a lazy migration remembers at most; more are migrated on a later read.
    static var pendingLimit: Int { 100_000 }

    /// Rewrites, in `txn`, the records remembered for a lazy migration (by any handle of the
    /// collection: they share ``CollectionState``); returns how many it rewrote.
    @discardableResult
    func migratePending(in txn: borrowing LMDB.WriteTransaction) throws -> Int {
        let keys = state.pendingMigrations.withLock { pending -> Set<[UInt8]> in
            defer { pending.removeAll() }
            return pending
        }
        guard !keys.isEmpty else { return 0 }
        var writer = try writer(in: txn)
        var migrated = 0
        for key in keys.sorted(by: keyPrecedes) where try rewriteIfOld(key, writer, in: txn) == .migrated {
            migrated += 1
        }
        try writer.finish(in: txn)
        return migrated
    }

    /// Rewrites the records a lazy migration remembered, in a transaction of its own; returns how many.
    ///
    /// - Throws: ``HoardError/encoding(collection:key:underlying:)`` when a model cannot be encoded,
    ///   ``HoardError/storage(_:)`` when the storage fails; nothing is rewritten then.
    @discardableResult
    public func flushMigrations() throws -> Int {
        try store.writeLMDB { txn in try migratePending(in: txn) }
    }

    /// Rewrites the records remembered for a lazy migration, as one write of the store's next group commit.
    ///
    /// - Throws: as the synchronous form does, or a failed commit's ``HoardError/storage(_:)`` (nothing of it stored).
    @discardableResult
    public func flushMigrations() async throws -> Int where Model: Sendable {
        try await store.submit(nested: false) { txn in try self.migratePending(in: txn) }
    }

    enum RewriteOutcome { case current, migrated, failed }

    /// What a migration finds under a key.
    enum StoredRecord<Value> { case damaged, upToDate(newer: Bool), old(RecordHeader, Value) }

    /// Rewrites the record under `key` in the current version if it is older, keeping its
    /// write time and expiry (a migration changes the spelling, not the content).
    func rewriteIfOld(
        _ key: [UInt8], _ writer: RecordWriter, in txn: borrowing LMDB.WriteTransaction
    ) throws
        -> RewriteOutcome
    {
        let found: StoredRecord<Model>? = try txn.withValue(forKey: key, in: database) {
            record -> StoredRecord<Model> in
            guard let (header, payload) = try? RecordHeader.parse(record) else { return .damaged }
            if header.version > currentVersion { return .upToDate(newer: true) }
            if header.version == currentVersion && header.isCurrentFormat { return .upToDate(newer: false) }
            guard header.version == currentVersion || localVersions.contains(header.version),
                let model = try? decodePayload(payload, version: header.version, numbered: header.hasNumberedKeys)
            else { return .damaged }
            return .old(header, model)
        }
        let header: RecordHeader
        let model: Model
        switch found {
        case nil: return .current  // deleted meanwhile
        case .damaged: return .failed
        case .upToDate(let newer): return newer ? .failed : .current
        case .old(let h, let m): (header, model) = (h, m)
        }
        let rewritten = RecordHeader(version: currentVersion, writtenAt: header.writtenAt, expiresAt: header.expiresAt)
        // A migration changes the spelling, not the content: observers are not told.
        try key.withUnsafeBytes { rawKey in
            try withPayload(of: model, key: rawKey) {
                try writer.store(payload: $0, header: rewritten, forKey: rawKey, told: false, in: txn)
            }
        }
        return .migrated
    }

    /// Rewrites every record of an older version in the current one, in batches of
    /// `batchSize` records per write transaction.
    ///
    /// Each batch commits with a checkpoint in the meta database, so a migration that is stopped
    /// (`progress` returning `false`, an error, a kill) goes on from the last committed batch at
    /// the next call. Records that cannot be migrated (damaged, newer) are counted and left alone.
    ///
    /// - Parameters:
    ///   - batchSize: how many records one write transaction rewrites.
    ///   - progress: called after each batch with the totals so far; return `false` to stop.
    /// - Throws: ``HoardError/encoding(collection:key:underlying:)`` when a model cannot be encoded,
    ///   ``HoardError/storage(_:)`` when the storage fails; the batches committed before stay, and the next call goes on from them.
    @discardableResult
    public func migrate(
        batchSize: Int = 1_000, progress: (MigrationProgress) -> Bool = { _ in true }
    ) throws -> MigrationProgress {
        precondition(batchSize > 0, "migrate: batchSize must be positive")
        guard let meta = store.meta else { return MigrationProgress(finished: true) }
        let checkpointKey = Array("migrate:\(name)".utf8)
        var totals = MigrationProgress()
        while true {
            let batch = try store.writeLMDB { txn -> (MigrationProgress, Bool) in
                var step = MigrationProgress()
                let start = try txn.value(forKey: checkpointKey, in: meta)
                let range = start.map { LMDB.KeyRange(from: .exclusive($0)) } ?? .all
                let keys = try txn.entries(in: database, range: range, limit: batchSize).map(\.key)
                var writer = try writer(in: txn)
                for key in keys {
                    step.scanned += 1
                    switch try rewriteIfOld(key, writer, in: txn) {
                    case .current: break
                    case .migrated: step.migrated += 1
                    case .failed: step.failed += 1
                    }
                }
                try writer.finish(in: txn)
                let done = keys.count < batchSize
                if done {
                    try txn.delete(checkpointKey, in: meta)
                } else if let last = keys.last {
                    try txn.put(last, forKey: checkpointKey, in: meta)
                }
                return (step, done)
            }
            totals.scanned += batch.0.scanned
            totals.migrated += batch.0.migrated
            totals.failed += batch.0.failed
            totals.finished = batch.1
            store.logger.debug(
                "migration batch",
                metadata: [
                    "collection": "\(name)", "scanned": "\(totals.scanned)", "migrated": "\(totals.migrated)",
                    "failed": "\(totals.failed)",
                ])
            if batch.1 {
                store.logger.info(
                    "migrated collection",
                    metadata: [
                        "collection": "\(name)", "migrated": "\(totals.migrated)", "failed": "\(totals.failed)",
                        "version": "\(currentVersion)",
                    ])
            }
            if batch.1 || !progress(totals) { return totals }
        }
    }
}
