@_spi(LMDB) public import Hoard
import LMDB
import Synchronization
import Foundation

/// How the workload runs its operations. Anything but `.correct` breaks a promise on purpose, so
/// that the suite can show the driver catching it.
public enum WorkloadMode: String, Sendable, CaseIterable {
    /// Every operation in one transaction, acknowledged after its commit returns.
    case correct
    /// Broken: puts, pairs and synchronizes run as two transactions (first half, second half).
    case split
    /// Broken: each operation is acknowledged before it runs.
    case earlyAck = "early-ack"
}

/// The durability modes by the names the workload's `--durability` takes.
public let durabilityNames: [(name: String, durability: Hoard.Durability)] = [
    ("durable", .durable), ("cache", .riskLastCommitOnOSCrash), ("nosync", .riskStoreOnOSCrash),
]

extension Hoard.Durability {
    /// The mode's name on the workload's command line.
    public var workloadName: String { durabilityNames.first { $0.durability == self }?.name ?? "durable" }

    /// The mode named `name` (`durable` when `nil` or unknown).
    public init(workloadName name: String?) {
        self = durabilityNames.first { $0.name == name }?.durability ?? .durable
    }
}

/// The store's clock while the workload runs: the logical clock of the current operation.
let logicalNow = Atomic<Int64>(0)

/// Opens the workload's store with its logical clock.
public func openWorkloadStore(
    _ path: String, durability: Hoard.Durability, clock: (@Sendable () -> Int64)? = nil
) throws -> Store {
    // The logical clock counts milliseconds, as records store times; the store takes a Date.
    let milliseconds = clock ?? { logicalNow.load(ordering: .relaxed) }
    return try Store(
        path: path,
        options: .init(durability: durability, clock: { Date(timeIntervalSince1970: Double(milliseconds()) / 1000) }))
}

/// Runs operation `index` against `store`.
public func execute(_ operation: Operation, index: Int, store: Store, mode: WorkloadMode) throws {
    logicalNow.store(Operation.clock(index), ordering: .relaxed)
    let a = try store.collection(Item.self)
    let b = try store.collection(Item.self, named: "B")
    /// Runs `body` on the first and the second half of `items`: one transaction, or two when split.
    func halves<T>(_ items: [T], _ body: (ArraySlice<T>, borrowing Hoard.WriteTransaction) throws -> Void) throws {
        if mode == .split {
            let middle = items.count / 2
            try store.write { txn in try body(items[..<middle], txn) }
            try store.write { txn in try body(items[middle...], txn) }
        } else {
            try store.write { txn in try body(items[...], txn) }
        }
    }
    switch operation {
    case .put(let items, let expiries):
        try halves(items) { part, txn in
            for item in part {
                try a.put(
                    item,
                    expiry: expiries[item.id].map { .at(Date(timeIntervalSince1970: Double($0) / 1000)) } ?? .never,
                    in: txn)
            }
        }
    case .delete(let ids):
        try store.write { txn in
            for id in ids { _ = try a.delete(id, in: txn) }
        }
    case .pair(let itemsA, let itemsB, let deleteB):
        // Bulk puts: one call for each collection's items.
        if mode == .split {
            try store.write { txn in try a.put(itemsA, in: txn) }
            try store.write { txn in
                try b.put(itemsB, in: txn)
                for id in deleteB { _ = try b.delete(id, in: txn) }
            }
        } else {
            try store.write { txn in
                try a.put(itemsA, in: txn)
                try b.put(itemsB, in: txn)
                for id in deleteB { _ = try b.delete(id, in: txn) }
            }
        }
    case .sync(let fresh, let range):
        let scope: SynchronizeScope<Item> = range.map { .range(from: $0.lowerBound, through: $0.upperBound) } ?? .all
        if mode == .split, let range {
            // Two halves of the scope, each synchronized on its own.
            let middle = range.lowerBound + (range.upperBound - range.lowerBound) / 2
            try a.synchronize(
                with: fresh.filter { $0.id <= middle }, scope: .range(from: range.lowerBound, through: middle))
            try a.synchronize(
                with: fresh.filter { $0.id > middle }, scope: .range(from: middle + 1, through: range.upperBound))
        } else if mode == .split {
            try a.synchronize(
                with: fresh.filter { $0.id < Operation.idSpace / 2 },
                scope: .range(from: nil, through: Operation.idSpace / 2 - 1))
            try a.synchronize(
                with: fresh.filter { $0.id >= Operation.idSpace / 2 },
                scope: .range(from: Operation.idSpace / 2, through: nil))
        } else {
            try a.synchronize(with: fresh, scope: scope)
        }
    case .oldWrite(let items):
        try store.collection(ItemV1.self, named: "Item").put(items.map(ItemV1.init))
    case .lazyTouch(let ids):
        let lazy = try store.collection(Item.self, migration: .lazy)
        for id in ids { _ = try lazy.get(id) }
        try lazy.flushMigrations()
    case .migrate:
        try a.migrate(batchSize: 100)
    case .purge:
        try a.purgeExpired()
    case .copy:
        // Done once: a copy that was made before a kill is there, whole (it is named only once flushed).
        let target = Operation.copyPath(of: store.environment.path, index: index)
        if access(target + "/data.mdb", F_OK) != 0 {
            try store.environment.copy(to: target, compacting: index % 2 == 0)
        }
    }
}

/// The value after `--name` on this process's command line (the workload's and the soak's options).
public func commandLineValue(_ name: String) -> String? {
    let arguments = CommandLine.arguments
    guard let index = arguments.firstIndex(of: "--\(name)"), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}
