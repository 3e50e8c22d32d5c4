import Foundation
import HoardTestSupport
import LMDB
import TestSupport
import Testing

@_spi(LMDB) @testable import Hoard

/// Bounded collections through the store: the bound after every commit against a reference
/// model, the errors, the recorded capacity, statistics, two writing processes and a writer
/// killed in the middle of evicting writes.
@Suite("Capacity")
struct CapacityTests {
    /// Records and bytes (evictions deleted as they are chosen, their sizes counted), and records
    /// alone (evictions deleted together at the settle's end, in key order).
    @Test(
        "after every write the bound holds, the byte count is exact, and nothing written is lost or altered",
        arguments: [Capacity(records: 40, bytes: 4_000), Capacity.records(40)])
    func randomizedAgainstReference(capacity: Capacity) throws {
        let seed = UInt64(ProcessInfo.processInfo.environment["HOARD_TEST_SEED"] ?? "") ?? 23
        var random = SplitMix(seed: seed)
        let clock = ManualClock()
        try withTemporaryStore(options: .testing(clock: clock)) { store in
            let notes = try store.collection(Note.self, capacity: capacity)
            /// The last value written under each ID that was not deleted since, and its expiry.
            var written: [Int64: (note: Note, expiresAt: Int64?)] = [:]
            func note(_ id: Int64) -> Note {
                Note(
                    id: id, text: String(repeating: "n", count: Int(random.next() % 120)),
                    stars: Int(random.next() % 5),
                    pinned: random.next() % 2 == 0)
            }
            func expiry() -> (Expiry, Int64?) {
                guard random.next() % 4 == 0 else { return (.never, nil) }
                let seconds = Int64(random.next() % 20) + 1
                return (.after(.seconds(seconds)), clock.read().storedMilliseconds + seconds * 1000)
            }
            for step in 0..<1_500 {
                var lastWritten: [Int64] = []
                switch random.next() % 10 {
                case 0...3:
                    let id = Int64(random.next() % 200)
                    let (expiry, at) = expiry()
                    let model = note(id)
                    try notes.put(model, expiry: expiry)
                    written[id] = (model, at)
                    lastWritten = [id]
                case 4, 5:
                    let ids = Set((0..<Int(random.next() % 12) + 1).map { _ in Int64(random.next() % 200) })
                    let models = ids.map(note)
                    let (expiry, at) = expiry()
                    try notes.put(models, expiry: expiry)
                    for model in models { written[model.id] = (model, at) }
                    lastWritten = Array(ids)
                case 6:
                    let id = Int64(random.next() % 200)
                    try notes.delete(id)
                    written[id] = nil
                case 7:
                    // A synchronize: sometimes more records than the capacity, refused whole.
                    let count = Int(random.next() % 50)
                    let fresh = Set((0..<count).map { _ in Int64(random.next() % 200) }).map(note)
                    let before = try contents(notes)
                    do {
                        try notes.synchronize(with: fresh)
                        #expect(fresh.count <= 40, "step \(step): a synchronize of \(fresh.count) was let through")
                        written = Dictionary(uniqueKeysWithValues: fresh.map { ($0.id, ($0, nil)) })
                        lastWritten = fresh.map(\.id)
                    } catch let error as HoardError where error.kind == .overCapacity {
                        #expect(try contents(notes) == before, "step \(step): a refused synchronize changed the store")
                    }
                case 8:
                    clock.advance(by: .seconds(Int64(random.next() % 5)))
                    try notes.purgeExpired()
                default:
                    for _ in 0..<20 { _ = try notes.get(Int64(random.next() % 200)) }
                }
                try checkBound(notes, capacity, step: step)
                let now = clock.read().storedMilliseconds
                for (id, stored) in try contents(notes) {
                    guard let expected = written[id] else {
                        Issue.record("step \(step): \(id) is stored but was deleted or never written")
                        continue
                    }
                    if expected.expiresAt.map({ $0 > now }) ?? true {
                        #expect(stored == expected.note, "step \(step): \(id) holds another value than was written")
                    }
                }
                for id in lastWritten {
                    #expect(
                        try notes.get(id) != nil || (written[id]?.expiresAt.map { $0 <= now } ?? false),
                        "step \(step): \(id), written by the last write, is gone")
                }
            }
            let statistics = notes.statistics()
            #expect(statistics.removed.evicted > 0)
            #expect(statistics.evictedBytes > statistics.removed.evicted * (8 + RecordHeader.minimumSize))
            #expect(statistics.puts > 0 && statistics.hits + statistics.misses > 0)
        }
    }

    @Test("a capacity below one record, a negative one and a write larger than the bound are refused clearly")
    func errors() throws {
        try withTemporaryStore { store in
            for capacity in [
                Capacity.records(0), .records(-5), .bytes(-1), .bytes(15), Capacity(records: 10, bytes: 0),
            ] {
                expectHoardError(.invalidCapacity, ["invalid capacity"]) {
                    _ = try store.collection(Note.self, capacity: capacity)
                }
            }
            #expect(try store.capacityUsage(of: "Note") == nil)

            let notes = try store.collection(Note.self, capacity: Capacity(records: 5, bytes: 300))
            try notes.put(Note(id: 1, text: "kept", stars: 1, pinned: false))
            let large = Note(id: 2, text: String(repeating: "x", count: 400), stars: 1, pinned: false)
            expectHoardError(
                .overCapacity, ["Note", "more than the capacity of 300 bytes", "nothing of it was stored"]
            ) {
                try notes.put(large)
            }
            expectHoardError(.overCapacity, ["6 records"]) {
                try notes.put((10..<16).map { Note(id: $0, text: "", stars: 0, pinned: false) })
            }
            expectHoardError(.overCapacity, ["fresh collection has 6 records, more than the capacity of 5"]) {
                try notes.synchronize(with: (10..<16).map { Note(id: $0, text: "", stars: 0, pinned: false) })
            }
            #expect(try notes.scan().map(\.id) == [1])
            #expect(try notes.capacityUsage()?.records == 1)
        }
    }

    @Test("the capacity is recorded: another handle or process keeps it, a new one replaces it and evicts at once")
    func recordedCapacity() throws {
        try withTemporaryStore { store in
            let first = try store.collection(Note.self, capacity: .records(100))
            try first.put((0..<100).map { Note(id: $0, text: "\($0)", stars: 0, pinned: false) })
            #expect(try first.capacityUsage() == CapacityUsage(capacity: .records(100), records: 100, bytes: nil))

            // No capacity given: the recorded one holds, also for this handle's writes.
            let second = try store.collection(Note.self)
            try second.put(Note(id: 1_000, text: "new", stars: 0, pinned: false))
            #expect(try second.count() == 100)

            // Another capacity: recorded, and the collection is brought within it in the same write.
            let third = try store.collection(Note.self, capacity: Capacity(records: 50, bytes: 50 * 60))
            let usage = try #require(try third.capacityUsage())
            #expect(usage.records <= 50)
            #expect(usage.bytes == (try scannedBytes(third)))
            #expect(try first.get(1_000) != nil)  // the newest write stays in the window

            let unbounded = try store.collection(Note.self, capacity: .unbounded)
            #expect(try unbounded.capacityUsage() == nil)
            try unbounded.put((2_000..<2_100).map { Note(id: $0, text: "", stars: 0, pinned: false) })
            #expect(try unbounded.count() > 100)
        }
    }

    @Test("a synchronize into a bounded collection keeps every fresh record and evicts the others")
    func synchronizeKeepsFresh() throws {
        try withTemporaryStore { store in
            let notes = try store.collection(Note.self, capacity: .records(20))
            try notes.put((0..<20).map { Note(id: $0, text: "old", stars: 0, pinned: false) })
            // A scope: only IDs 100… are the server's; the fresh side needs room the rest must give.
            let fresh = (100..<115).map { Note(id: Int64($0), text: "fresh", stars: 1, pinned: false) }
            try notes.synchronize(with: fresh, scope: .range(from: 100, through: 199))
            let stored = try notes.scan()
            #expect(stored.count == 20)
            #expect(stored.filter { $0.id >= 100 } == fresh)
            #expect(notes.statistics().removed.evicted == 15)
        }
    }

    /// With a byte capacity (evictions deleted as chosen) and without (deleted at each settle's end).
    @Test(
        "two processes writing one bounded collection at once keep its bound at every commit",
        arguments: [40_000, 0])
    func twoProcesses(bytes: Int) throws {
        let capacity = Capacity(records: 300, bytes: bytes == 0 ? nil : bytes)
        try withTemporaryDirectory { directory in
            let path = directory + "/store"
            let probe = try builtExecutable("LMDBProbe")
            let writers = try [0, 1_000_000].map { first in
                try ChildProcess(probe, ["bounded", path, "300", "\(bytes)", "\(first)", "150", "10"])
            }
            // Wait for both to have started writing, then read snapshots until both are done.
            for writer in writers { #expect(try writer.readLine()?.hasPrefix("committed") == true) }
            let store = try Store(path: path, options: .testing())
            let sized = try store.collection(Sized.self)
            var running = Set(writers.indices)
            var snapshots = 0
            while !running.isEmpty {
                let usage = try #require(try sized.capacityUsage())
                #expect(usage.records <= 300 && (usage.bytes ?? 0) <= 40_000, "\(usage)")
                #expect(usage.capacity == capacity)
                snapshots += 1
                for index in running where writers[index].hasOutput() {
                    let line = try writers[index].readLine()
                    if line == "done" {
                        running.remove(index)
                    } else {
                        try #require(line?.hasPrefix("committed") == true, "writer \(index): \(line ?? "EOF")")
                    }
                }
            }
            for writer in writers { #expect(writer.wait() == 0) }
            try checkBound(sized, capacity, step: snapshots)
            // 3,000 records were written into room for 300: both writers' records were evicted.
            let ids = try sized.scan().map(\.id)
            #expect(ids.contains { $0 < 1_000_000 } && ids.contains { $0 >= 1_000_000 })
        }
    }

    @Test(
        "a writer killed with SIGKILL in the middle of evicting writes leaves the store consistent and within its bound",
        arguments: [30_000, 0])
    func killedWhileEvicting(bytes: Int) throws {
        let capacity = Capacity(records: 200, bytes: bytes == 0 ? nil : bytes)
        var random = SplitMix(seed: 41)
        try withTemporaryDirectory { directory in
            let path = directory + "/store"
            let probe = try builtExecutable("LMDBProbe")
            for kill in 0..<12 {
                let writer = try ChildProcess(
                    probe, ["bounded", path, "200", "\(bytes)", "\(kill * 10_000_000)", "0", "25"])
                // Killed after 10 to 50 commits: past the 8 that fill the collection, so every
                // write in flight then evicts.
                let rounds = Int(random.next() % 41) + 10
                for round in 1...rounds { try #require(try writer.readLine() == "committed \(round)") }
                writer.kill()
                _ = writer.wait()
                let store = try Store(path: path, options: .testing())
                let sized = try store.collection(Sized.self)
                try checkBound(sized, capacity, step: kill)
                #expect(try sized.scanSkippingDamaged().damaged.isEmpty)
            }
        }
    }

    @Test("expired records go before any live one: evicting writes remove them first, none live is evicted")
    func expiredGoFirst() throws {
        let clock = ManualClock()
        try withTemporaryStore(options: .testing(clock: clock)) { store in
            let notes = try store.collection(Note.self, capacity: .records(100))
            // Every other record expires after a second. Nothing is read: the policy alone would
            // weigh the new records against the oldest, live or not.
            for id in 0..<100 {
                try notes.put(
                    Note(id: Int64(id), text: "", stars: 0, pinned: false),
                    expiry: id % 2 == 0 ? .after(.seconds(1)) : .never)
            }
            clock.advance(by: .seconds(2))
            // Fifty new records, one write each: as many as have expired.
            for id in 1_000..<1_050 { try notes.put(Note(id: Int64(id), text: "", stars: 0, pinned: false)) }
            let statistics = notes.statistics()
            #expect(statistics.removed.evicted == 0, "live records were evicted while expired ones remained")
            #expect(statistics.removed.expired == 50)
            #expect(try notes.count() == 100)
            for id in stride(from: 1, to: 100, by: 2) { #expect(try notes.get(Int64(id)) != nil, "live \(id) is gone") }
        }
    }

    @Test("evictions count once the write commits, not for an attempt LMDB undid to grow the map")
    func evictionsCountOnCommit() throws {
        try withTemporaryStore { store in
            let sized = try store.collection(Sized.self, capacity: .records(2_000))
            let text = String(repeating: "x", count: 10_000)
            for start in stride(from: 0, to: 2_000, by: 100) {
                try sized.put((start..<start + 100).map { Sized(id: Int64($0), text: text) })
            }
            let mapBefore = try store.environment.info().mapSize
            // 2,000 new records of 10 KB in one put: the pages it writes, and those its in-between
            // evictions free (reusable only after the commit), pass the map's size, so LMDB runs
            // the put again with a larger map after some evictions were done and undone.
            try sized.put((2_000..<4_000).map { Sized(id: Int64($0), text: text) })
            #expect(try store.environment.info().mapSize > mapBefore, "the map did not grow: nothing was retried")
            #expect(try sized.count() == 2_000)
            #expect(sized.statistics().removed.evicted == 2_000)
        }
    }

    @Test("gets of a bounded collection count hits and misses, and a hit record survives a scan of new ones")
    func hitsProtectRecords() throws {
        try withTemporaryStore { store in
            let notes = try store.collection(Note.self, capacity: .records(100))
            try notes.put((0..<100).map { Note(id: $0, text: "", stars: 0, pinned: false) })
            for _ in 0..<5 { for id in 0..<10 { _ = try notes.get(Int64(id)) } }
            _ = try notes.get(5_000)
            // A scan of 1,000 new records, one at a time, as read-through misses store them.
            for id in 1_000..<2_000 { try notes.put(Note(id: Int64(id), text: "", stars: 0, pinned: false)) }
            for id in 0..<10 { #expect(try notes.get(Int64(id)) != nil, "hot record \(id) was evicted") }
            let statistics = notes.statistics()
            #expect(statistics.hits == 60 && statistics.misses == 1)
            #expect(statistics.removed.evicted == 1_000 && statistics.puts == 1_100)
        }
    }
}

@Suite("Capacity in hoard stat")
struct CapacityStatTests {
    @Test("hoard stat shows the recorded capacity and usage, as text and JSON")
    func stat() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/store"
            let store = try Store(path: path, options: .testing())
            let notes = try store.collection(Note.self, capacity: Capacity(records: 10, bytes: 100_000))
            for first in stride(from: 0, to: 25, by: 5) {
                try notes.put((first..<first + 5).map { Note(id: Int64($0), text: "\($0)", stars: 0, pinned: false) })
            }
            let usage = try #require(try notes.capacityUsage())
            let text = try hoard("stat", path)
            #expect(text.status == 0, "\(text.stderr)")
            #expect(text.stdout.contains("10 of 10 records"), "\(text.stdout)")
            let json = try jsonObject(try hoard("stat", path, "--json").stdout)
            let collections = try #require(json["collections"] as? [[String: Any]])
            let capacity = try #require(collections.first?["capacity"] as? [String: Any])
            #expect(capacity["records"] as? Int == 10 && capacity["bytes"] as? Int == 100_000)
            #expect(capacity["usedRecords"] as? Int == 10 && capacity["usedBytes"] as? Int == usage.bytes)
        }
    }
}

extension CapacityStatTests {
    @Test("hoard load and hoard put into a bounded collection keep its bound; put keeps the record it wrote")
    func toolsKeepTheBound() throws {
        try withTemporaryDirectory { directory in
            let source = directory + "/source"
            try Store(path: source, options: .testing()).collection(Note.self).put(
                (0..<30).map { Note(id: $0, text: "\($0)", stars: 0, pinned: false) })
            let dump = try hoard("dump", source)
            #expect(dump.status == 0, "\(dump.stderr)")

            let target = directory + "/target"
            do {
                let store = try Store(path: target, options: .testing())
                _ = try store.collection(Note.self, capacity: Capacity(records: 12, bytes: 1_000))
            }
            let load = try hoard("load", target, input: Array(dump.stdout.utf8))
            #expect(load.status == 0, "\(load.stderr)")
            let put = try hoard(
                "put", target, "Note", "99", "--value", #"{"ID": 99, "TEXT": "new", "STARS": 1, "PINNED": true}"#)
            #expect(put.status == 0, "\(put.stderr)")

            let store = try Store(path: target, options: .testing())
            let notes = try store.collection(Note.self)
            try checkBound(notes, Capacity(records: 12, bytes: 1_000), step: 0)
            #expect(try notes.get(99)?.text == "new")
        }
    }
}

/// A model whose records differ in size (the probe's `bounded` mode writes it).
struct Sized: VariablyCodable, Identifiable, Equatable {
    var id: Int64
    var text: String
    static let keySets = KeySets<Sized>(local: [1: [\.id: "ID", \.text: "TEXT"]])
    init(id: Int64, text: String) { (self.id, self.text) = (id, text) }
    init(from container: DecodingContainer<Sized>) throws {
        id = try container.decodeValue(for: \.id)
        text = try container.decodeValue(for: \.text)
    }
    func encode(to container: inout EncodingContainer<Sized>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(text, for: \.text)
    }
}

/// Every stored model by ID, expired ones included.
private func contents(_ notes: HoardCollection<Note>) throws -> [Int64: Note] {
    var result: [Int64: Note] = [:]
    try notes.store.readLMDB { txn in
        try txn.forEach(in: notes.database) { key, record in
            if let model = try notes.decode(record, key: { Array(key) }) { result[model.id] = model }
            return .next
        }
    }
    return result
}

/// The bytes of keys and records, counted by a scan.
private func scannedBytes<Model>(_ collection: HoardCollection<Model>) throws -> Int {
    try collection.store.readLMDB { txn in try StoredBound.countBytes(in: collection.database, txn: txn) }
}

/// Checks that the collection is within `capacity` and that the recorded byte count is the real one.
private func checkBound<Model>(_ collection: HoardCollection<Model>, _ capacity: Capacity, step: Int) throws {
    let usage = try #require(try collection.capacityUsage(), "step \(step): no capacity recorded")
    #expect(usage.capacity == capacity)
    #expect(usage.records == (try collection.count()))
    if let records = capacity.records { #expect(usage.records <= records, "step \(step): \(usage.records) records") }
    if let bytes = capacity.bytes {
        let scanned = try scannedBytes(collection)
        #expect(usage.bytes == scanned, "step \(step): recorded \(usage.bytes ?? -1) bytes, scanned \(scanned)")
        #expect(scanned <= bytes, "step \(step): \(scanned) bytes")
    }
}
