import Foundation
import Hoard
import HoardTestSupport
import MetricsTestKit
import Testing

@Suite("Store maintenance")
struct MaintenanceTests {
    @Test("one pass purges every collection's expired records without model types, and sets the gauges")
    func runOnce() throws {
        let metrics = TestMetrics()
        let clock = ManualClock()
        var options = Store.Options.testing(clock: clock)
        options.metricsFactory = metrics
        try withTemporaryStore(options: options) { store in
            let notes = try store.collection(Note.self, timeToLive: .seconds(10))
            let tags = try store.collection(Tag.self)
            try notes.put([
                Note(id: 1, text: "a", stars: 1, pinned: false), Note(id: 2, text: "b", stars: 2, pinned: false),
            ])
            try notes.put(Note(id: 3, text: "kept", stars: 3, pinned: false), expiry: .never)
            try tags.put(Tag(id: "lmdb", uses: 1), expiry: .after(.seconds(5)))
            try tags.put(Tag(id: "swift", uses: 2))
            clock.advance(by: .seconds(11))
            StoreMaintenance(store: store).runOnce()
            #expect(try notes.count() == 1 && notes.get(3) != nil)
            #expect(try tags.count() == 1 && tags.get("swift") != nil)
            #expect(
                metrics.counterTotal(label: "hoard_expired_purged_total", dimensions: [("collection", "Note")]) == 2)
            #expect(try metrics.expectGauge("hoard_store_used_bytes").lastValue ?? 0 > 0)
            #expect(try store.purgeExpired().isEmpty)  // nothing left to purge
        }
    }

    @Test("run() purges on its own, and returns when its task is cancelled")
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
            #expect(running.isCancelled)
        }
    }
}
