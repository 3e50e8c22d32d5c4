internal import LMDB

// Capacity: recording a collection's bound where it is opened, the bookkeeping of each write
// (BoundTracker), and what reads tell the eviction policy.

extension HoardCollection {
    /// The recorded capacity and what the collection holds against it; `nil` when it has none.
    ///
    /// - Throws: ``HoardError/corruptRegistry(collection:reason:)`` when the recorded capacity is
    ///   damaged; ``HoardError/storage(_:)`` when the storage fails.
    public func capacityUsage() throws -> CapacityUsage? {
        try store.capacityUsage(of: name)
    }

    /// Records `capacity` (when given and not the one recorded), evicting down to it in the same
    /// transaction, and makes the eviction policy when the collection is bounded.
    func applyCapacity(_ capacity: Capacity?) throws {
        if let capacity { try capacity.validate(collection: name) }
        let (recorded, stored) = try store.readLMDB { txn in
            (try StoredBound.read(name, in: store, txn: txn), try txn.count(in: database))
        }
        let strategy = capacity?.strategy ?? .frequency
        guard let capacity, !capacity.sameBound(as: recorded?.capacity ?? .unbounded), !store.options.readOnly else {
            if let recorded {
                _ = state.policy(sizedFor: recorded.capacity.trackedRecords(stored: stored), strategy: strategy)
            }
            return
        }
        try store.writeLMDB { txn in
            // Read again inside the write: another process may have changed it meanwhile.
            let current = try StoredBound.read(name, in: store, txn: txn)
            guard !capacity.isUnbounded else {
                try StoredBound.remove(name, in: store, txn: txn)
                return
            }
            var bound = StoredBound(capacity: Capacity(records: capacity.records, bytes: capacity.bytes), usedBytes: 0)
            if capacity.bytes != nil {
                bound.usedBytes =
                    if let current, current.capacity.bytes != nil {
                        current.usedBytes
                    } else {
                        try StoredBound.countBytes(in: database, txn: txn)
                    }
            }
            try bound.write(name, in: store, txn: txn)
            _ = state.policy(
                sizedFor: capacity.trackedRecords(stored: try txn.count(in: database)), strategy: strategy)
            // The writer's finish evicts down to the new bound.
            var writer = try writer(in: txn)
            try writer.finish(in: txn)
        }
        store.logger.info(
            "changed the capacity of a collection",
            metadata: [
                "collection": "\(name)", "recorded": "\(recorded?.capacity ?? .unbounded)", "now": "\(capacity)",
            ])
    }

    /// Tells the eviction policy of a bounded collection that `key` was asked for. No lock, no
    /// write: a few atomic counters in memory.
    @inline(__always)
    func noteAccess(_ key: UnsafeRawBufferPointer, hit: Bool) {
        guard let policy = state.policy else { return }
        policy.accessed(keyHash(key), hit: hit)
    }
}

extension Store {
    /// The recorded capacity of collection `name` and what it holds against it; `nil` when it has none.
    ///
    /// - Throws: ``HoardError/corruptRegistry(collection:reason:)`` when the recorded capacity is
    ///   damaged; ``HoardError/storage(_:)`` when the storage fails.
    public func capacityUsage(of name: String) throws -> CapacityUsage? {
        // The database is opened before the snapshot: LMDB opens databases in transactions of their own.
        guard let database = try recordDatabase(of: name) else { return nil }
        return try readLMDB { txn in
            guard let bound = try StoredBound.read(name, in: self, txn: txn) else { return nil }
            return CapacityUsage(
                capacity: bound.capacity, records: try txn.count(in: database),
                bytes: bound.capacity.bytes == nil ? nil : bound.usedBytes)
        }
    }
}
