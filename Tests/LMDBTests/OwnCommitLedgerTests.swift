@testable import LMDB
import Synchronization
import TestSupport
import Testing

@Suite("Own commit ledger")
struct OwnCommitLedgerTests {
    @Test("while on, each commit of this process is noted as made; off, or a write that threw, nothing is")
    func notesCommits() throws {
        try withTemporaryEnvironment { env, _ in
            let items = try env.openDatabase("items", create: true)
            let ledger = env.ownCommits
            try env.write { txn in try txn.put(b("a"), forKey: b("k"), in: items) }
            let unnoted = try env.read { $0.id }
            #expect(ledger.entry(unnoted) == .notOwn)
            // No transaction has id 0, whatever an empty slot holds.
            #expect(ledger.entry(0) == .notOwn)

            ledger.setOn(true)
            var made: [Int] = []
            for value in ["b", "c", "d"] {
                try env.write { txn in try txn.put(b(value), forKey: b("k"), in: items) }
                made.append(try env.read { $0.id })
            }
            #expect(made.map(ledger.entry) == [.made, .made, .made])
            #expect(ledger.entry(unnoted) == .notOwn)
            // A write that throws never commits: its id goes to the next commit, noted as made.
            #expect(throws: Refusal.self) {
                try env.write { txn in
                    try txn.put(b("e"), forKey: b("k"), in: items)
                    throw Refusal()
                }
            }
            let next = (made.last ?? 0) + 1
            #expect(ledger.entry(next) == .notOwn)
            try env.write { txn in try txn.put(b("f"), forKey: b("k"), in: items) }
            #expect(try env.read { $0.id } == next)
            #expect(ledger.entry(next) == .made)

            ledger.setOn(false)
            try env.write { txn in try txn.put(b("g"), forKey: b("k"), in: items) }
            #expect(ledger.entry(next + 1) == .notOwn)
            // Noted before stays noted.
            #expect(ledger.entry(next) == .made)
        }
    }

    @Test("a commit that failed is forgotten, unless its id was committed since; one that committed stays made")
    func failedCommits() {
        let ledger = OwnCommitLedger()
        ledger.setOn(true)
        #expect(ledger.begin(5))
        #expect(ledger.entry(5) == .beingMade)
        ledger.settle(5, committed: false)
        #expect(ledger.entry(5) == .notOwn)
        // The id passed to another writer here, which committed it before the failed one settled.
        #expect(ledger.begin(6))
        ledger.settle(6, committed: true)
        ledger.settle(6, committed: false)
        #expect(ledger.entry(6) == .made)
        ledger.setOn(false)
        #expect(!ledger.begin(7))
        #expect(ledger.entry(7) == .notOwn)
    }

    @Test("a commit's listener sees it neither made nor being made before it commits")
    func beforeTheCommit() throws {
        try withTemporaryEnvironment { env, _ in
            let items = try env.openDatabase("items", create: true)
            let listener = LedgerListener(ledger: env.ownCommits)
            env.setCommitListener(listener)
            env.ownCommits.setOn(true)
            try env.write { txn in try txn.put(b("a"), forKey: b("k"), in: items) }
            let id = try env.read { $0.id }
            #expect(listener.seen.withLock { $0 } == [.notOwn, .made])
            #expect(env.ownCommits.entry(id) == .made)
        }
    }

    @Test("whoever waits for a commit is woken when it settles, and not for another")
    func wakesTheWaiter() throws {
        try withTemporaryEnvironment { env, _ in
            let items = try env.openDatabase("items", create: true)
            let ledger = env.ownCommits
            ledger.setOn(true)
            let woken = Mutex<Int>(0)
            let next = try env.read { $0.id } + 1
            ledger.wake(whenSettled: next + 1) { woken.withLock { $0 += 1 } }
            try env.write { txn in try txn.put(b("a"), forKey: b("k"), in: items) }
            #expect(woken.withLock { $0 } == 0)
            try env.write { txn in try txn.put(b("b"), forKey: b("k"), in: items) }
            #expect(woken.withLock { $0 } == 1)
            ledger.wake(whenSettled: 0) { woken.withLock { $0 += 100 } }
            try env.write { txn in try txn.put(b("c"), forKey: b("k"), in: items) }
            #expect(woken.withLock { $0 } == 1)
        }
    }

    @Test("an id noted so long ago that its slot was taken over counts as not this process's")
    func slotsTakenOver() throws {
        try withTemporaryEnvironment { env, _ in
            let items = try env.openDatabase("items", create: true)
            let ledger = env.ownCommits
            ledger.setOn(true)
            try env.write { txn in try txn.put(b("first"), forKey: b("k"), in: items) }
            let first = try env.read { $0.id }
            for index in 0..<OwnCommitLedger.capacity {
                try env.write { txn in try txn.put(b("\(index)"), forKey: b("k"), in: items) }
            }
            #expect(ledger.entry(first) == .notOwn)
            #expect(ledger.entry(first + OwnCommitLedger.capacity) == .made)
        }
    }
}

/// Records what the ledger says of each transaction just before and just after it commits.
final class LedgerListener: CommitListener, Sendable {
    let ledger: OwnCommitLedger
    let seen = Mutex<[OwnCommitLedger.Entry]>([])

    init(ledger: OwnCommitLedger) { self.ledger = ledger }

    func willCommit(_ txn: borrowing WriteTransaction) throws {
        let entry = ledger.entry(txn.id)
        seen.withLock { $0.append(entry) }
    }

    func didCommit(transaction: Int, local: (ObjectIdentifier) -> AnyObject?) {
        let entry = ledger.entry(transaction)
        seen.withLock { $0.append(entry) }
    }

    func didNotCommit(transaction: Int, local: (ObjectIdentifier) -> AnyObject?) {}
}
