internal import LMDB

// Following a bus: the changes of other replicas applied with the bus's position, exactly once;
// the reset when a log cannot be followed exactly.

extension Replication {
    // MARK: - Changes from other replicas

    /// The position of `bus` this store has applied changes through, or `nil` before its first.
    ///
    /// - Throws: ``HoardError/storage(_:)`` when the storage fails.
    public func position(of bus: String) throws -> BusPosition? {
        guard let meta = store.meta else { return nil }
        return try store.readLMDB { txn in try Self.position(of: bus, meta: meta, txn: txn) }
    }

    static func position<Access>(
        of bus: String, meta: Database, txn: borrowing LMDB.Transaction<Access>
    ) throws
        -> BusPosition?
    {
        try txn.value(forKey: Array((Store.MetaKey.busPrefix + bus).utf8), in: meta).flatMap {
            BusPosition(stored: $0)
        }
    }

    /// Applies changes that other replicas (or the source of truth) announced, and records that the
    /// store has applied `bus` through `position`, in one transaction of the group commit: the records
    /// are no longer served as current, and the same batch is never applied twice, even when the
    /// process is killed and the bus delivers it again.
    ///
    /// The records are removed, as on the replica that made the change. Changes whose origin is
    /// this store (unless `includingOwn`), and of collections it does not have, are skipped (the
    /// position still advances). A fetch under way for one of the keys does not store its result.
    ///
    /// - Parameters:
    ///   - changes: the changes, in the log's order.
    ///   - position: the position after the last of them.
    ///   - bus: the bus's name (a store may follow several).
    ///   - expected: when given, the sequence number the store must have applied through for the
    ///     batch to be applied: a bus that knows the changes between that position and `position`
    ///     (from its notifications rather than from reading the log) passes the one it last
    ///     recorded, so that a position another process moved meanwhile is not skipped over.
    ///   - includingOwn: apply this store's own changes too: for those an earlier run of a bus on
    ///     this store published, whose local commit an operating-system crash may have undone
    ///     (`.riskLastCommitOnOSCrash`) while the log kept it. Applied again to a store that kept
    ///     it, an own change only removes what was written since.
    /// - Returns: what was done; ``ApplyResult/alreadyApplied`` when the store had applied this
    ///   position, ``ApplyResult/unexpectedPosition`` when it is not at `expected`.
    /// - Throws: ``HoardError/busPosition(bus:reason:)`` when `position` is of another log than the
    ///   store follows (``reset(bus:to:)`` first); ``HoardError/storage(_:)`` when the storage fails (nothing is applied).
    @discardableResult
    public func apply(
        _ changes: [RemoteChange], through position: BusPosition, bus: String, expecting expected: Int64? = nil,
        includingOwn: Bool = false
    ) async throws
        -> ApplyResult
    {
        // The store's identity is read only when its own changes are set aside.
        let applicable: [RemoteChange]
        if includingOwn {
            applicable = changes
        } else {
            let own = try identity()
            applicable = changes.filter { $0.origin != own }
        }
        let ownSkipped = changes.count - applicable.count
        let meta = try store.requireMeta()
        // Databases are opened before the write: LMDB opens them in transactions of their own.
        var targets: [String: InvalidationTarget] = [:]
        for change in applicable where targets[change.collection] == nil {
            if let database = try store.recordDatabase(of: change.collection) {
                targets[change.collection] = InvalidationTarget(
                    store: store, collection: change.collection, database: database, reason: .remote)
            }
        }
        let targetsFound = targets
        let positionKey = Array((Store.MetaKey.busPrefix + bus).utf8)
        // In the batch's transaction, as Hoard's own writes are (Store+GroupCommit.swift): it
        // throws only for another log, and is then run again nested, undone alone.
        return try await store.submit(nested: false) { txn in
            var result = ApplyResult()
            let applied = try Self.position(of: bus, meta: meta, txn: txn)
            if let applied {
                guard applied.log == position.log else {
                    throw HoardError.busPosition(
                        bus: bus,
                        reason:
                            "the store follows log \(applied.log), not \(position.log): reset it to the new log first")
                }
                if applied.sequence >= position.sequence {
                    result.alreadyApplied = true
                    return result
                }
            }
            if let expected, applied?.sequence != expected {
                result.unexpectedPosition = true
                return result
            }
            result.ownSkipped = ownSkipped
            for change in applicable {
                if let target = targetsFound[change.collection] {
                    try target.invalidate(change.keys, in: txn, result: &result)
                    for tag in change.tags {
                        try target.invalidate(tag: TagIndex.bytes(of: tag), in: txn, result: &result)
                    }
                    if change.clearsAll { try target.invalidateAll(in: txn, result: &result) }
                } else {
                    result.unknownSkipped += 1
                }
            }
            try txn.put(position.stored, forKey: positionKey, in: meta)
            return result
        }
    }

