import Hoard
import TestSupport
public import VariableCoding
import VariableCodingMacros

// The workload's operations, generated from (seed, index) alone, so that the workload and the
// driver that checks it derive the same sequence without talking about it. Every operation is
// idempotent: the workload resumes after a kill at the first operation the store does not show,
// and running an operation that did commit once more changes nothing.

/// A cached item as the current app stores it (local key set 2 renamed version 1's keys). Its
/// coding is generated (`@VariablyCoded`), so the crash runs go through the store's generated put
/// and get; `ItemV1`'s is written by hand, the ordinary path.
@VariablyCoded
public struct Item: VariablyCodable, Identifiable, Equatable, Sendable {
    public var id: Int64
    public var name: String
    public var value: Int

    public init(id: Int64, name: String, value: Int) { (self.id, self.name, self.value) = (id, name, value) }

    public static let keySets = KeySets<Item>(local: [
        1: [\.id: "ID", \.name: "N", \.value: "V"],
        2: [\.id: "ID", \.name: "NAME", \.value: "VALUE"],
    ])
}

/// The same item as the previous app version stored it: key set 1 only.
public struct ItemV1: VariablyCodable, Identifiable, Sendable {
    public var id: Int64
    public var name: String
    public var value: Int

    public init(_ item: Item) { (id, name, value) = (item.id, item.name, item.value) }

    public static let keySets = KeySets<ItemV1>(local: [1: [\.id: "ID", \.name: "N", \.value: "V"]])

    public init(from container: DecodingContainer<ItemV1>) throws {
        id = try container.decodeValue(for: \.id)
        name = try container.decodeValue(for: \.name)
        value = try container.decodeValue(for: \.value)
    }

    public func encode(to container: inout EncodingContainer<ItemV1>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(name, for: \.name)
        try container.encodeValue(value, for: \.value)
    }
}

/// One committed step of the workload.
public enum Operation: Sendable {
    /// Puts into collection A in one transaction; some items expire at the given time.
    case put([Item], expiresAt: [Int64: Int64])
    /// Deletes from A in one transaction.
    case delete([Int64])
    /// One transaction over two collections: puts into A and B, deletes from B.
    case pair(a: [Item], b: [Item], deleteB: [Int64])
    /// Synchronizes A (or the IDs `range` of it) with a fresh list.
    case sync([Item], range: ClosedRange<Int64>?)
    /// The previous app version writes into A: key-set version 1 records.
    case oldWrite([Item])
    /// Reads some IDs through a lazily migrating handle, then flushes the write-backs.
    case lazyTouch([Int64])
    /// `migrate()` in batches of 100: several transactions, content unchanged.
    case migrate
    /// A copy of the store (compacted at even indices) to `copyPath(of:index:)`: content unchanged.
    case copy
    /// `purgeExpired()` on A.
    case purge

    /// Where operation `index`, a copy, puts the copy of the store at `store`: beside it.
    public static func copyPath(of store: String, index: Int) -> String { store + "-copy-\(index)" }

    /// The logical clock of operation `index`, in milliseconds: the store's clock while it runs.
    public static func clock(_ index: Int) -> Int64 { Int64(index) * 1_000 }

    /// IDs live in 0..<idSpace in both collections.
    public static let idSpace: Int64 = 4_000

    /// The operation at `index` of the sequence of `seed`.
    public static func at(_ index: Int, seed: UInt64) -> Operation {
        var rng = SeededGenerator(seed: seed &* 0x9E37_79B9_7F4A_7C15 ^ UInt64(index))
        func item(_ id: Int64) -> Item {
            // A small space of contents, so that synchronize also meets unchanged items.
            Item(id: id, name: "n\(Int.random(in: 0..<3, using: &rng))", value: Int.random(in: 0..<3, using: &rng))
        }
        func ids(_ count: Int) -> [Int64] {
            Array(Set((0..<count).map { _ in Int64.random(in: 0..<idSpace, using: &rng) })).sorted()
        }
        switch Int.random(in: 0..<100, using: &rng) {
        case 0..<28:
            let items = ids(Int.random(in: 1...400, using: &rng)).map(item)
            var expiries: [Int64: Int64] = [:]
            for item in items where Int.random(in: 0..<10, using: &rng) < 3 {
                expiries[item.id] = clock(index) + Int64.random(in: 1...40, using: &rng) * 1_000
            }
            return .put(items, expiresAt: expiries)
        case 28..<40:
            return .delete(ids(Int.random(in: 1...200, using: &rng)))
        case 40..<52:
            return .pair(
                a: ids(Int.random(in: 1...300, using: &rng)).map(item),
                b: ids(Int.random(in: 1...300, using: &rng)).map(item),
                deleteB: ids(Int.random(in: 0...100, using: &rng)))
        case 52..<72:
            let range: ClosedRange<Int64>? =
                Bool.random(using: &rng)
                ? nil
                : {
                    let lower = Int64.random(in: 0..<idSpace, using: &rng)
                    return lower...min(idSpace - 1, lower + Int64.random(in: 100...2_000, using: &rng))
                }()
            let span = range ?? 0...(idSpace - 1)
            let fresh = span.filter { _ in Int.random(in: 0..<10, using: &rng) < 7 }.map(item)
            return .sync(fresh, range: range)
        case 72..<82:
            return .oldWrite(ids(Int.random(in: 1...300, using: &rng)).map(item))
        case 82..<88:
            return .lazyTouch(ids(Int.random(in: 1...200, using: &rng)))
        case 88..<93:
            return .migrate
        case 93..<97:
            return .purge
        default:
            return .copy
        }
    }
}
