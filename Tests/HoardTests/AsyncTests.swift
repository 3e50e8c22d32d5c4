import Dispatch
import Foundation
import Hoard
import HoardTestSupport
import Synchronization
import TestSupport
import Testing

/// Kills `child` from a thread of its own if `disarm()` is not called within `seconds`: a failure
/// detector for a test whose failure mode is a hang of the cooperative pool (which a pool-based
/// time limit could not interrupt). It never synchronizes anything in the passing case.
final class Watchdog: Sendable {
    private let disarmed = DispatchSemaphore(value: 0)
    let fired = Mutex(false)

    init(seconds: Int, killing pid: Int32) {
        Thread.detachNewThread { [self] in
            if disarmed.wait(timeout: .now() + .seconds(seconds)) == .timedOut {
                fired.withLock { $0 = true }
                kill(pid, SIGKILL)
            }
        }
    }

    func disarm() { disarmed.signal() }
}

@Suite("Async writes")
struct AsyncTests {
    @Test("many tasks write concurrently; every write lands")
    func concurrentWrites() async throws {
        try await withTemporaryDirectory { dir in
            let store = try Store(path: dir + "/store", options: testOptions)
            let notes = try store.collection(Note.self)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<200 {
                    group.addTask {
                        try await notes.put(Note(id: Int64(i), text: "t\(i)", stars: i % 6, pinned: false))
                    }
                }
                try await group.waitForAll()
            }
            #expect(try notes.count() == 200)
            #expect(try await store.write { txn in try notes.delete(7, in: txn) })
            #expect(try notes.get(7) == nil)
        }
    }

    @Test("waiting for another process's writer lock does not block the cooperative pool")
    func writerLockHeldElsewhere() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir + "/store"
            let store = try Store(path: path, options: testOptions)
            let notes = try store.collection(Note.self)
            let holder = try ChildProcess(try builtExecutable("LMDBProbe"), ["open", path])
            #expect(try holder.readLine() == "open ok")
            #expect(try holder.ask("hold-write") == "holding")
            // If the writes below blocked pool threads, the work after them could only run once
            // the lock holder dies: the watchdog kills it, and the test then fails. Its deadline
            // is generous because the pool is shared with the other tests, whose synchronous
            // bodies can keep both of this machine's pool threads busy for half a minute
            // (a 30 s deadline once failed that way); a pool blocked by Hoard never frees up.
            let watchdog = Watchdog(seconds: 300, killing: holder.pid)
            // More waiting writes than the pool has threads (this machine has 2 cores)…
            let writes = (0..<8).map { i in
                Task { try await notes.put(Note(id: Int64(i), text: "w", stars: 1, pinned: false)) }
            }
            // …and other async work still runs.
            let others = try await withThrowingTaskGroup(of: Int.self) { group in
                for i in 0..<16 { group.addTask { i } }
                return try await group.reduce(0, +)
            }
            watchdog.disarm()
            #expect(others == 120)
            #expect(watchdog.fired.withLock { $0 } == false, "other tasks ran only after the lock holder was killed")
            #expect(try notes.count() == 0)  // none of the writes got through yet
            try holder.send("release")
            #expect(try holder.readLine() == "released")
            for write in writes { try await write.value }
            #expect(try notes.count() == 8)
            try holder.send("exit")
            #expect(holder.wait() == 0)
        }
    }
}
