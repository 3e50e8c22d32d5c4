internal import LMDB

/// What ``HoardCollection/synchronize(with:scope:dryRun:)`` did (or, in a dry run, would do).
public struct SynchronizeResult<ID: Hashable & Sendable>: Sendable {
    /// IDs stored that were not (or only as expired records).
    public var added: [ID] = []
    /// IDs whose stored content differed and was rewritten.
    public var updated: [ID] = []
    /// IDs whose stored content was the same but in an older key-set version: rewritten in the current one.
    public var migrated: [ID] = []
    /// IDs removed: stored in scope but not in the fresh collection (expired ones included).
    public var removed: [ID] = []
    /// Records that were damaged or written by a newer version, each as the error reading it
    /// gives: overwritten by the fresh model of the same ID, or removed when there is none (a
    /// newer record removed is listed in ``removed`` too).
    public var replaced: [HoardError] = []
    /// Damaged records in the collection that a predicate scope (``SynchronizeScope/matching(_:)``)
    /// cannot place, since they do not decode: left as they are.
    public var leftAlone: [HoardError] = []
    /// How many records were already equal to the fresh ones.
    public var unchanged = 0
}

/// The part of a collection a synchronize makes equal to the fresh models; the rest is untouched.
public enum SynchronizeScope<Model: Identifiable>: Sendable where Model.ID: HoardKey {
    /// Every record.
    case all
    /// The records whose IDs lie from `from` through `through` (either end open when `nil`).
    case range(from: Model.ID?, through: Model.ID?)
    /// The records whose key bytes start with `prefix` (for string IDs, `"conversation-7/".keyBytes`).
    case keyPrefix([UInt8])
    /// The records whose models satisfy the predicate (each stored record in the collection is decoded).
    case matching(@Sendable (Model) -> Bool)
}

extension HoardCollection {
    /// Makes the stored collection — or the `scope` of it — equal to `fresh`, in one write
    /// transaction: inserts what is missing, rewrites what changed (compared as deterministic
    /// CBOR bytes), rewrites records of older versions whose content is the same (reported as
    /// migrated), removes what is stale, expired, damaged or from a newer version and not in
    /// `fresh`, and leaves the rest untouched. All of it happens, or none of it.
    ///
    /// Linear: `fresh` is encoded and sorted once, then merged with one cursor pass over the stored
    /// scope. Memory grows with `fresh` (and the IDs reported), not with the stored collection.
    ///
    /// - Throws: ``HoardError/invalidID(collection:reason:)`` for an ID given twice or outside the
    ///   scope (before anything is written); an encoding error of a model (nothing is written).
    @discardableResult
    public func synchronize(
        with fresh: some Sequence<Model>,
        scope: SynchronizeScope<Model> = .all,
        dryRun: Bool = false
    ) throws -> SynchronizeResult<Model.ID> where Model.ID: Sendable {
        let start = monotonicNanoseconds()
        let (incoming, range) = try prepareSynchronize(fresh, scope)
        if dryRun {
            let now = store.options.now()
            return try store.readLMDB { txn in result(of: try plan(incoming, scope, range, now, txn), incoming)
            }
        }
        let synchronized = try store.writeLMDB { txn in
            try applySynchronize(incoming, scope, range, in: txn)
        }
        countSynchronize(synchronized, since: start)
        return synchronized
    }

    /// Encodes the fresh side and puts it in key order; refuses duplicates and IDs outside the scope.
    private func prepareSynchronize(
        _ fresh: some Sequence<Model>, _ scope: SynchronizeScope<Model>
    ) throws -> (FreshBytes, LMDB.KeyRange) {
        // 1. Encode and order the fresh side; refuse duplicates and IDs outside the scope.
        var unsorted = FreshBytes()
        unsorted.reserve(fresh.underestimatedCount)
        let range = keyRange(of: scope)
        for model in fresh {
            let key = try keyBytes(model.id)
            let inScope: Bool =
                switch scope {
                case .matching(let predicate): predicate(model)
                default: range.contains(key)
                }
            guard inScope else {
                throw HoardError.invalidID(
                    collection: name, reason: "\(model.id) is outside the scope of the synchronize")
            }
            // The encoder's bytes are copied straight into the flat buffer, with no array per model.
            try key.withUnsafeBytes { rawKey in
                try withPayload(of: model, key: rawKey) { unsorted.append(key: key, payload: $0) }
            }
        }
        let incoming = unsorted.sorted()
        unsorted = FreshBytes()  // the unsorted copy goes as soon as the sorted one is made
        for index in incoming.keys.indices.dropFirst() where incoming.key(index) == incoming.key(index - 1) {
            throw HoardError.invalidID(
                collection: name, reason: "\(storedKey(incoming.key(index))) appears twice in the fresh collection")
        }
        return (incoming, range)
    }

