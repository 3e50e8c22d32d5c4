// The public face of change observation: what a batch of changes says.

/// How a record changed.
public enum ChangeKind: UInt8, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Stored: put, synchronized in, or filled by read-through.
    case stored = 1
    /// Removed by a delete, a synchronize or an invalidation.
    case deleted = 2
    /// Removed to keep a bounded collection within its capacity.
    case evicted = 3
    /// Removed because it had expired (by a purge, or by a bounded collection making room).
    case purged = 4
    /// Marked expired by another replica's invalidation and kept: only in a change log written by
    /// an earlier version of Hoard, which another process may still run. This version removes such
    /// a record (``deleted``).
    case expired = 5

    /// The kind as `hoard watch` prints it: `stored`, `deleted`, `evicted`, `purged`, `expired`.
    public var description: String {
        switch self {
        case .stored: "stored"
        case .deleted: "deleted"
        case .evicted: "evicted"
        case .purged: "purged"
        case .expired: "expired"
        }
    }
}

/// Which processes made the commits of a batch.
public struct ChangeOrigin: OptionSet, Sendable, Hashable, CustomStringConvertible {
    /// The origins as bits: 1 this process, 2 other processes.
    public let rawValue: UInt8
    /// The origins of the bits `rawValue`.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Commits made by this process (through this ``Store``).
    public static let thisProcess = ChangeOrigin(rawValue: 1)
    /// Commits made by other processes that have the store open.
    public static let otherProcess = ChangeOrigin(rawValue: 2)

    /// The origin in words: "this process", "another process" or both.
    public var description: String {
        switch self {
        case .thisProcess: "this process"
        case .otherProcess: "another process"
        default: "this and other processes"
        }
    }
}

/// What changed in a collection over a range of commits (``HoardCollection/changes(limit:)``).
///
/// A subscriber that keeps up gets one batch a commit; one that lags gets the commits it has
/// not taken merged into one batch (each ID with the last way it changed), and past its limit a
/// batch that says only ``Content/unknown``.
public struct ChangeBatch<ID: HoardKey>: Sendable {
    /// The LMDB transaction ids of the commits the batch covers (every process's commits are
    /// numbered in one sequence).
    public var transactions: ClosedRange<Int>
    /// Who made those commits.
    public var origin: ChangeOrigin
    /// What they changed.
    public var content: Content

    /// What the commits of a batch changed.
    public enum Content: Sendable {
        /// These records changed, each with the last way it did.
        case records([ID: ChangeKind])
        /// The collection was emptied (`deleteAll()`, `invalidateAll()`), then these records changed.
        case cleared(then: [ID: ChangeKind])
        /// Which records changed is not known (another process's commit without a change log,
        /// or more changes than the subscriber's limit): read again what you need.
        case unknown
    }

    /// The records the batch names, with how each changed (empty for ``Content/unknown``).
    public var records: [ID: ChangeKind] {
        switch content {
        case .records(let records), .cleared(then: let records): records
        case .unknown: [:]
        }
    }
}
