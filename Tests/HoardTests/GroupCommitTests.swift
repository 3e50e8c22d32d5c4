@_spi(LMDB) import Hoard
import HoardTestSupport
import LMDB
import TestSupport
import Testing

/// Why a write in a group commit failed on purpose.
struct Refused: Error, Equatable {
    let index: Int
}

/// Holds LMDB's writer lock from a second process, so that async writes queue up behind it
/// and then go into one commit; released by `release()`.
final class WriterLockHolder {
    let probe: ChildProcess

    init(path: String) throws {
        probe = try ChildProcess(try builtExecutable("LMDBProbe"), ["open", path])
        guard try probe.readLine() == "open ok", try probe.ask("hold-write") == "holding" else {
            throw TestSupportError("the probe could not take the writer lock")
        }
    }

    func release() throws {
        try probe.send("release")
        guard try probe.readLine() == "released" else {
            throw TestSupportError("the probe did not release the writer lock")
        }
        try probe.send("exit")
        _ = probe.wait()
    }
}

/// Waits until `count` writes are queued in `store` (they queue behind a held writer lock); a
/// condition, checked between yields, not a timed sleep.
func waitUntilQueued(_ count: Int, in store: Store) async {
    while store.writeStatistics.queued < count { await Task.yield() }
}

/// Makes `count` async writes (`write(i)` for each) queue behind a writer lock held by another
/// process, so that they go into one commit when it is released; `whileQueued` runs before the
/// release. Returns each write's outcome.
func queuedWrites(
    _ count: Int, store: Store, path: String, whileQueued: () throws -> Void = {},
    _ write: @escaping @Sendable (Int) async throws -> Void
) async throws -> [Result<Void, any Error>] {
    let holder = try WriterLockHolder(path: path)
    let writes = (0..<count).map { i in
        Task { () -> Result<Void, any Error> in
            do {
                try await write(i)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
    }
    await waitUntilQueued(count, in: store)
    try whileQueued()
    try holder.release()
    var outcomes: [Result<Void, any Error>] = []
    for write in writes { outcomes.append(await write.value) }
    return outcomes
}

@Suite("Group commit")
struct GroupCommitTests {
    @Test(
        "writes queued behind the writer lock go into one commit; a failing write is undone alone and its caller alone gets the error"
    )
    func oneCommitFailuresApart() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir + "/store"
            let store = try Store(path: path, options: testOptions)
            let notes = try store.collection(Note.self)
            let tags = try store.collection(Tag.self)
            // Nothing is stored while the writes wait for the lock.
            let outcomes = try await queuedWrites(
                20, store: store, path: path,
                whileQueued: {
                    let stored = try notes.count(); #expect(stored == 0)
                }
            ) { i in
                switch i {
                case 5:  // a key longer than LMDB allows
                    try await tags.put(Tag(id: String(repeating: "k", count: 600), uses: i))
                case 11:  // a closure that writes, then throws: what it wrote is undone
                    try await store.write { txn in
                        try notes.put(Note(id: 11, text: "undone", stars: 0, pinned: false), in: txn)
                        throw Refused(index: i)
                    }
                default:
                    try await notes.put(Note(id: Int64(i), text: "note \(i)", stars: i % 6, pinned: false))
                }
            }
            for (i, outcome) in outcomes.enumerated() {
                switch (i, outcome) {
                case (5, .failure(let error as HoardError)): #expect(error.kind == .invalidID)
                case (11, .failure(let error as Refused)): #expect(error == Refused(index: 11))
                case (5, _), (11, _): Issue.record("write \(i): \(outcome)")
                case (_, .failure(let error)): Issue.record("write \(i) failed: \(error)")
                case (_, .success): break
                }
            }
            #expect(try notes.scan().map(\.id) == (0..<20).filter { $0 != 5 && $0 != 11 }.map(Int64.init))
            #expect(try tags.count() == 0)
            let statistics = store.writeStatistics
            #expect(statistics.commits == 1, "\(statistics)")
            #expect(
                statistics.writes == 18 && statistics.failedWrites == 2 && statistics.largestBatch == 20,
                "\(statistics)")
            #expect(statistics.queued == 0)
        }
    }

    @Test("a store let go right after an async write has closed: this process can open it again at once")
    func reopenAfterAsyncWrite() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir + "/store"
            for round in 0..<200 {
                // The writer must not hold the store while the caller resumes: the caller's
                // release is the last one, and the next open finds the environment closed.
                let store = try Store(path: path, options: testOptions)
                try await store.collection(Note.self).put(Note(id: Int64(round), text: "r", stars: 0, pinned: false))
            }
            let store = try Store(path: path, options: testOptions)
            #expect(try store.collection(Note.self).count() == 200)
        }
    }

    @Test("a task's writes apply in its order, and a read after the await sees the write")
    func perTaskOrder() async throws {
        try await withTemporaryDirectory { dir in
            let store = try Store(path: dir + "/store", options: testOptions)
            let notes = try store.collection(Note.self)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for task in 0..<8 {
                    group.addTask {
                        for step in 0..<40 {
                            try await notes.put(Note(id: Int64(task), text: "step \(step)", stars: 0, pinned: false))
                            let seen = try notes.get(Int64(task))?.text
                            guard seen == "step \(step)" else {
                                throw TestSupportError("task \(task) step \(step) read \(String(describing: seen))")
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(try notes.scan().map(\.text) == Array(repeating: "step 39", count: 8))
            // With 8 writers, commits carried more than one write at times.
            let statistics = store.writeStatistics
            #expect(statistics.writes == 320 && statistics.commits <= 320, "\(statistics)")
        }
    }

    @Test("a lone writer commits at once: each sequential write is its own commit")
    func loneWriter() async throws {
        try await withTemporaryDirectory { dir in
            let store = try Store(path: dir + "/store", options: testOptions)
            let notes = try store.collection(Note.self)
            for i in 0..<25 {
                try await notes.put(Note(id: Int64(i), text: "n", stars: 0, pinned: false))
                #expect(store.writeStatistics.commits == i + 1)
            }
            #expect(store.writeStatistics.largestBatch == 1)
        }
    }

    @Test("a write transaction that cannot begin (a read-only store) fails the queued writes, and the queue goes on")
    func cannotBegin() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir + "/store"
            // Written synchronously, and the store let go, before it is opened read-only (one open per file).
            func create() throws {
                try Store(path: path, options: testOptions).collection(Note.self).put(
                    Note(id: 1, text: "one", stars: 1, pinned: false))
            }
            try create()
            var readOnly = testOptions
            readOnly.readOnly = true
            let store = try Store(path: path, options: readOnly)
            let notes = try store.collection(Note.self)
            for attempt in 0..<3 {
                await #expect("attempt \(attempt)") {
                    try await notes.put(Note(id: 2, text: "two", stars: 2, pinned: false))
                } throws: { error in
                    (error as? HoardError)?.storageKind == .permissionDenied
                }
            }
            #expect(store.writeStatistics.abortedWrites == 3 && store.writeStatistics.queued == 0)
            #expect(try notes.get(2) == nil)
        }
    }

    @Test("a task cancelled while its write waits: the write is carried out and reported")
    func cancelledWhileWaiting() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir + "/store"
            let store = try Store(path: path, options: testOptions)
            let notes = try store.collection(Note.self)
            let holder = try WriterLockHolder(path: path)
            let write = Task { try await notes.put(Note(id: 1, text: "kept", stars: 1, pinned: false)) }
            await waitUntilQueued(1, in: store)
            write.cancel()
            try holder.release()
            try await write.value  // no CancellationError: the write went through
            #expect(try notes.get(1)?.text == "kept")
        }
    }

    @Test(
        "a put that throws after it wrote, in the batch's own transaction, is still undone alone; the batch commits once"
    )
    func directWriteUndoneAlone() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir + "/store"
            let store = try Store(path: path, options: testOptions)
            let notes = try store.collection(Note.self)
            // Bounded at 3 records: a put of 4 new ones writes all four, then finds it cannot keep
            // the bound without evicting what it wrote itself, and throws.
            let small = try store.collection(Tag.self, capacity: .records(3))
            let outcomes = try await queuedWrites(12, store: store, path: path) { i in
                if i == 6 {
                    try await small.put((0..<4).map { Tag(id: "tag \($0)", uses: $0) })
                } else {
                    try await notes.put(Note(id: Int64(i), text: "note \(i)", stars: 0, pinned: false))
                }
            }
            for (i, outcome) in outcomes.enumerated() {
                switch (i, outcome) {
                case (6, .failure(let error as HoardError)): #expect(error.kind == .overCapacity)
                case (6, _): Issue.record("write 6: \(outcome)")
                case (_, .failure(let error)): Issue.record("write \(i) failed: \(error)")
                case (_, .success): break
                }
            }
            #expect(try small.count() == 0)
            #expect(try notes.scan().map(\.id) == (0..<12).filter { $0 != 6 }.map(Int64.init))
            let statistics = store.writeStatistics
            #expect(
                statistics.commits == 1 && statistics.writes == 11 && statistics.failedWrites == 1, "\(statistics)")
        }
    }

    @Test("the map grows in the middle of batched commits; every write lands once")
    func mapGrowthInABatch() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir + "/store"
            // Limits that let one batch hold more than the 16 MiB a new map starts with.
            var options = testOptions
            options.groupCommit = Store.GroupCommitLimits(writes: 1_000, bytes: 64 << 20)
            let store = try Store(path: path, options: options)
            let notes = try store.collection(Note.self)
            let mapBefore = try store.environment.info().mapSize
            let holder = try WriterLockHolder(path: path)
            let big = String(repeating: "x", count: 400_000)
            let writes = (0..<64).map { i in
                Task { try await notes.put(Note(id: Int64(i), text: big + "\(i)", stars: 0, pinned: false)) }
            }
            await waitUntilQueued(64, in: store)
            try holder.release()
            for write in writes { try await write.value }
            #expect(try store.environment.info().mapSize > mapBefore)
            #expect(try notes.count() == 64)
            #expect(try notes.get(63)?.text == big + "63")
            let statistics = store.writeStatistics
            #expect(statistics.commits == 1 && statistics.writes == 64 && statistics.failedWrites == 0, "\(statistics)")
        }
    }
}