    /// Merges the prepared fresh side with the stored scope in `txn` and applies the plan.
    private func applySynchronize(
        _ incoming: FreshBytes, _ scope: SynchronizeScope<Model>, _ range: LMDB.KeyRange,
        in txn: borrowing LMDB.WriteTransaction
    ) throws -> SynchronizeResult<Model.ID> {
        let now = store.options.now()
        let expiresAt = timeToLiveMilliseconds.map { now.addingSaturating($0) }
        // The plan is made in one pass, then applied: the cursor never walks a tree that changes
        // under it. A bounded collection: the fresh side alone must fit (it is never cut short).
        let bound = try StoredBound.read(name, in: store, txn: txn)
        if let bound { try checkFits(incoming, bound.capacity) }
        let merged = try plan(incoming, scope, range, now, txn)
        var writer = try writer(writes: merged.removed.count + merged.discarded.count + merged.puts.count, in: txn)
        for key in merged.removed + merged.discarded { try writer.remove(key, .synchronized, in: txn) }
        let header = RecordHeader(version: currentVersion, writtenAt: store.writeStamp(now), expiresAt: expiresAt)
        let storing = writer.storing
        try incoming.payloadBytes.withUnsafeBytes { payloads in
            try incoming.keyBytes.withUnsafeBytes { keys in
                for index in merged.puts {
                    let payload = UnsafeRawBufferPointer(rebasing: payloads[incoming.payloads[index]])
                    let key = UnsafeRawBufferPointer(rebasing: keys[incoming.keys[index]])
                    try storing.store(payload: payload, header: header, forKey: key, in: database, txn)
                }
            }
        }
        // Unchanged fresh records stay too: none of the fresh side may be evicted for the rest.
        if let tracker = writer.tracker {
            for index in incoming.keys.indices { tracker.keep(Array(incoming.key(index))) }
        }
        try writer.finish(in: txn)
        return result(of: merged, incoming)
    }

    /// Throws ``HoardError/overCapacity(collection:reason:)`` when `incoming` alone exceeds `capacity`.
    private func checkFits(_ incoming: FreshBytes, _ capacity: Capacity) throws {
        if let records = capacity.records, incoming.keys.count > records {
            throw HoardError.overCapacity(
                collection: name,
                reason: "the fresh collection has \(incoming.keys.count) records, more than the capacity of \(records)")
        }
        if let bytes = capacity.bytes {
            let headers = incoming.keys.count * RecordHeader.minimumSize
            let needed = incoming.keyBytes.count + incoming.payloadBytes.count + headers
            if needed > bytes {
                throw HoardError.overCapacity(
                    collection: name,
                    reason:
                        "the fresh collection takes \(needed) bytes as records, more than the capacity of \(bytes) bytes"
                )
            }
        }
    }

    private func countSynchronize(_ synchronized: SynchronizeResult<Model.ID>, since start: UInt64) {
        let metrics = state.metrics
        metrics.synchronizeRuns.increment()
        metrics.added.increment(by: synchronized.added.count)
        metrics.updated.increment(by: synchronized.updated.count)
        metrics.migrated.increment(by: synchronized.migrated.count)
        metrics.synchronizeRemoved.increment(by: synchronized.removed.count)
        metrics.synchronizeDuration.recordSince(start)
    }

