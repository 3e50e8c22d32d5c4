import LMDB
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("Snapshots and processes")
struct ConcurrencyTests {
    @Test("a read transaction keeps its snapshot while a write commits")
    func snapshotIsolation() throws {
        try withTemporaryEnvironment { env, _ in
            let db = try env.openDatabase("s", create: true)
            try env.write { txn in try txn.put(b("before"), forKey: b("k"), in: db) }
            try env.read { snapshot in
                // A write commits on this thread while the snapshot is open (allowed with MDB_NOTLS)…
                try env.write { txn in
                    try txn.put(b("after"), forKey: b("k"), in: db)
                    try txn.put(b("new"), forKey: b("n"), in: db)
                }
                // …and on another thread, joined before looking again.
                let other = try spawnThread {
                    try env.write { txn in _ = try txn.delete(b("k"), in: db) }
                }
                try other.join()
                #expect(try snapshot.value(forKey: b("k"), in: db) == b("before"))
                #expect(try snapshot.value(forKey: b("n"), in: db) == nil)
                #expect(try snapshot.count(in: db) == 1)
            }
            #expect(try env.read { try $0.value(forKey: b("k"), in: db) } == nil)
            #expect(try env.read { try $0.value(forKey: b("n"), in: db) } == b("new"))
        }
    }

    @Test("another process reads committed data while this one holds the write lock")
    func secondProcessReadsDuringWrite() throws {
        try withTemporaryEnvironment { env, path in
            let db = try env.openDatabase("shared", create: true)
            try env.write { txn in try txn.put(b("v1"), forKey: b("k"), in: db) }
            let child = try ChildProcess(try builtExecutable("LMDBProbe"), ["open", path, "--read-only"])
            #expect(try child.readLine() == "open ok")
            try env.write { txn in
                try txn.put(b("v2"), forKey: b("k"), in: db)
                // The reader is neither blocked by this open write nor sees it.
                #expect(try child.ask("get shared k") == "value v1")
            }
            #expect(try child.ask("get shared k") == "value v2")
            try child.send("exit")
            #expect(child.wait() == 0)
        }
    }

    @Test("this process reads consistent snapshots while another process writes")
    func readWhileOtherProcessWrites() throws {
        try withTemporaryEnvironment { env, path in
            let child = try ChildProcess(try builtExecutable("LMDBProbe"), ["open", path])
            #expect(try child.readLine() == "open ok")
            #expect(try child.ask("put feed seed x") == "ok")
            let db = try env.openDatabase("feed")
            let batches = 200, size = 25
            try child.send("batches feed \(batches) \(size)")
            var snapshots = 0
            var done = false
            while !done {
                done = child.hasOutput()  // decided before the read, so the last read sees the last commit
                let (entries, counter) = try env.read { txn in
                    let counter =
                        try txn.value(forKey: b("counter"), in: db).flatMap { Int(String(decoding: $0, as: UTF8.self)) }
                        ?? 0
                    return (try txn.count(in: db), counter)
                }
                // "seed" plus `size` keys per committed batch plus the counter itself: never a partial batch.
                #expect(
                    entries == 1 + counter * size + (counter > 0 ? 1 : 0),
                    "snapshot of \(entries) entries at counter \(counter)")
                snapshots += 1
                if done { #expect(counter == batches) }
            }
            #expect(try child.readLine() == "ok")
            #expect(snapshots >= 1)
            try child.send("exit")
            #expect(child.wait() == 0)
        }
    }

    @Test("a reader killed with SIGKILL leaves a stale slot that the next open clears")
    func staleReaderCleared() throws {
        try withTemporaryEnvironment { env, path in
            let db = try env.openDatabase("r", create: true)
            try env.write { txn in try txn.put(b("v"), forKey: b("k"), in: db) }
            let holder = try ChildProcess(try builtExecutable("LMDBProbe"), ["open", path])
            #expect(try holder.readLine() == "open ok")
            #expect(try holder.ask("hold-read") == "holding")
            #expect(try env.readers().contains { $0.processID == holder.pid && !$0.isStale })
            holder.kill()
            #expect(holder.wait() == 128 + SIGKILL)
            #expect(try env.readers().contains { $0.processID == holder.pid && $0.isStale })

            // A new process opening the store clears the slot on open…
            let next = try ChildProcess(try builtExecutable("LMDBProbe"), ["open", path])
            #expect(try next.readLine() == "open ok")
            #expect(try next.ask("stale") == "stale 0")
            #expect(try env.readers().contains { $0.processID == holder.pid } == false)
            try next.send("exit")
            #expect(next.wait() == 0)
            // …and writers go on.
            try env.write { txn in try txn.put(b("w"), forKey: b("k"), in: db) }
        }
    }

    @Test("clearStaleReaders reports the slots it frees")
    func explicitReaderCheck() throws {
        try withTemporaryEnvironment { env, path in
            _ = try env.openDatabase("r", create: true)
            let holder = try ChildProcess(try builtExecutable("LMDBProbe"), ["open", path])
            #expect(try holder.readLine() == "open ok")
            #expect(try holder.ask("hold-read") == "holding")
            holder.kill()
            holder.wait()
            #expect(try env.clearStaleReaders() == 1)
            #expect(try env.clearStaleReaders() == 0)
        }
    }

    @Test("children spawned by the process do not inherit the store's file descriptors")
    func closeOnExec() throws {
        try withTemporaryEnvironment { env, path in
            _ = try env.openDatabase("x", create: true)
            // The check itself can fail: this process does hold descriptors for both files.
            #expect(countDescriptors(referringTo: [path + "/data.mdb", path + "/lock.mdb"]) >= 2)
            let child = try ChildProcess(
                try builtExecutable("LMDBProbe"), ["fds", path + "/data.mdb", path + "/lock.mdb"])
            #expect(try child.readLine() == "fds 0")
            #expect(child.wait() == 0)
        }
    }
}

/// Runs `body` on a new thread; `join()` waits for it and rethrows its error.
final class SpawnedThread: @unchecked Sendable {
    // @unchecked: `error` is written by the thread before it ends and read only after pthread_join.
    var error: (any Error)?
    var thread: pthread_t?
    let body: () throws -> Void
    init(_ body: @escaping () throws -> Void) { self.body = body }
    func join() throws {
        if let thread { pthread_join(thread, nil) }
        if let error { throw error }
    }
}

func spawnThread(_ body: @escaping () throws -> Void) throws -> SpawnedThread {
    let box = SpawnedThread(body)
    var thread = pthread_t()
    let rc = pthread_create(
        &thread, nil,
        { raw in
            let box = Unmanaged<SpawnedThread>.fromOpaque(raw!).takeRetainedValue()
            do { try box.body() } catch { box.error = error }
            return nil
        }, Unmanaged.passRetained(box).toOpaque())
    guard rc == 0 else { throw TestSupportError("pthread_create failed: \(rc)") }
    box.thread = thread
    return box
}