    /// Starts following `bus` anew at `position`, when the store cannot catch up exactly (the log
    /// was recreated, or trimmed past the store's position): every record written before now is
    /// treated as expired from now on (served within `staleWhileRevalidate` at most, never
    /// stale-if-error), without deleting anything. One transaction of the group commit.
    ///
    /// A process that had the store open before another process reset it learns of the reset when
    /// it opens the store again.
    ///
    /// - Throws: ``HoardError/storage(_:)`` when the storage fails (nothing is changed).
    public func reset(bus: String, to position: BusPosition) async throws {
        let meta = try store.requireMeta()
        let positionKey = Array((Store.MetaKey.busPrefix + bus).utf8)
        let state = store.replicationState
        try await store.submit { txn in
            // One millisecond past now: a record stamped in this millisecond may predate the reset.
            let resetAt = store.options.now() + 1
            let previous = try txn.value(forKey: Array(Store.MetaKey.staleBefore.utf8), in: meta).flatMap {
                Store.decodeMilliseconds($0)
            }
            let kept = max(previous ?? 0, resetAt)
            try txn.put(Store.encodeMilliseconds(kept), forKey: Array(Store.MetaKey.staleBefore.utf8), in: meta)
            try txn.put(position.stored, forKey: positionKey, in: meta)
            // In memory before the commit: no read after it may serve an older record as fresh
            // (should the commit fail, records are only treated as stale a little early), and
            // every write stamped from here on is stamped at or after the reset (Store.writeStamp).
            state.staleBefore.max(kept, ordering: .relaxed)
            state.invalidations.noteReset()
            for collection in store.collectionStates.withLock({ Array($0.values) }) {
                collection.forgetFailedFetches(of: nil)
            }
        }
        state.resets.add(1, ordering: .relaxed)
        store.metrics.resets.increment()
    }

    /// Records written before this time (milliseconds since 1970: one past the millisecond of the
    /// last ``reset(bus:to:)``) are treated as expired since that reset; `nil` when the store was
    /// never reset.
    public var staleBefore: Int64? {
        let value = store.replicationState.staleBefore.load(ordering: .relaxed)
        return value == 0 ? nil : value
    }

    /// Read-through fetches whose result was not stored because the key was invalidated while the
    /// fetch was under way (their callers still got it), since the store was opened.
    public var discardedFills: Int { store.replicationState.discardedFills.load(ordering: .relaxed) }

    /// Resets done since the store was opened.
    public var resets: Int { store.replicationState.resets.load(ordering: .relaxed) }
}

extension Replication {
    /// Where to read `bus`'s log from: after the position the store applied, when the log still
    /// holds every change since; otherwise (the store never followed this bus, the log was
    /// recreated, or it was trimmed past the store's position) the store is reset
    /// (``reset(bus:to:)``) to the log's head and reading starts there.
    ///
    /// - Parameters:
    ///   - bus: the bus's name in the store.
    ///   - log: the identity of the log as it is now.
    ///   - trimmedThrough: the highest sequence number the log no longer holds (0 when it holds all).
    ///   - head: the highest sequence number in the log now.
    /// - Returns: the sequence number to read after.
    /// - Throws: ``HoardError/storage(_:)`` when the storage fails.
    public func startFollowing(bus: String, log: String, trimmedThrough: Int64, head: Int64) async throws -> Int64 {
        if let applied = try position(of: bus), applied.log == log, applied.sequence >= trimmedThrough,
            applied.sequence <= head
        {
            return applied.sequence
        }
        try await reset(bus: bus, to: BusPosition(log: log, sequence: head))
        return head
    }
}
