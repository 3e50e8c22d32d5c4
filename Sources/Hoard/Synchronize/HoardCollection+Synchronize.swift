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
    /// the stored scope; the resulting plan (deletes, writes) is applied after the pass. Memory
    /// grows with `fresh` (and the IDs reported), not with the stored collection.
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
        var unsorted = FreshBytes()
        unsorted.reserve(fresh.underestimatedCount)
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
            // The encoder's bytes are copied straight into the flat buffer, with no array per model.
            try key.withUnsafeBytes { rawKey in
                try withPayload(of: model, key: rawKey) { unsorted.append(key: key, payload: $0) }
            }
        }
        let incoming = unsorted.sorted()
        unsorted = FreshBytes()  // the unsorted copy goes as soon as the sorted one is made
        for index in incoming.keys.indices.dropFirst() where incoming.key(index) == incoming.key(index - 1) {
            let id = Model.ID(keyBytes: incoming.key(index)).map { "\($0)" } ?? describeKey(Array(incoming.key(index)))
            throw HoardError.invalidID(collection: name, reason: "\(id) appears twice in the fresh collection")
        }

        // 2. Merge with the stored scope, then apply the plan, in one transaction.
        let now = store.options.clock()
        let expiresAt = timeToLive.map { now + $0 }
        if dryRun {
            return try store.environment.read { txn in result(of: try plan(incoming, scope, range, now, txn), incoming) }
        }
        return try store.environment.write { txn in
            // The plan is made in one pass, then applied: the cursor never walks a tree that
            // changes under it. Memory: the fresh side and the keys reported, not the stored collection.
            let merged = try plan(incoming, scope, range, now, txn)
            for key in merged.removed + merged.discarded { try txn.delete(key, in: database) }
            let header = RecordHeader(version: currentVersion, writtenAt: now, expiresAt: expiresAt)
            try incoming.payloadBytes.withUnsafeBytes { payloads in
                for index in merged.puts {
                    let payload = UnsafeRawBufferPointer(rebasing: payloads[incoming.payloads[index]])
                    try txn.reserve(RecordHeader.size + payload.count, forKey: incoming.key(index), in: database) { record in
                        header.write(payload: payload, into: record)
                    }
                }
            }
            return result(of: merged, incoming)
        }
    }

    /// Runs the concrete merge over the stored scope in `txn`. Only the rare paths that need the
    /// model type (a predicate scope, a record of an older version) call back into generic code.
    private func plan<Access>(
        _ incoming: FreshBytes, _ scope: SynchronizeScope<Model>, _ range: KeyRange, _ now: Int64, _ txn: borrowing Transaction<Access>
    ) throws -> MergePlan {
        var predicate: (@Sendable (Model) -> Bool)?
        if case .matching(let matching) = scope { predicate = matching }
        return try MergePlan(
            fresh: incoming, now: now, currentVersion: currentVersion, hasPredicate: predicate != nil,
            forEachStored: { visit in try txn.forEach(in: database, range: range, visit) },
            inScope: { record, key in
                // Outside the fresh side, a record is in scope only if its model matches; nil: it does not decode.
                guard let predicate, let model = try? decode(record, key: { Array(key) }, now: .min) else { return nil }
                return predicate(model)
            },
            sameContent: { version, payload, index in
                // An older version: the same content re-encodes to the fresh bytes.
                guard localVersions.contains(version), let old = try? decodePayload(payload, version: version) else { return false }
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
        result.unchanged = plan.unchanged
        return result
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

/// `keyPrecedes` over two slices of the fresh side's key buffer.
@inline(__always)
func keyPrecedes(_ a: ArraySlice<UInt8>, _ b: ArraySlice<UInt8>) -> Bool {
    b.withUnsafeBytes { keyPrecedes(a, $0) }
}

/// `keyPrecedes` with the second key in LMDB's memory.
@inline(__always)
func keyPrecedes(_ a: ArraySlice<UInt8>, _ b: UnsafeRawBufferPointer) -> Bool {
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

/// The fresh side of a synchronize: keys and encoded payloads, each kind in one flat buffer, and
/// no IDs. Concrete on purpose: `HoardCollection`'s methods run as unspecialized generic code, and
/// sorting an array of tuples holding the generic ID cost more than everything else together; a
/// million small arrays kept alive at once cost more in allocation and cache misses than the merge.
struct FreshBytes {
    var keys: [Range<Int>] = []
    var keyBytes: [UInt8] = []
    var payloads: [Range<Int>] = []
    var payloadBytes: [UInt8] = []

    /// How many entries `reserve` was told to expect.
    var expected = 0

    mutating func append(key: [UInt8], payload: UnsafeRawBufferPointer) {
        if keyBytes.isEmpty && expected > 1 {
            // Sized from the first entry, with room to spare: reserved pages that stay untouched
            // cost no memory, while growing step by step copies everything written so far.
            keyBytes.reserveCapacity(expected * (key.count + 8))
            payloadBytes.reserveCapacity(expected * (payload.count * 3 / 2 + 16))
        }
        let keyStart = keyBytes.count
        keyBytes.append(contentsOf: key)
        keys.append(keyStart..<keyBytes.count)
        let start = payloadBytes.count
        payloadBytes.append(contentsOf: payload)
        payloads.append(start..<payloadBytes.count)
    }

    func key(_ index: Int) -> ArraySlice<UInt8> { keyBytes[keys[index]] }
    func payload(_ index: Int) -> ArraySlice<UInt8> { payloadBytes[payloads[index]] }

    /// Room for `count` entries, so that the buffers do not grow (and copy) step by step.
    mutating func reserve(_ count: Int) {
        expected = count
        keys.reserveCapacity(count)
        payloads.reserveCapacity(count)
    }

    /// The same entries in key order: `self` when they are in order already, else a copy whose
    /// bytes lie in key order too, so that the merge reads both buffers front to back (reading
    /// the unsorted buffers at random cost a cache miss or two per model).
    ///
    /// Sorts (first 8 key bytes as a number, ranges) entries, comparing whole keys only when the
    /// first 8 bytes tie; the entries carry their ranges so that the copy reads them in order.
    func sorted() -> FreshBytes {
        if keys.indices.dropFirst().allSatisfy({ !keyPrecedes(key($0), key($0 - 1)) }) { return self }
        var order: [(prefix: UInt64, key: Range<Int>, payload: Range<Int>)] = keys.indices.map { (keyPrefix(key($0)), keys[$0], payloads[$0]) }
        order.sort { a, b in
            if a.prefix != b.prefix { return a.prefix < b.prefix }
            return keyPrecedes(keyBytes[a.key], keyBytes[b.key])
        }
        var result = FreshBytes()
        result.keys = Self.gather(order.lazy.map(\.key), count: order.count, from: keyBytes, into: &result.keyBytes)
        result.payloads = Self.gather(order.lazy.map(\.payload), count: order.count, from: payloadBytes, into: &result.payloadBytes)
        return result
    }

    /// Copies the byte `ranges` of `source` one after the other into `target` (empty); returns
    /// where each landed.
    private static func gather(
        _ ranges: some Sequence<Range<Int>>, count: Int, from source: [UInt8], into target: inout [UInt8]
    ) -> [Range<Int>] {
        [Range<Int>](unsafeUninitializedCapacity: count) { placed, placedCount in
            target = [UInt8](unsafeUninitializedCapacity: source.count) { bytes, bytesCount in
                source.withUnsafeBufferPointer { source in
                    var end = 0
                    for (i, range) in ranges.enumerated() {
                        // A non-empty range means both buffers have memory (a custom key may be empty).
                        if !range.isEmpty, let to = bytes.baseAddress, let from = source.baseAddress {
                            (to + end).initialize(from: from + range.lowerBound, count: range.count)
                        }
                        placed.initializeElement(at: i, to: end..<end + range.count)
                        end += range.count
                    }
                    bytesCount = end
                }
            }
            placedCount = count
        }
    }
}

/// The merge of the sorted fresh side with one pass over the stored scope, in concrete code:
/// which fresh entries to write (and why), which stored keys to remove.
struct MergePlan {
    var puts: [Int] = []
    var added: [Int] = []
    var updated: [Int] = []
    var migrated: [Int] = []
    /// Stale keys to delete, reported as removed.
    var removed: [[UInt8]] = []
    /// Damaged records to delete, reported in `replaced` only.
    var discarded: [[UInt8]] = []
    var replaced: [(key: String, reason: String)] = []
    var unchanged = 0

    init() {}

    /// - Parameters:
    ///   - forEachStored: walks the stored scope in key order.
    ///   - inScope: for a predicate scope, whether a stored record (not in `fresh`) matches; `nil` when it does not decode.
    ///   - sameContent: whether a record of an older `version` holds the same content as fresh entry `index`.
    init(
        fresh: FreshBytes, now: Int64, currentVersion: Int, hasPredicate: Bool,
        forEachStored: ((UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> IterationStep) throws -> Void,
        inScope: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Bool?,
        sameContent: (Int, UnsafeRawBufferPointer, Int) -> Bool
    ) rethrows {
        self.init()
        try withoutActuallyEscaping(inScope) { inScope in
            try withoutActuallyEscaping(sameContent) { sameContent in
                try merge(fresh, now, currentVersion, hasPredicate, forEachStored, inScope, sameContent)
            }
        }
    }

    private mutating func merge(
        _ fresh: FreshBytes, _ now: Int64, _ currentVersion: Int, _ hasPredicate: Bool,
        _ forEachStored: ((UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> IterationStep) throws -> Void,
        _ inScope: @escaping (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Bool?,
        _ sameContent: @escaping (Int, UnsafeRawBufferPointer, Int) -> Bool
    ) rethrows {
        let count = fresh.keys.count
        var next = 0
        var plan = MergePlan()
        defer { self = plan }
        try forEachStored { key, record in
            // Fresh entries before this stored key are new.
            while next < count, keyPrecedes(fresh.key(next), key) {
                plan.puts.append(next)
                plan.added.append(next)
                next += 1
            }
            let matched = next < count && bytesEqual(fresh.key(next), key)
            guard let (header, payload) = try? RecordHeader.parse(record) else {
                if matched {
                    plan.replaced.append((describeKey(Array(key)), "damaged header or checksum"))
                    plan.puts.append(next)
                    plan.added.append(next)
                    next += 1
                } else if hasPredicate {
                    plan.replaced.append((describeKey(Array(key)), "damaged; left alone: the predicate cannot be checked"))
                } else {
                    plan.replaced.append((describeKey(Array(key)), "damaged header or checksum; removed"))
                    plan.discarded.append(Array(key))
                }
                return .next
            }
            guard matched else {
                if hasPredicate {
                    guard let matches = inScope(record, key) else {
                        plan.replaced.append((describeKey(Array(key)), "does not decode; left alone: the predicate cannot be checked"))
                        return .next
                    }
                    if !matches { return .next }
                }
                if header.version > currentVersion {
                    plan.replaced.append((describeKey(Array(key)), "written by newer version \(header.version); removed"))
                }
                plan.removed.append(Array(key))
                return .next
            }
            if header.isExpired(at: now) {
                plan.puts.append(next)
                plan.added.append(next)
            } else if header.version == currentVersion {
                if bytesEqual(fresh.payload(next), payload) {
                    plan.unchanged += 1
                } else {
                    plan.puts.append(next)
                    plan.updated.append(next)
                }
            } else if header.version > currentVersion {
                plan.replaced.append((describeKey(Array(key)), "written by newer version \(header.version); replaced"))
                plan.puts.append(next)
                plan.updated.append(next)
            } else {
                plan.puts.append(next)
                if sameContent(header.version, payload, next) { plan.migrated.append(next) } else { plan.updated.append(next) }
            }
            next += 1
            return .next
        }
        while next < count {
            plan.puts.append(next)
            plan.added.append(next)
            next += 1
        }
    }
}

/// The first 8 bytes of `key` as a big-endian number (zero-padded): comparing two of them orders
/// keys as memcmp does, up to ties.
@inline(__always)
func keyPrefix(_ key: ArraySlice<UInt8>) -> UInt64 {
    var value: UInt64 = 0
    var index = key.startIndex
    for _ in 0..<8 {
        value = value << 8 | UInt64(index < key.endIndex ? key[index] : 0)
        index += 1
    }
    return value
}

