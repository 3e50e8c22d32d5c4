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
    /// Records that were damaged or written by a newer version: replaced by fresh data or removed.
    public var replaced: [(key: String, reason: String)] = []
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
    /// Linear: `fresh` is encoded and sorted by key once, then merged with one cursor pass over
    /// the stored scope. Memory grows with `fresh` and with the keys of the records it removes.
    ///
    /// - Throws: ``HoardError/invalidID(collection:reason:)`` for an ID given twice or outside the
    ///   scope (before anything is written); an encoding error of a model (nothing is written).
    @discardableResult
    public func synchronize(
        with fresh: some Sequence<Model>,
        scope: SynchronizeScope<Model> = .all,
        dryRun: Bool = false
    ) throws -> SynchronizeResult<Model.ID> where Model.ID: Sendable {
        // 1. Encode and order the fresh side; refuse duplicates and IDs outside the scope.
        var incoming: [(key: [UInt8], id: Model.ID, payload: [UInt8])] = []
        let range = keyRange(of: scope)
        for model in fresh {
            let key = try keyBytes(model.id)
            let inScope: Bool = switch scope {
            case .matching(let predicate): predicate(model)
            default: range.contains(key)
            }
            guard inScope else {
                throw HoardError.invalidID(collection: name, reason: "\(model.id) is outside the scope of the synchronize")
            }
            do {
                incoming.append((key, model.id, try encoder.encode(model)))
            } catch {
                throw HoardError.encoding(collection: name, key: describeKey(key), underlying: error)
            }
        }
        incoming.sort { $0.key.lexicographicallyPrecedes($1.key) }
        for index in incoming.indices.dropFirst() where incoming[index].key == incoming[index - 1].key {
            throw HoardError.invalidID(collection: name, reason: "\(incoming[index].id) appears twice in the fresh collection")
        }

        // 2. Merge with the stored scope, then apply the plan, in one transaction.
        let now = store.options.clock()
        let expiresAt = timeToLive.map { now + $0 }
        if dryRun {
            return try store.environment.read { txn in try plan(incoming, scope, range, now, txn).result }
        }
        return try store.environment.write { txn in
            let plan = try plan(incoming, scope, range, now, txn)
            for index in plan.puts {
                let header = RecordHeader(version: currentVersion, writtenAt: now, expiresAt: expiresAt)
                try txn.put(header.record(with: incoming[index].payload), forKey: incoming[index].key, in: database)
            }
            for key in plan.deletes { try txn.delete(key, in: database) }
            return plan.result
        }
    }

    /// The merge of the sorted fresh side with one cursor pass over the stored scope: what to put
    /// (indices into `incoming`), what to delete, and the result to report. Nothing is written
    /// here, so the cursor never walks a tree that changes under it.
    private func plan<Access>(
        _ incoming: [(key: [UInt8], id: Model.ID, payload: [UInt8])],
        _ scope: SynchronizeScope<Model>,
        _ range: KeyRange,
        _ now: Int64,
        _ txn: borrowing Transaction<Access>
    ) throws -> (puts: [Int], deletes: [[UInt8]], result: SynchronizeResult<Model.ID>) where Model.ID: Sendable {
        var result = SynchronizeResult<Model.ID>()
        var puts: [Int] = []
        var deletes: [[UInt8]] = []
        var next = 0
        try txn.forEach(in: database, range: range) { storedKey, record in
            let key = Array(storedKey)
            // Fresh models before this stored key are new.
            while next < incoming.count, incoming[next].key.lexicographicallyPrecedes(key) {
                puts.append(next)
                result.added.append(incoming[next].id)
                next += 1
            }
            let matched = next < incoming.count && incoming[next].key == key
            guard let (header, payload) = try? RecordHeader.read(record) else {
                if matched {
                    result.replaced.append((describeKey(key), "damaged header or checksum"))
                    puts.append(next)
                    result.added.append(incoming[next].id)
                    next += 1
                } else if case .matching = scope {
                    result.replaced.append((describeKey(key), "damaged; left alone: the predicate cannot be checked"))
                } else {
                    result.replaced.append((describeKey(key), "damaged header or checksum; removed"))
                    deletes.append(key)
                }
                return .next
            }
            guard matched else {
                if case .matching(let predicate) = scope {
                    // Outside the fresh side, a record is in scope only if its model matches.
                    guard let model = try? decode(record, key: key, now: .min) else {
                        result.replaced.append((describeKey(key), "does not decode; left alone: the predicate cannot be checked"))
                        return .next
                    }
                    if !predicate(model) { return .next }
                }
                if header.version > currentVersion {
                    result.replaced.append((describeKey(key), "written by newer version \(header.version); removed"))
                }
                deletes.append(key)
                if let id = Model.ID(keyBytes: key) { result.removed.append(id) }
                return .next
            }
            let entry = incoming[next]
            if header.isExpired(at: now) {
                puts.append(next)
                result.added.append(entry.id)
            } else if header.version == currentVersion {
                if payload.elementsEqual(entry.payload) {
                    result.unchanged += 1
                } else {
                    puts.append(next)
                    result.updated.append(entry.id)
                }
            } else if header.version > currentVersion {
                result.replaced.append((describeKey(key), "written by newer version \(header.version); replaced"))
                puts.append(next)
                result.updated.append(entry.id)
            } else {
                // An older version: the same content re-encodes to the fresh bytes.
                let old = try? decoders[header.version].map { try encoder.encode(try $0.decode(Model.self, from: payload)) }
                puts.append(next)
                if old == entry.payload { result.migrated.append(entry.id) } else { result.updated.append(entry.id) }
            }
            next += 1
            return .next
        }
        while next < incoming.count {
            puts.append(next)
            result.added.append(incoming[next].id)
            next += 1
        }
        return (puts, deletes, result)
    }

    func keyRange(of scope: SynchronizeScope<Model>) -> KeyRange {
        switch scope {
        case .all, .matching: .all
        case .range(let from, let through):
            KeyRange(from: from.map { .inclusive($0.keyBytes) }, to: through.map { .inclusive($0.keyBytes) })
        case .keyPrefix(let prefix): .prefix(prefix)
        }
    }
}

extension Sequence {
    /// Makes `collection` (or its `scope`) equal to these models, as
    /// ``HoardCollection/synchronize(with:scope:dryRun:)`` does.
    @discardableResult
    public func synchronize<Model>(
        in collection: HoardCollection<Model>,
        scope: SynchronizeScope<Model> = .all,
        dryRun: Bool = false
    ) throws -> SynchronizeResult<Model.ID> where Element == Model, Model.ID: Sendable {
        try collection.synchronize(with: self, scope: scope, dryRun: dryRun)
    }
}
