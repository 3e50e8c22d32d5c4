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
        case .lazyTouch, .migrate:
            break
        case .purge:
            for (id, record) in a where record.expiresAt.map({ $0 <= now }) ?? false { a[id] = nil }
        }
    }
}
