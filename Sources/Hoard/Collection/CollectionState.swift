internal import Synchronization

/// What every handle of one collection shares within a process: one per collection name and
/// store (``Store/collection(_:named:timeToLive:migration:)`` hands out handles that point here),
/// so that two handles never keep two copies of state that must be one.
final class CollectionState: Sendable {
    /// Keys of records read in an older version, to rewrite (``MigrationPolicy/lazy``).
    let pendingMigrations = Mutex<Set<[UInt8]>>([])
}
