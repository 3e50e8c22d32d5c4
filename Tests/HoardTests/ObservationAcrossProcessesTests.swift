import Foundation
import Hoard
import HoardTestSupport
import Logging
import Synchronization
import TestSupport
import Testing

/// Why a test gave up waiting.
struct TimedOut: Error, CustomStringConvertible {
    let description: String
}

/// Runs `body`, failing with ``TimedOut`` if it has not returned after `seconds` (a bound on a
/// wait for a condition, so that a missed change fails the test instead of hanging it).
func within<R: Sendable>(
    _ seconds: Int, _ what: String, _ body: @escaping @Sendable () async throws -> R
) async throws -> R {
    try await withThrowingTaskGroup(of: R?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let result = first else {
            throw TimedOut(description: "\(what): nothing after \(seconds) s")
        }
        return result
    }
}

/// A probe process writing collection Sized of the store at `path`. (@unchecked: one task at a
/// time talks to it; a test hands it to another task and waits for that task before the next use.)
final class SizedWriter: @unchecked Sendable {
    let probe: ChildProcess

    init(path: String, changeLog: Int? = nil) throws {
        var arguments = ["observed", path]
        if let changeLog { arguments += ["--change-log", "\(changeLog)"] }
        probe = try ChildProcess(try builtExecutable("LMDBProbe"), arguments)
        guard try probe.readLine() == "open ok" else { throw TestSupportError("the probe could not open \(path)") }
    }

    /// Sends `command` and returns the transaction the commit made.
    func commit(_ command: String) throws -> Int {
        let answer = try probe.ask(command)
        guard answer.hasPrefix("ok "), let transaction = Int(answer.dropFirst(3)) else {
            throw TestSupportError("the probe answered \(answer) to \(command)")
        }
        return transaction
    }

    deinit {
        try? probe.send("exit")
        _ = probe.wait()
    }
}

/// ``testOptions`` with a change log of `changeLog` transactions and `otherProcesses`.
func testOptions(changeLog: Int? = nil, otherProcesses: Store.OtherProcessChanges = .watchFile) -> Store.Options {
    var options = testOptions
    options.changeLog = changeLog
    options.otherProcesses = otherProcesses
    return options
}

/// Takes batches from `changes` until one covers `transaction`; returns them all.
func batches(
    _ changes: ChangeSequence<Int64>, until transaction: Int, _ what: String
) async throws -> [ChangeBatch<Int64>] {
    try await within(10, what) {
        var taken: [ChangeBatch<Int64>] = []
        for await batch in changes {
            taken.append(batch)
            if batch.transactions.contains(transaction) { return taken }
        }
        throw TestSupportError("\(what): the sequence ended")
    }
}

/// The last value each observer was given.
final class Delivered: Sendable {
    let values = Mutex<[Int64: Sized?]>([:])
}

@Suite("Change observation across processes")
struct ObservationAcrossProcessesTests {
    @Test(
        "another process's commit is noticed through the file watch (or polling) and, without a change log, is an unknown batch for its transaction",
        arguments: [Store.OtherProcessChanges.watchFile, .poll(every: .milliseconds(5))])
    func withoutChangeLog(mode: Store.OtherProcessChanges) async throws {
        try await withTemporaryDirectory { dir in
            let path = dir + "/store"
            let store = try Store(path: path, options: testOptions(otherProcesses: mode))
            let sized = try store.collection(Sized.self)
            let changes = sized.changes()
            let writer = try SizedWriter(path: path)
            let transaction = try writer.commit("put 5 from-the-child")
            let taken = try await batches(changes, until: transaction, "the child's put")
            let last = try #require(taken.last)
            #expect(last.origin.contains(.otherProcess))
            #expect(last.content.isUnknown)
            #expect(try sized.get(5) == Sized(id: 5, text: "from-the-child"))
        }
    }

    @Test("with a change log, another process's changes come with their records and kinds")
    func withChangeLog() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir + "/store"
            let store = try Store(path: path, options: testOptions(changeLog: 100))
            let changes = try store.collection(Sized.self).changes()
            let writer = try SizedWriter(path: path, changeLog: 100)

            let put = try writer.commit("put 5 five")
            var taken = try await batches(changes, until: put, "the child's put")
            #expect(taken.last?.origin == .otherProcess)
            #expect(taken.last?.records == [5: .stored])

            let delete = try writer.commit("delete 5")
            taken = try await batches(changes, until: delete, "the child's delete")
            #expect(taken.last?.records == [5: .deleted])

