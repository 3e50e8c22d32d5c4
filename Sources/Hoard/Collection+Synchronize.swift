internal import LMDB
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

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
    /// the stored scope, deleting stale records through the cursor as it passes them. Memory grows
    /// with `fresh` (and the IDs reported), not with the stored collection.
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
        incoming.sort { keyPrecedes($0.key, $1.key) }
        for index in incoming.indices.dropFirst() where incoming[index].key == incoming[index - 1].key {
            throw HoardError.invalidID(collection: name, reason: "\(incoming[index].id) appears twice in the fresh collection")
        }

        // 2. Merge with the stored scope, then apply the plan, in one transaction.
        let now = store.options.clock()
        let expiresAt = timeToLive.map { now + $0 }
        if dryRun {
            return try store.environment.read { txn in try merge(incoming, scope, range, now, txn, remove: { _ in }).result }
        }
        return try store.environment.write { txn in
            // Stale records are deleted through the cursor as the merge passes them; the writes of
            // fresh models wait until the pass is done, so the cursor never walks a tree that
            // grows under it. Memory: the fresh side, not the stored collection.
            let merged = try merge(incoming, scope, range, now, txn, remove: { cursor in try cursor.deleteCurrent() })
            for index in merged.puts {
                let header = RecordHeader(version: currentVersion, writtenAt: now, expiresAt: expiresAt)
                try txn.put(header.record(with: incoming[index].payload), forKey: incoming[index].key, in: database)
            }
            return merged.result
        }
    }

    /// The merge of the sorted fresh side with one cursor pass over the stored scope: stale
    /// records go to `remove` (which deletes them in a write, and does nothing in a dry run); the
    /// fresh models to write come back as indices into `incoming`, with the result to report.
    private func merge<Access>(
        _ incoming: [(key: [UInt8], id: Model.ID, payload: [UInt8])],
        _ scope: SynchronizeScope<Model>,
        _ range: KeyRange,
        _ now: Int64,
        _ txn: borrowing Transaction<Access>,
        remove: (borrowing Cursor<Access>) throws -> Void
    ) throws -> (puts: [Int], result: SynchronizeResult<Model.ID>) where Model.ID: Sendable {
        var result = SynchronizeResult<Model.ID>()
        var puts: [Int] = []
        var next = 0

        /// Merges one stored record; `.stop` means it is stale and must be removed.
        func visit(_ key: [UInt8], _ record: UnsafeRawBufferPointer) -> IterationStep {
            // Fresh models before this stored key are new.
            while next < incoming.count, keyPrecedes(incoming[next].key, key) {
                puts.append(next)
                result.added.append(incoming[next].id)
                next += 1
            }
            let matched = next < incoming.count && incoming[next].key == key
            guard let (header, payload) = try? RecordHeader.parse(record) else {
                if matched {
                    result.replaced.append((describeKey(key), "damaged header or checksum"))
                    puts.append(next)
                    result.added.append(incoming[next].id)
                    next += 1
                } else if case .matching = scope {
                    result.replaced.append((describeKey(key), "damaged; left alone: the predicate cannot be checked"))
                } else {
                    result.replaced.append((describeKey(key), "damaged header or checksum; removed"))
                    return .stop
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
                if let id = Model.ID(keyBytes: key) { result.removed.append(id) }
                return .stop
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

        try txn.withCursor(in: database) { cursor in
            // Every scope's range starts inclusively, or not at all.
            var entry = try range.lower.map { try cursor.seek(atLeast: $0.key) } ?? cursor.first()
            while let current = entry {
                let key = Array(current.key)
                guard range.contains(key) else { break }
                if visit(key, current.value) == .stop {
                    try remove(cursor)  // the next move then lands on the record after it
                }
                entry = try cursor.next()
            }
        }
        while next < incoming.count {
            puts.append(next)
            result.added.append(incoming[next].id)
            next += 1
        }
        return (puts, result)
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

/// LMDB's key order (byte-wise, a prefix first) with `memcmp`: the generic
/// `lexicographicallyPrecedes` costs several times more, and sorting calls this ~20 times per model.
@inline(__always)
func keyPrecedes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    a.withUnsafeBufferPointer { x in
        b.withUnsafeBufferPointer { y in
            let common = min(x.count, y.count)
            let order = common == 0 ? 0 : memcmp(x.baseAddress!, y.baseAddress!, common)
            return order != 0 ? order < 0 : x.count < y.count
        }
    }
}