    /// Runs the concrete merge over the stored scope in `txn`. Only the rare paths that need the
    /// model type (a predicate scope, a record of an older version) call back into generic code.
    private func plan<Access>(
        _ incoming: FreshBytes, _ scope: SynchronizeScope<Model>, _ range: LMDB.KeyRange, _ now: Int64,
        _ txn: borrowing LMDB.Transaction<Access>
    ) throws -> MergePlan {
        var predicate: (@Sendable (Model) -> Bool)?
        if case .matching(let matching) = scope { predicate = matching }
        return try MergePlan(
            fresh: incoming, now: now, collection: name, keyKind: Model.ID.keyKind, currentVersion: currentVersion,
            hasPredicate: predicate != nil,
            forEachStored: { visit in try txn.forEach(in: database, range: range, visit) },
            inScope: { record, key in
                // Outside the fresh side, a record is in scope only if its model matches; nil: it does not decode.
                guard let predicate, let model = try? decode(record, key: { Array(key) }) else { return nil }
                return predicate(model)
            },
            sameContent: { header, payload, index in
                // An older version or record format: the same content re-encodes to the fresh bytes.
                guard localVersions.contains(header.version),
                    let old = try? decodePayload(payload, version: header.version, numbered: header.hasNumberedKeys)
                else {
                    return false
                }
                return (try? encode(old) { $0.elementsEqual(incoming.payload(index)) }) ?? false
            }
        )
    }

    /// The plan in IDs: read back from the key bytes (every `HoardKey` round-trips), so that the
    /// fresh side never has to carry the generic IDs.
    private func result(of plan: MergePlan, _ incoming: FreshBytes) -> SynchronizeResult<Model.ID> {
        var result = SynchronizeResult<Model.ID>()
        result.added = plan.added.compactMap { Model.ID(keyBytes: incoming.key($0)) }
        result.updated = plan.updated.compactMap { Model.ID(keyBytes: incoming.key($0)) }
        result.migrated = plan.migrated.compactMap { Model.ID(keyBytes: incoming.key($0)) }
        result.removed = plan.removed.compactMap { Model.ID(keyBytes: $0) }
        result.replaced = plan.replaced
        result.leftAlone = plan.leftAlone
        result.unchanged = plan.unchanged
        return result
    }

    func keyRange(of scope: SynchronizeScope<Model>) -> LMDB.KeyRange {
        switch scope {
        case .all, .matching: .all
        case .range(let from, let through):
            LMDB.KeyRange(from: from.map { .inclusive($0.keyBytes) }, to: through.map { .inclusive($0.keyBytes) })
        case .keyPrefix(let prefix): .prefix(prefix)
        }
    }
}

extension HoardCollection where Model: Sendable, Model.ID: Sendable {
    /// Makes the stored collection — or the `scope` of it — equal to `fresh`, as
    /// ``synchronize(with:scope:dryRun:)`` does, as one write of the store's next group commit
    /// (see ``Store/write(_:)-9ctiz``): the models are encoded on the calling task, and the merge
    /// runs on the store's writer. All of it happens, or none of it.
    ///
    /// - Throws: as the synchronous form does, or a failed commit's ``HoardError/storage(_:)`` (nothing of it stored).
    @discardableResult
    public func synchronize(
        with fresh: some Sequence<Model>, scope: SynchronizeScope<Model> = .all
    ) async throws -> SynchronizeResult<Model.ID> {
        try await store.withSpan("synchronize", collection: name) { span in
            let start = monotonicNanoseconds()
            let (incoming, range) = try prepareSynchronize(fresh, scope)
            let synchronized = try await store.submit { txn in
                try self.applySynchronize(incoming, scope, range, in: txn)
            }
            countSynchronize(synchronized, since: start)
            span?.updateAttributes { attributes in
                attributes[SpanKey.batchSize] = incoming.keys.count
                attributes["hoard.synchronize.added"] = synchronized.added.count
                attributes["hoard.synchronize.updated"] = synchronized.updated.count
                attributes["hoard.synchronize.removed"] = synchronized.removed.count
                attributes["hoard.synchronize.unchanged"] = synchronized.unchanged
            }
            return synchronized
        }
    }
}

extension Sequence {
    /// Makes `collection` (or its `scope`) equal to these models, as
    /// ``HoardCollection/synchronize(with:scope:dryRun:)`` does.
    ///
    /// - Throws: as ``HoardCollection/synchronize(with:scope:dryRun:)`` does.
    @discardableResult
    public func synchronize<Model>(
        in collection: HoardCollection<Model>,
        scope: SynchronizeScope<Model> = .all,
        dryRun: Bool = false
    ) throws -> SynchronizeResult<Model.ID> where Element == Model, Model.ID: Sendable {
        try collection.synchronize(with: self, scope: scope, dryRun: dryRun)
    }
}
