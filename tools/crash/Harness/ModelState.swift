public import Hoard

/// What the store must hold after a prefix of the operations: the reference the driver checks.
public struct ModelState: Equatable, Sendable {
    public struct Record: Equatable, Sendable {
        public var item: Item
        public var expiresAt: Int64?
    }

    /// Collection A (`Item`): content and expiry. Key-set versions are not part of the model:
    /// a migration changes the spelling only, and verify checks every record's version.
    public var a: [Int64: Record] = [:]
    /// Collection B (`Item`, named "B"): content.
    public var b: [Int64: Item] = [:]

    public init() {}

    /// Applies operation `index`, as the store does.
    public mutating func apply(_ operation: Operation, index: Int) {
        let now = Operation.clock(index)
        switch operation {
        case .put(let items, let expiries):
            for item in items { a[item.id] = Record(item: item, expiresAt: expiries[item.id]) }
        case .delete(let ids):
            for id in ids { a[id] = nil }
        case .pair(let itemsA, let itemsB, let deleteB):
            for item in itemsA { a[item.id] = Record(item: item, expiresAt: nil) }
            for item in itemsB { b[item.id] = item }
            for id in deleteB { b[id] = nil }
        case .sync(let fresh, let range):
            let freshByID = Dictionary(uniqueKeysWithValues: fresh.map { ($0.id, $0) })
            for id in a.keys where range.map({ $0.contains(id) }) ?? true && freshByID[id] == nil {
                a[id] = nil  // stale (also when expired)
            }
            for item in fresh {
                // A live record with the same content stays as it is (its expiry too); anything
                // else is rewritten, without expiry (the collection has no time to live).
                if let existing = a[item.id], existing.item == item, !(existing.expiresAt.map { $0 <= now } ?? false) {
                    continue
                }
                a[item.id] = Record(item: item, expiresAt: nil)
            }
        case .oldWrite(let items):
            for item in items { a[item.id] = Record(item: item, expiresAt: nil) }
        case .lazyTouch, .migrate, .copy:
            break
        case .purge:
            for (id, record) in a where record.expiresAt.map({ $0 <= now }) ?? false { a[id] = nil }
        }
    }
}

extension ModelState {
    /// The state after operations 1...`count` of the sequence of `seed`.
    public init(seed: UInt64, operations count: Int) {
        self.init()
        for index in stride(from: 1, through: count, by: 1) { apply(Operation.at(index, seed: seed), index: index) }
    }

    /// How this state differs from `expected`, counted, for a violation's message.
    public func difference(from expected: ModelState) -> String {
        let missing = expected.a.keys.filter { a[$0] == nil }.count
        let extra = a.keys.filter { expected.a[$0] == nil }.count
        let different = a.keys.filter { expected.a[$0] != nil && expected.a[$0] != a[$0] }.count
        let bMissing = expected.b.keys.filter { b[$0] == nil }.count
        let bExtra = b.keys.filter { expected.b[$0] == nil }.count
        return
            "A: \(missing) missing, \(extra) extra, \(different) different; B: \(bMissing) missing, \(bExtra) extra (of \(expected.a.count) and \(expected.b.count) expected)"
    }
}

/// What the workload's collections hold, as a model state. Read with the store's clock at 0, so
/// that expired records count as present.
public func workloadContents(of store: Store) throws -> ModelState {
    var state = ModelState()
    let a = try store.collection(Item.self)
    let b = try store.collection(Item.self, named: "B")
    try a.forEach { item in
        state.a[item.id] = ModelState.Record(item: item, expiresAt: nil)
        return .next
    }
    for id in Array(state.a.keys) { state.a[id]?.expiresAt = try a.header(of: id)?.expiresAt }
    try b.forEach { item in
        state.b[item.id] = item
        return .next
    }
    return state
}
