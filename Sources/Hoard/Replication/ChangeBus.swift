/// What an application calls on the bus that carries its store's changes to the other replicas,
/// whichever bus it is: HoardPostgres's `PostgresBus` in production, HoardTesting's `InMemoryBus`
/// in tests, so that a test makes the calls production makes.
///
/// ```swift
/// try await users.invalidate(42)
/// let position = try await bus.flush()
/// let everywhere = try await bus.waitUntilApplied(through: position, timeout: .seconds(2))
/// ```
public protocol ChangeBus: Sendable {
    /// Publishes what the store's outbox holds now, and returns the log's position after it:
    /// give it to ``waitUntilApplied(through:timeout:)`` for a read of this write on every replica.
    ///
    /// - Throws: what the bus's log throws when it cannot be reached (the keys stay in the outbox),
    ///   or ``HoardError/storage(_:)`` when the store fails.
    @discardableResult
    func flush() async throws -> Int64

    /// Waits until every replica on the bus has applied the log through `sequence`; `false` when
    /// `timeout` passes first.
    ///
    /// - Throws: `CancellationError`, or what the bus's log throws when it cannot be reached.
    func waitUntilApplied(through sequence: Int64, timeout: Duration) async throws -> Bool
}
