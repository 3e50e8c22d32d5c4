import Dispatch
@testable import Hoard
import Synchronization
import Testing

@Suite("Single flight: a bounded wait")
struct SingleFlightTests {
    @Test("a deadline that passes before the fetch has called its upstream does not end the wait; once it has, it does")
    func deadlineBeforeTheCall() async throws {
        let flights = SingleFlight<Int>()
        let joined = flights.join([[1]], invalidated: { _, _ in false })
        let group = try #require(joined.toFetch?.group)
        let ended = Atomic<Bool>(false)
        let waiter = Task {
            defer { ended.store(true, ordering: .relaxed) }
            return try await flights.wait(
                joined.tickets[0], until: .now() + .milliseconds(10), keepingItRunning: true)
        }
        // Not synchronization: the deadline passes ten times over while no task has called the
        // upstream (as in a process whose threads are all busy), and the wait must go on.
        try await Task.sleep(for: .milliseconds(100))
        let endedEarly = ended.load(ordering: .relaxed)
        #expect(!endedEarly, "the wait ended before the fetch called its upstream")
        flights.markCalling(group)
        await #expect(throws: SingleFlight<Int>.TimedOut.self) { try await waiter.value }
    }

    @Test("an answer that came before the deadline is waited for while it is stored")
    func answeredBeforeTheDeadline() async throws {
        let flights = SingleFlight<Int>()
        let joined = flights.join([[1]], invalidated: { _, _ in false })
        let (group, keys) = try #require(joined.toFetch)
        flights.markCalling(group)
        flights.markAnswered(group)
        let waiter = Task {
            try await flights.wait(joined.tickets[0], until: .now() + .milliseconds(10), keepingItRunning: true)
        }
        // Not synchronization: the deadline passes while the answer is being stored.
        try await Task.sleep(for: .milliseconds(100))
        flights.finish(group, keys: keys) { _ in .success(7) }
        #expect(try await waiter.value == 7)
    }
}
