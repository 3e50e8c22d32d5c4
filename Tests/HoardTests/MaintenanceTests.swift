import Foundation
import Hoard
import HoardServiceLifecycle
import HoardTestSupport
import Logging
import MetricsTestKit
import ServiceLifecycle
import ServiceLifecycleTestKit
import Synchronization
import Testing

@Suite("Store maintenance")
struct MaintenanceTests {
    @Test("one pass purges every collection's expired records without model types, and sets the gauges")
    func runOnce() async throws {
        let metrics = TestMetrics()
        let clock = ManualClock()
        var options = Store.Options.testing(clock: clock)
        options.metricsFactory = metrics
        try await withTemporaryStore(options: options) { store in
            let notes = try store.collection(Note.self, timeToLive: .seconds(10))
            let tags = try store.collection(Tag.self)
            try await notes.put([
                Note(id: 1, text: "a", stars: 1, pinned: false), Note(id: 2, text: "b", stars: 2, pinned: false),
            ])
            try await notes.put(Note(id: 3, text: "kept", stars: 3, pinned: false), expiry: .never)
            try await tags.put(Tag(id: "lmdb", uses: 1), expiry: .after(.seconds(5)))
            try await tags.put(Tag(id: "swift", uses: 2))
            clock.advance(by: .seconds(11))
            await StoreMaintenance(store: store).runOnce()
            #expect(try notes.count() == 1 && notes.get(3) != nil)
            #expect(try tags.count() == 1 && tags.get("swift") != nil)
            #expect(
                metrics.counterTotal(
                    label: "hoard_removed_records_total", dimensions: [("collection", "Note"), ("reason", "expired")])
                    == 2)
            #expect(try metrics.expectGauge("hoard_store_used_bytes").lastValue ?? 0 > 0)
            #expect(try await store.purgeExpired(batchSize: 10).isEmpty)  // nothing left to purge
        }
    }

    @Test(
        "the batched purge resumes where each batch stopped, and keeps what is not expired",
        arguments: [1, 3, 7, 1_000])
    func batchedPurge(batchSize: Int) async throws {
        let clock = ManualClock()
        try await withTemporaryStore(options: .testing(clock: clock)) { store in
            let notes = try store.collection(Note.self)
            // Expired and kept records interleaved in key order, runs of each, so batches end on both.
            let expiring = Set((1...50).filter { $0 % 7 < 4 })
            for id in 1...50 {
                try await notes.put(
                    Note(id: Int64(id), text: "\(id)", stars: id, pinned: false),
                    expiry: expiring.contains(id) ? .after(.seconds(1)) : .never)
            }
            clock.advance(by: .seconds(2))
            let before = store.writeStatistics.commits
            let purged = try await store.purgeExpired(batchSize: batchSize)
            #expect(purged == ["Note": expiring.count])
            #expect(try notes.scan().map { Int($0.id) } == (1...50).filter { !expiring.contains($0) })
            // One write per batch of `batchSize` looked-at records.
            #expect(store.writeStatistics.commits - before == (50 + batchSize - 1) / batchSize)
        }
    }

    @Test("the purge keeps what read-through may still serve stale, and removes it once the window has passed")
    func purgeKeepsStaleServable() async throws {
        struct Down: Error {}
        let clock = ManualClock()
        try await withTemporaryStore(options: .testing(clock: clock)) { store in
            let notes = try store.collection(
                Note.self, timeToLive: .seconds(10), freshness: Freshness(staleIfError: .minutes(10)))
            let tags = try store.collection(Tag.self, timeToLive: .seconds(10))  // no window: purged at expiry
            try await notes.put(Note(id: 1, text: "stale but servable", stars: 1, pinned: false))
            try await tags.put(Tag(id: "gone", uses: 1))
            clock.advance(by: .seconds(11))
            #expect(try await store.purgeExpired(batchSize: 100) == ["Tag": 1])
            let served = try await notes.get(1, orFetch: { _ in throw Down() })
            #expect(served?.text == "stale but servable")  // stale-if-error had something to serve
            clock.advance(by: .minutes(10))
            #expect(try await store.purgeExpired(batchSize: 100) == ["Note": 1])
        }
    }

    @Test("added steps run with the store's; a failing step is logged and tried again")
    func addedSteps() async throws {
        try await withTemporaryStore { store in
            let runs = Mutex(0)
            var maintenance = StoreMaintenance(
                store: store, purgeInterval: nil, metricsInterval: nil, readerCheckInterval: nil)
            maintenance.every(.milliseconds(1), "failing on purpose") {
                let count = runs.withLock {
                    $0 += 1; return $0
                }
                if count == 1 { throw CocoaError(.fileNoSuchFile) }
            }
            let running = Task { await maintenance.run() }
            try await eventually("the step ran again after it failed") { runs.withLock { $0 } >= 3 }
            running.cancel()
            await running.value
        }
    }

    /// The time limit is the check that `run()` returns: a loop that ignored the cancellation
    /// would keep the test waiting past it, and fail it.
    @Test("run() purges on its own, and returns when its task is cancelled", .timeLimit(.minutes(1)))
    func runUntilCancelled() async throws {
        let clock = ManualClock()
        try await withTemporaryStore(options: .testing(clock: clock)) { store in
            let notes = try store.collection(Note.self, timeToLive: .seconds(10))
            try await notes.put(Note(id: 1, text: "short-lived", stars: 1, pinned: false))
            clock.advance(by: .seconds(11))
            let maintenance = StoreMaintenance(store: store, purgeInterval: .hours(1), metricsInterval: nil)
            let running = Task { await maintenance.run() }
            try await eventually("the first pass purged") { try notes.count() == 0 }
            running.cancel()
            await running.value  // returns: the wait for the next interval ends on cancellation
        }
    }

    @Test("as a Service in a ServiceGroup: runs, and returns on a graceful shutdown", .timeLimit(.minutes(1)))
    func lifecycleService() async throws {
        let clock = ManualClock()
        try await withTemporaryStore(options: .testing(clock: clock)) { store in
            let notes = try store.collection(Note.self, timeToLive: .seconds(10))
            try await notes.put(Note(id: 1, text: "short-lived", stars: 1, pinned: false))
            clock.advance(by: .seconds(11))
            let service = StoreMaintenance(store: store, purgeInterval: .hours(1), metricsInterval: nil).service
            try await testGracefulShutdown { trigger in
                let group = ServiceGroup(
                    services: [service], gracefulShutdownSignals: [], logger: Logger(label: "test"))
                let running = Task { try await group.run() }
                try await eventually("the service's first pass purged") { try notes.count() == 0 }
                trigger.triggerGracefulShutdown()
                try await running.value  // the group returns: the service ended without an error
            }
        }
    }
}
