import Foundation
import Hoard
import HoardTestSupport
import MetricsTestKit
import Testing

@Suite("Metrics through swift-metrics")
struct MetricsTests {
    @Test("gets, puts, deletes, purges, synchronize, fetches and commits are counted and timed, labelled by collection")
    func countsAfterKnownOperations() async throws {
        let metrics = TestMetrics()
        let clock = ManualClock()
        var options = Store.Options.testing(clock: clock)
        options.metricsFactory = metrics
        try await withTemporaryStore(options: options) { store in
            let notes = try store.collection(Note.self, named: "notes", timeToLive: .seconds(10))
            let other = try store.collection(Note.self, named: "other")
            // The synchronous calls (in an async context Swift would pick the async put and delete).
            func synchronousCalls() throws {
                try notes.put([
                    Note(id: 1, text: "a", stars: 1, pinned: false), Note(id: 2, text: "b", stars: 2, pinned: false),
                ])
                try notes.put(Note(id: 3, text: "c", stars: 3, pinned: false))
                try other.put(Note(id: 9, text: "elsewhere", stars: 0, pinned: false))
                #expect(try notes.get(1) != nil)
                #expect(try notes.get(2) != nil)
                #expect(try notes.get(42) == nil)
                #expect(try notes.delete(3))
                #expect(try !notes.delete(3))
            }
            try synchronousCalls()
            let labels = [("collection", "notes")]
            func total(_ label: String, _ more: [(String, String)] = []) -> Int64 {
                metrics.counterTotal(label: label, dimensions: labels + more)
            }
            #expect(total("hoard_gets_total", [("result", "hit")]) == 2)
            #expect(total("hoard_gets_total", [("result", "miss")]) == 1)
            #expect(total("hoard_puts_total") == 3)
            #expect(total("hoard_removed_records_total", [("reason", "deleted")]) == 1)
            #expect(metrics.counterTotal(label: "hoard_puts_total", dimensions: [("collection", "other")]) == 1)
            #expect(try metrics.expectTimer("hoard_get_duration_seconds", labels).values.count == 3)
            #expect(try metrics.expectTimer("hoard_put_duration_seconds", labels).values.count == 2)

            // Synchronize: runs and records by change.
            try await notes.synchronize(with: [
                Note(id: 1, text: "a", stars: 1, pinned: false), Note(id: 4, text: "d", stars: 4, pinned: false),
            ])
            #expect(total("hoard_synchronize_runs_total") == 1)
            #expect(total("hoard_synchronize_records_total", [("change", "added")]) == 1)
            #expect(total("hoard_synchronize_records_total", [("change", "removed")]) == 1)
            #expect(total("hoard_synchronize_records_total", [("change", "updated")]) == 0)

            // Expiry, read-through and the group commit's commits.
            clock.advance(by: .seconds(11))
            func purge() throws -> Int { try notes.purgeExpired() }
            #expect(try purge() == 2)
            #expect(total("hoard_removed_records_total", [("reason", "expired")]) == 2)
            _ = try await notes.get(5, orFetch: { id in Note(id: id, text: "fetched", stars: 0, pinned: false) })
            await #expect(throws: CancellationError.self) {
                try await notes.get(6, orFetch: { _ in throw CancellationError() })
            }
            #expect(total("hoard_fetches_total") == 2 && total("hoard_fetch_errors_total") == 1)
            // A bulk read-through counts each ID, in the metrics as in the statistics: 5 hits, 7 misses.
            let bulk = try await notes.get([5, 7]) { ids in
                ids.map { Note(id: $0, text: "", stars: 0, pinned: false) }
            }
            #expect(bulk.map(\.id) == [5, 7])
            let statistics = notes.statistics()
            #expect(total("hoard_gets_total", [("result", "hit")]) == Int64(statistics.hits) && statistics.hits == 3)
            #expect(
                total("hoard_gets_total", [("result", "miss")]) == Int64(statistics.misses) && statistics.misses == 4)
            let commits = store.writeStatistics
            #expect(try metrics.expectTimer("hoard_commit_duration_seconds").values.count == commits.commits)
            // One value a commit: the writes it carried, which add up to the writes committed.
            let carried = try metrics.expectRecorder("hoard_commit_writes").values
            #expect(carried.count == commits.commits && commits.commits >= 1 && carried.allSatisfy { $0 >= 1 })
            #expect(Int(carried.reduce(0, +)) == commits.writes + commits.failedWrites)

            // The gauges, set on demand.
            try store.publishMetrics()
            let used = try metrics.expectGauge("hoard_store_used_bytes").lastValue ?? 0
            let map = try metrics.expectGauge("hoard_store_map_bytes").lastValue ?? 0
            #expect(used > 0 && map >= used)
            #expect(try metrics.expectGauge("hoard_store_readers").lastValue != nil)
        }
    }
}