            _ = try writer.commit("put 6 six")
            let clear = try writer.commit("clear")
            taken = try await batches(changes, until: clear, "the child's clear")
            #expect(
                taken.last?.content.afterClearing == [:],
                "the child's deleteAll gave \(String(describing: taken.last?.content))")
        }
    }

    @Test("a process that keeps no change log writes commits that others see as unknown, even where the log is kept")
    func unloggedWriter() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir + "/store"
            let store = try Store(path: path, options: testOptions(changeLog: 100))
            let changes = try store.collection(Sized.self).changes()
            let writer = try SizedWriter(path: path)  // no --change-log
            let transaction = try writer.commit("put 1 unlogged")
            let taken = try await batches(changes, until: transaction, "the unlogged put")
            #expect(taken.last?.content.isUnknown == true)
        }
    }

    @Test("this process's own commits are never reported as another process's")
    func ownCommitsStayOwn() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir + "/store"
            let store = try Store(path: path, options: testOptions)
            let sized = try store.collection(Sized.self)
            let writer = try SizedWriter(path: path)
            let changes = sized.changes()
            var iterator = changes.makeAsyncIterator()
            for id in 0..<Int64(40) {
                try await sized.put(Sized(id: id, text: "own"))
                let batch = try await nextBatch(&iterator)
                #expect(batch.origin == .thisProcess, "after own put \(id): \(batch)")
                #expect(batch.records == [id: .stored])
            }
            let transaction = try writer.commit("put 100 child")
            var other: ChangeBatch<Int64>
            repeat {
                other = try await nextBatch(&iterator)
            } while !other.transactions.contains(transaction)
            #expect(other.origin == .otherProcess)
        }
    }

    @Test(
        "writers here and in another process, observers that lag at random: every observer ends on the store's value",
        arguments: [nil, 64] as [Int?])
    func randomized(changeLog: Int?) async throws {
        for round in 0..<3 {
            let seed = SeededGenerator.seedFromEnvironment()
            try await withTemporaryDirectory { dir in
                let path = dir + "/store"
                let store = try Store(path: path, options: testOptions(changeLog: changeLog))
                let sized = try store.collection(Sized.self)
                let ids = Array(0..<Int64(8))
                let writer = try SizedWriter(path: path, changeLog: changeLog)
                let delivered = Delivered()
                let observers = try ids.map { id in
                    let observation = try sized.observe(id)
                    return Task {
                        var generator = SeededGenerator(seed: seed &+ UInt64(id))
                        for try await value in observation {
                            delivered.values.withLock { $0[id] = .some(value) }
                            // A consumer slower than the writers, now and then.
                            if Int.random(in: 0..<4, using: &generator) == 0 {
                                try await Task.sleep(for: .microseconds(Int.random(in: 0..<2_000, using: &generator)))
                            }
                        }
                    }
                }
                let child = Task.detached { try writer.probe.ask("random \(seed) 300 8") }
                var generator = SeededGenerator(seed: seed)
                for write in 0..<300 {
                    let id = ids.randomElement(using: &generator) ?? 0
                    if Int.random(in: 0..<8, using: &generator) == 0 {
                        try await sized.delete(id)
                    } else {
                        try await sized.put(Sized(id: id, text: "parent-\(write)"))
                    }
                }
                #expect(try await child.value == "done")
                // The other process writes last, so that the final values are its own.
                #expect(try writer.probe.ask("random \(seed &+ 1) 40 8") == "done")

                // Ten seconds from here for every observer to reach the final value: a bound for
                // liveness only, generous for a machine loaded by the other tests (observation-bench
                // measures how soon a change arrives).
                let final = try Dictionary(uniqueKeysWithValues: ids.map { ($0, try sized.get($0)) })
                let start = ContinuousClock.now
                var behind: [Int64] = ids
                while !behind.isEmpty, ContinuousClock.now - start < .seconds(10) {
                    behind = delivered.values.withLock { seen in ids.filter { seen[$0] != .some(final[$0] ?? nil) } }
                    await Task.yield()
                }
                #expect(
                    behind.isEmpty,
                    "round \(round), seed \(seed) (HOARD_TEST_SEED replays it), change log \(String(describing: changeLog)): observers of \(behind) did not reach the store's value"
                )
                for observer in observers { observer.cancel() }
                for observer in observers { _ = await observer.result }
            }
        }
    }

    @Test(
        "a data file moved under the store ends the file watch: that is logged, and other processes' commits are then found by polling"
    )
    func movedDataFile() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir + "/store"
            let entries = CollectingLogHandler.Entries()
            var options = testOptions
            options.logger = Logger(label: "test") { _ in CollectingLogHandler(entries: entries) }
            let store = try Store(path: path, options: options)
            let changes = try store.collection(Sized.self).changes()
            // Away and back: the watched file moved (its descriptor, LMDB's, stays valid).
            #expect(rename(path + "/data.mdb", path + "/data.moved") == 0)
            #expect(rename(path + "/data.moved", path + "/data.mdb") == 0)
            let writer = try SizedWriter(path: path)
            let transaction = try writer.commit("put 1 after-the-move")
            let taken = try await batches(changes, until: transaction, "a commit after the data file moved")
            #expect(taken.last?.origin.contains(.otherProcess) == true)
            #expect(entries.all.contains { $0.message.contains("polling for other processes' commits from now on") })
        }
    }
}
