internal import LMDB

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
    /// Damaged records and records of newer versions, overwritten or removed.
    var replaced: [HoardError] = []
    /// Damaged records a predicate scope cannot place, untouched.
    var leftAlone: [HoardError] = []
    var unchanged = 0

    init() {}

    /// - Parameters:
    ///   - forEachStored: walks the stored scope in key order.
    ///   - inScope: for a predicate scope, whether a stored record (not in `fresh`) matches; `nil` when it does not decode.
    ///   - sameContent: whether a record of an older version or record format (its header) holds the
    ///     same content as fresh entry `index`.
    init(
        fresh: FreshBytes, now: Int64, collection: String, keyKind: KeyKind, currentVersion: Int, hasPredicate: Bool,
        forEachStored: ((UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> LMDB.IterationStep) throws -> Void,
        inScope: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Bool?,
        sameContent: (RecordHeader, UnsafeRawBufferPointer, Int) -> Bool
    ) rethrows {
        self.init()
        try withoutActuallyEscaping(inScope) { inScope in
            try withoutActuallyEscaping(sameContent) { sameContent in
                try merge(
                    fresh, now, Reporter(collection: collection, keyKind: keyKind, currentVersion: currentVersion),
                    hasPredicate, forEachStored, inScope, sameContent)
            }
        }
    }

    private mutating func merge(
        _ fresh: FreshBytes, _ now: Int64, _ report: Reporter, _ hasPredicate: Bool,
        _ forEachStored: ((UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> LMDB.IterationStep) throws -> Void,
        _ inScope: @escaping (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Bool?,
        _ sameContent: @escaping (RecordHeader, UnsafeRawBufferPointer, Int) -> Bool
    ) rethrows {
        let currentVersion = report.currentVersion
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
            let header: RecordHeader
            let payload: UnsafeRawBufferPointer
            do throws(RecordDamage) {
                (header, payload) = try RecordHeader.parse(record)
            } catch {
                let damaged = report.damaged(key, error.reason)
                if matched {
                    plan.replaced.append(damaged)
                    plan.puts.append(next)
                    plan.added.append(next)
                    next += 1
                } else if hasPredicate {
                    plan.leftAlone.append(damaged)
                } else {
                    plan.replaced.append(damaged)
                    plan.discarded.append(Array(key))
                }
                return .next
            }
            guard matched else {
                if hasPredicate {
                    guard let matches = inScope(record, key) else {
                        plan.leftAlone.append(
                            report.damaged(key, "it does not decode, so the scope's predicate cannot be checked"))
                        return .next
                    }
                    if !matches { return .next }
                }
                if header.version > currentVersion {
                    plan.replaced.append(report.newer(key, header.version))
                }
                plan.removed.append(Array(key))
                return .next
            }
            if header.isExpired(at: now) {
                plan.puts.append(next)
                plan.added.append(next)
            } else if header.version == currentVersion && header.isCurrentFormat {
                if !bytesEqual(fresh.payload(next), payload) {
                    plan.puts.append(next)
                    plan.updated.append(next)
                } else {
                    plan.unchanged += 1
                }
            } else if header.version > currentVersion {
                plan.replaced.append(report.newer(key, header.version))
                plan.puts.append(next)
                plan.updated.append(next)
            } else {
                plan.puts.append(next)
                if sameContent(header, payload, next) {
                    plan.migrated.append(next)
                } else {
                    plan.updated.append(next)
                }
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

/// How a merge names the records it cannot keep: as the errors a read of them would throw.
struct Reporter {
    let collection: String
    let keyKind: KeyKind
    let currentVersion: Int

    func damaged(_ key: UnsafeRawBufferPointer, _ reason: String) -> HoardError {
        .corruptRecord(collection: collection, key: StoredKey(key, kind: keyKind), reason: reason)
    }

    func newer(_ key: UnsafeRawBufferPointer, _ version: Int) -> HoardError {
        .newerRecord(
            collection: collection, key: StoredKey(key, kind: keyKind), version: version, current: currentVersion)
    }
}
