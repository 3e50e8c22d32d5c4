@testable import Hoard
import HoardTestSupport
import HoardTesting
import MetricsTestKit
import TestSupport
import Testing

/// Every kind of removal, each in a store of its own, checked against every removal counter:
/// the statistics (``CollectionStatistics/removed``, ``CollectionStatistics/evictedBytes``,
/// ``CollectionStatistics/tagInvalidations``), the metrics as the Metrics article defines them
/// (`hoard_removed_records_total` by `reason`, `hoard_evicted_bytes_total`,
/// `hoard_tag_invalidations_total`), and the change event observers get. A kind that counted
/// under another reason, counted twice, or told observers something else fails here.
@Suite("Removals: one count and one change event for every kind")
struct RemovalKindsTests {
    enum Kind: String, CaseIterable, CustomTestStringConvertible {
        case deleteByID, deleteAll, invalidateByID, invalidateTag, invalidateAll, remoteInvalidation, eviction
        case purgeExpired, synchronize
        var testDescription: String { rawValue }
    }

    /// The notes every store starts with: 1 to 5, of which 1 and 2 are tagged "red".
    static let notes = (1...5).map { Note(id: Int64($0), text: "note \($0)", stars: $0, pinned: false) }

    @Test("counted under its reason only, with the change observers see", arguments: Kind.allCases)
    func kind(_ kind: Kind) async throws {
        let metrics = TestMetrics()
        let clock = ManualClock()
        var options = Store.Options.testing(clock: clock)
        options.metricsFactory = metrics
        try await withTemporaryDirectory { directory in
            let store = try Store(path: directory + "/store", options: options)
            let notes = try store.collection(
                Note.self, named: "notes", timeToLive: kind == .purgeExpired ? .seconds(10) : nil,
                capacity: kind == .eviction ? .records(5) : nil)
            // Following a bus for the first time resets a store, before its records are written.
            let log = InMemoryLog()
            let bus = InMemoryBus(store: store, log: log)
            if kind == .remoteInvalidation { try await bus.catchUp() }
            try synchronously {
                try notes.put(Self.notes[0], tags: ["red"])
                try notes.put(Self.notes[1], tags: ["red"])
                try notes.put(Array(Self.notes[2...]))
            }
            var changes = notes.changes().makeAsyncIterator()

            var expected = RemovalCounts()
            /// What observers must see of the removal: the records named, or a clear.
            let event: ChangeBatch<Int64>.Content
            switch kind {
            case .deleteByID:
                #expect(try synchronously { try notes.delete(3) })
                expected.deleted = 1
                event = .records([3: .deleted])
            case .deleteAll:
                #expect(try await notes.deleteAll() == 5)
                expected.deleted = 5
                event = .cleared(then: [:])
            case .invalidateByID:
                try await notes.invalidate([2, 4])
                expected.invalidated = 2
                event = .records([2: .deleted, 4: .deleted])
            case .invalidateTag:
                #expect(try await notes.invalidate(tag: "red") == 2)
                expected.invalidated = 2
                event = .records([1: .deleted, 2: .deleted])
            case .invalidateAll:
                #expect(try await notes.invalidateAll() == 5)
                expected.invalidated = 5
                event = .cleared(then: [:])
            case .remoteInvalidation:
                // Another replica invalidates 1 and 5; this store applies it from the shared log.
                let other = try Store(path: directory + "/other", options: .testing(clock: clock))
                let theirs = try other.collection(Note.self, named: "notes")
                try await theirs.invalidate([1, 5])
                try await InMemoryBus(store: other, log: log).publish()
                let applied = try await bus.catchUp()
                #expect(applied.removed == 2)
                expected.remote = 2
                event = .records([1: .deleted, 5: .deleted])
            case .eviction:
                try synchronously {
                    try notes.put([
                        Note(id: 6, text: "new", stars: 6, pinned: false),
                        Note(id: 7, text: "new", stars: 7, pinned: false),
                    ])
                }
                expected.evicted = 2
                event = .records([:])  // two of 1…5 evicted, 6 and 7 stored: checked below
            case .purgeExpired:
                try synchronously { try notes.put(Note(id: 9, text: "kept", stars: 9, pinned: false), expiry: .never) }
                _ = try await nextBatch(&changes)  // the put of 9
                clock.advance(by: .seconds(11))
                #expect(try synchronously { try notes.purgeExpired() } == 5)
                expected.expired = 5
                event = .records([1: .purged, 2: .purged, 3: .purged, 4: .purged, 5: .purged])
            case .synchronize:
                let result = try await notes.synchronize(with: Array(Self.notes[..<3]))
                #expect(result.removed.sorted() == [4, 5])
                expected.synchronized = 2
                event = .records([4: .deleted, 5: .deleted])
            }

            // The statistics: this reason only.
            let statistics = notes.statistics()
            #expect(statistics.removed == expected, "\(kind)")
            #expect(statistics.tagInvalidations == (kind == .invalidateTag ? 1 : 0))
            #expect((statistics.evictedBytes > 0) == (kind == .eviction))
            // The metrics: `hoard_removed_records_total` for each reason as the statistics count it.
            let labels = [("collection", "notes")]
            let byReason = [
                ("deleted", expected.deleted), ("invalidated", expected.invalidated), ("remote", expected.remote),
                ("synchronized", expected.synchronized), ("expired", expected.expired), ("evicted", expected.evicted),
            ]
            #expect(Set(byReason.map(\.0)) == Set(RecordRemoval.allCases.map(\.label)))
            // A write's tally keeps one lane a reason: a reason beyond its lanes would trap.
            #expect(RecordRemoval.allCases.count <= RemovalTally().removed.scalarCount)
            for (reason, count) in byReason {
                let total = metrics.counterTotal(
                    label: "hoard_removed_records_total", dimensions: labels + [("reason", reason)])
                #expect(total == Int64(count), "\(kind): reason \(reason)")
            }
            #expect(
                metrics.counterTotal(label: "hoard_evicted_bytes_total", dimensions: labels)
                    == Int64(statistics.evictedBytes))
            #expect(
                metrics.counterTotal(label: "hoard_tag_invalidations_total", dimensions: labels)
                    == Int64(statistics.tagInvalidations))

            // The change observers get: one batch for the removal's commit.
            let batch = try await nextBatch(&changes)
            switch (kind, batch.content, event) {
            case (.eviction, .records(let records), _):
                #expect(records.filter { $0.value == .stored }.keys.sorted() == [6, 7])
                let evicted = records.filter { $0.value == .evicted }.keys
                #expect(evicted.count == 2 && evicted.allSatisfy { (1...5).contains($0) }, "\(records)")
            case (_, .records(let records), .records(let wanted)):
                #expect(records == wanted)
            case (_, .cleared(then: let records), .cleared(then: let wanted)):
                #expect(records == wanted)
            default:
                Issue.record("\(kind): observers got \(batch.content), not \(event)")
            }
            let added = kind == .purgeExpired ? 1 : kind == .eviction ? 2 : 0
            #expect(try notes.count() == 5 + added - expected.total)
        }
    }
}
