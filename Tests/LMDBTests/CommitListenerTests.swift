import LMDB
import Synchronization
import TestSupport
import Testing

/// Records what an environment tells its commit listener, and writes a marker before each commit.
final class RecordingListener: CommitListener, Sendable {
    let events = Mutex<[String]>([])
    let marker: Database

    init(marker: Database) { self.marker = marker }

    func willCommit(_ txn: borrowing WriteTransaction) throws {
        let id = txn.id
        events.withLock { $0.append("will \(id)") }
        try txn.put(b("\(id)"), forKey: b("last"), in: marker)
    }

    func didCommit(transaction: Int, local: (ObjectIdentifier) -> AnyObject?) {
        let journal = local(ObjectIdentifier(Journal.self)) as? Journal
        events.withLock { $0.append("did \(transaction) \(journal?.entries ?? [])") }
    }

    func didNotCommit(transaction: Int, local: (ObjectIdentifier) -> AnyObject?) {
        events.withLock { $0.append("not \(transaction)") }
    }
}

/// A journal kept with a write transaction: what a nested transaction that is undone recorded goes.
final class Journal: TransactionJournal {
    var entries: [String] = []
    var mark: Int { entries.count }
    func undo(to mark: Int) { entries.removeSubrange(mark...) }
}

func record(_ entry: String, in txn: borrowing WriteTransaction) {
    txn.local(ObjectIdentifier(Journal.self)) { Journal() }.entries.append(entry)
}

struct Refusal: Error {}

@Suite("Commit listener")
struct CommitListenerTests {
    @Test(
        "told before and after each commit, with the transaction's id; what it writes commits; an aborted write is not committed"
    )
    func beforeAndAfter() throws {
        try withTemporaryEnvironment { env, _ in
            let items = try env.openDatabase("items", create: true)
            let marker = try env.openDatabase("marker", create: true)
            let listener = RecordingListener(marker: marker)
            env.setCommitListener(listener)
            try env.write { txn in try txn.put(b("v"), forKey: b("k"), in: items) }
            let committed = try env.read { $0.id }
            #expect(try env.read { try $0.value(forKey: b("last"), in: marker) } == b("\(committed)"))
            #expect(throws: Refusal.self) {
                try env.write { txn in
                    try txn.put(b("w"), forKey: b("k"), in: items)
                    throw Refusal()
                }
            }
            #expect(listener.events.withLock { $0 } == ["will \(committed)", "did \(committed) []"])
            env.setCommitListener(nil)
            try env.write { txn in try txn.put(b("x"), forKey: b("k"), in: items) }
            #expect(listener.events.withLock { $0.count } == 2)
        }
    }

    @Test("a listener that does not hear every commit hears those that kept an object, and every one once asked to")
    func onlyTransactionsThatKeptAnObject() throws {
        try withTemporaryEnvironment { env, _ in
            let items = try env.openDatabase("items", create: true)
            let listener = RecordingListener(marker: try env.openDatabase("marker", create: true))
            env.setCommitListener(listener, everyCommit: false)
            try env.write { txn in try txn.put(b("v"), forKey: b("plain"), in: items) }
            try env.write { txn in record("kept", in: txn) }
            let kept = try env.read { $0.id }
            #expect(listener.events.withLock { $0 } == ["will \(kept)", "did \(kept) [\"kept\"]"])
            env.setCommitListener(listener, everyCommit: true)
            try env.write { txn in try txn.put(b("w"), forKey: b("plain"), in: items) }
            let plain = try env.read { $0.id }
            #expect(listener.events.withLock { $0.suffix(2) } == ["will \(plain)", "did \(plain) []"])
        }
    }

    @Test("a journal forgets what an undone nested transaction recorded, and keeps the rest")
    func journalUndo() throws {
        try withTemporaryEnvironment { env, _ in
            let items = try env.openDatabase("items", create: true)
            let listener = RecordingListener(marker: try env.openDatabase("marker", create: true))
            env.setCommitListener(listener)
            try env.write { txn in
                record("outer", in: txn)
                _ = try? txn.nested { inner in
                    record("undone", in: inner)
                    try inner.put(b("u"), forKey: b("u"), in: items)
                    throw Refusal()
                }
                try txn.nested { inner in record("kept", in: inner) }
            }
            let id = try env.read { $0.id }
            #expect(listener.events.withLock { $0.last } == "did \(id) [\"outer\", \"kept\"]")
            #expect(try env.read { try $0.value(forKey: b("u"), in: items) } == nil)
        }
    }

    @Test("a write that LMDB runs again after growing the map is reported committed once, after any attempt withdrawn")
    func mapGrowth() throws {
        try withTemporaryEnvironment(Environment.Options(mapSize: 64 << 10, durability: .riskStoreOnOSCrash)) {
            env, _ in
            let items = try env.openDatabase("items", create: true)
            let listener = RecordingListener(marker: try env.openDatabase("marker", create: true))
            env.setCommitListener(listener)
            try env.write { txn in
                for index in 0..<2_000 {
                    try txn.put(Array(repeating: 7, count: 200), forKey: b("\(index)"), in: items)
                }
            }
            let events = listener.events.withLock { $0 }
            #expect(try env.info().mapSize > 64 << 10)
            #expect(events.filter { $0.hasPrefix("did ") } == ["did \(try env.read { $0.id }) []"])
            #expect(events.last?.hasPrefix("did ") == true)
        }
    }
}
