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
        var unsorted = FreshSide<Model.ID>()
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
                // Encoded on its own, then appended: encode(_:appendingTo:) copies what the buffer holds.
                let payload = try encoder.encode(model)
                let start = unsorted.payloadBytes.count
                unsorted.payloadBytes.append(contentsOf: payload)
                unsorted.append(key: key, id: model.id, payload: start..<unsorted.payloadBytes.count)
            } catch {
                throw HoardError.encoding(collection: name, key: describeKey(Array(key)), underlying: error)
            }
        }
        let incoming = unsorted.sortedByKey()
        for index in incoming.keys.indices.dropFirst() where incoming.keys[index] == incoming.keys[index - 1] {
            throw HoardError.invalidID(collection: name, reason: "\(incoming.ids[index]) appears twice in the fresh collection")
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
            let header = RecordHeader(version: currentVersion, writtenAt: now, expiresAt: expiresAt)
            try incoming.payloadBytes.withUnsafeBytes { payloads in
                for index in merged.puts {
                    let payload = UnsafeRawBufferPointer(rebasing: payloads[incoming.payloads[index]])
                    try txn.reserve(RecordHeader.size + payload.count, forKey: incoming.keys[index], in: database) { record in
                        header.write(payload: payload, into: record)
                    }
                }
            }
            return merged.result
        }
    }

    /// The merge of the sorted fresh side with one cursor pass over the stored scope: stale
    /// records go to `remove` (which deletes them in a write, and does nothing in a dry run); the
    /// fresh models to write come back as indices into `incoming`, with the result to report.
    private func merge<Access>(
        _ incoming: FreshSide<Model.ID>,
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
        /// `key` points into the map: copied only on the rare paths that keep it.
        func visit(_ key: UnsafeRawBufferPointer, _ record: UnsafeRawBufferPointer) -> IterationStep {
            // Fresh models before this stored key are new.
            while next < incoming.count, keyPrecedes(incoming.keys[next], key) {
                puts.append(next)
                result.added.append(incoming.ids[next])
                next += 1
            }
            let matched = next < incoming.count && bytesEqual(incoming.keys[next][...], key)
            guard let (header, payload) = try? RecordHeader.parse(record) else {
                if matched {
                    result.replaced.append((describeKey(Array(key)), "damaged header or checksum"))
                    puts.append(next)
                    result.added.append(incoming.ids[next])
                    next += 1
                } else if case .matching = scope {
                    result.replaced.append((describeKey(Array(key)), "damaged; left alone: the predicate cannot be checked"))
                } else {
                    result.replaced.append((describeKey(Array(key)), "damaged header or checksum; removed"))
                    return .stop
                }
                return .next
            }
            guard matched else {
                if case .matching(let predicate) = scope {
                    // Outside the fresh side, a record is in scope only if its model matches.
                    guard let model = try? decode(record, key: Array(key), now: .min) else {
                        result.replaced.append((describeKey(Array(key)), "does not decode; left alone: the predicate cannot be checked"))
                        return .next
                    }
                    if !predicate(model) { return .next }
                }
                if header.version > currentVersion {
                    result.replaced.append((describeKey(Array(key)), "written by newer version \(header.version); removed"))
                }
                if let id = Model.ID(keyBytes: key) { result.removed.append(id) }
                return .stop
            }
            let freshPayload = incoming.payload(next)
            if header.isExpired(at: now) {
                puts.append(next)
                result.added.append(incoming.ids[next])
            } else if header.version == currentVersion {
                if bytesEqual(freshPayload, payload) {
                    result.unchanged += 1
                } else {
                    puts.append(next)
                    result.updated.append(incoming.ids[next])
                }
            } else if header.version > currentVersion {
                result.replaced.append((describeKey(Array(key)), "written by newer version \(header.version); replaced"))
                puts.append(next)
                result.updated.append(incoming.ids[next])
            } else {
                // An older version: the same content re-encodes to the fresh bytes.
                let old = try? decoders[header.version].map { try encoder.encode(try $0.decode(Model.self, from: payload)) }
                puts.append(next)
                if old.map({ $0[...] == freshPayload }) == true {
                    result.migrated.append(incoming.ids[next])
                } else {
                    result.updated.append(incoming.ids[next])
                }
            }
            next += 1
            return .next
        }

        try txn.withCursor(in: database) { cursor in
            // Every scope's range starts inclusively, or not at all.
            var entry = try range.lower.map { try cursor.seek(atLeast: $0.key) } ?? cursor.first()
            while let current = entry {
                guard range.contains(current.key) else { break }
                if visit(current.key, current.value) == .stop {
                    try remove(cursor)  // the next move then lands on the record after it
                }
                entry = try cursor.next()
            }
        }
        while next < incoming.count {
            puts.append(next)
            result.added.append(incoming.ids[next])
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

/// `keyPrecedes` with the second key in LMDB's memory.
@inline(__always)
func keyPrecedes(_ a: [UInt8], _ b: UnsafeRawBufferPointer) -> Bool {
    a.withUnsafeBytes { x in
        let common = min(x.count, b.count)
        let order = common == 0 ? 0 : x.baseAddress.flatMap { left in b.baseAddress.map { memcmp(left, $0, common) } } ?? 0
        return order != 0 ? order < 0 : x.count < b.count
    }
}

/// Whether `a` and `b` hold the same bytes (memcmp: `elementsEqual` is several times slower).
@inline(__always)
func bytesEqual(_ a: ArraySlice<UInt8>, _ b: UnsafeRawBufferPointer) -> Bool {
    guard a.count == b.count else { return false }
    guard let right = b.baseAddress, !a.isEmpty else { return true }
    return a.withUnsafeBytes { left in left.baseAddress.map { memcmp($0, right, b.count) == 0 } ?? false }
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

/// The fresh side of a synchronize: keys, IDs and encoded payloads (in one buffer), kept in
/// separate arrays so that ordering them never moves the generic `ID` through unspecialized code
/// (sorting an array of tuples holding it cost more than everything else put together).
struct FreshSide<ID> {
    var keys: [[UInt8]] = []
    var ids: [ID] = []
    var payloads: [Range<Int>] = []
    var payloadBytes: [UInt8] = []

    var count: Int { keys.count }

    mutating func append(key: [UInt8], id: ID, payload: Range<Int>) {
        keys.append(key)
        ids.append(id)
        payloads.append(payload)
    }

    func payload(_ index: Int) -> ArraySlice<UInt8> { payloadBytes[payloads[index]] }

    /// The same entries in LMDB's key order. Sorts (first 8 key bytes as a number, index) pairs,
    /// comparing whole keys only when the first 8 bytes tie; returns `self` when already in order.
    func sortedByKey() -> FreshSide {
        if keys.indices.dropFirst().allSatisfy({ !keyPrecedes(keys[$0], keys[$0 - 1]) }) { return self }
        var order: [(prefix: UInt64, index: Int)] = keys.indices.map { (keyPrefix(keys[$0]), $0) }
        order.sort { a, b in
            if a.prefix != b.prefix { return a.prefix < b.prefix }
            return keyPrecedes(keys[a.index], keys[b.index])
        }
        var sorted = FreshSide()
        sorted.keys.reserveCapacity(count)
        sorted.ids.reserveCapacity(count)
        sorted.payloads.reserveCapacity(count)
        sorted.payloadBytes = payloadBytes
        for (_, index) in order { sorted.append(key: keys[index], id: ids[index], payload: payloads[index]) }
        return sorted
    }
}

/// The first 8 bytes of `key` as a big-endian number (zero-padded): comparing two of them orders
/// keys as memcmp does, up to ties.
@inline(__always)
func keyPrefix(_ key: [UInt8]) -> UInt64 {
    var value: UInt64 = 0
    for index in 0..<8 { value = value << 8 | UInt64(index < key.count ? key[index] : 0) }
    return value
}

