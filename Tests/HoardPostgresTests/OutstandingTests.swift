#if Postgres
@testable import HoardPostgres
import Testing

/// The bus's unstructured tasks: what `run()` waits for before it returns, so that the store it
/// holds is released (no PostgreSQL needed).
@Suite struct OutstandingTests {
    final class Token: Sendable {}
    /// Read and written by the test's task only, one step after another.
    final class WeakToken: @unchecked Sendable { weak var value: Token? }

    @Test func aStepGivenUpOnIsWaitedForUntilItHasLetGoOfWhatItHolds() async throws {
        let outstanding = Outstanding()
        let release = Wakeup()
        let seen = release.generation
        let weak = WeakToken()
        do {
            let token = Token()
            weak.value = token
            await #expect(throws: PostgresBusTimeout.self) {
                try await withTimeout(.milliseconds(1), "holding", in: outstanding) {
                    // A step that does not heed its cancellation (an unstructured task's value).
                    await Task { await release.wait(after: seen) }.value
                    _ = token
                }
            }
        }
        #expect(weak.value != nil, "the step given up on still runs and holds its token")
        #expect(await !outstanding.drained(until: .now), "and counts as running")
        #expect(outstanding.steps == ["holding"], "named by what it does")
        release.signal()
        #expect(await outstanding.drained(until: .now + .seconds(20)))
        #expect(outstanding.steps.isEmpty)
        #expect(weak.value == nil, "once drained, nothing the step captured is held")
    }

    @Test func drainedReturnsAtOnceWhenNothingRunsAndAfterEveryQueuedStep() async throws {
        let outstanding = Outstanding()
        #expect(await outstanding.drained(until: .now))
        let queue = SerialQueue(outstanding: outstanding)
        let weak = WeakToken()
        do {
            let token = Token()
            weak.value = token
            let value = try await queue.run("seven") { () -> Int in
                _ = token
                return 7
            }
            #expect(value == 7)
        }
        #expect(await outstanding.drained(until: .now + .seconds(20)))
        #expect(weak.value == nil)
    }
}
#endif
