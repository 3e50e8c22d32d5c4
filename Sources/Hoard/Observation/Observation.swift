internal import LMDB

#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif
internal import Logging
internal import Synchronization

// Change observation. The writer records each change in the transaction's ChangeJournal while
// the collection has subscribers or the store keeps a change log. Just before a commit the store
// writes the change log entry; once committed, it hands each subscriber its batch on the
// committing thread, before the write returns. Other processes' commits: ProcessWatcher.

/// What a store does for observers: the subscribers of each collection, the commit listener,
/// the change log and the watch of other processes' commits.
final class Observation: CommitListener, @unchecked Sendable {
    // @unchecked: every mutable field is behind one of the Mutexes; `changeLog` is set once,
    // while the store is being opened.

    /// How many transactions the change log keeps; `nil` when the store keeps none.
    let changeLogLength: Int?
    /// The change log database, when kept.
    var changeLog: Database?
    /// How other processes' commits are noticed.
    let otherProcesses: Store.OtherProcessChanges
    let logger: Logger

    /// The collections that ever had a subscriber in this process, by name.
    let observed = Mutex<[String: CollectionState]>([:])
    /// Subscribers alive, for the watch's start and stop.
    let watch = Mutex<WatchState>(WatchState())
    /// The place the next journal about to commit takes in the order of publication, and the
    /// last place published (``announce(_:)``). Read and written by the transaction about to
    /// commit only, which holds LMDB's writer lock.
    nonisolated(unsafe) private var nextPublication = 1
    private let published = Atomic<Int>(0)
    /// The journals of the last two transactions that published one, to be emptied and used
    /// again (``takeJournal()``).
    private let spareJournals = Mutex<SpareJournals>(SpareJournals())

    struct WatchState {
        var subscribers = 0
        var watcher: ProcessWatcher?
    }

    init(options: Store.Options) {
        changeLogLength = options.changeLog
        otherProcesses = options.otherProcesses
        logger = options.logger
    }

    /// Whether every change is recorded, observed or not (for the change log).
    var logsChanges: Bool { changeLogLength != nil }

    // MARK: Commits

    /// A journal for a write transaction: a spare one emptied, or a new one (under a lock: the
    /// last transaction may still be publishing on another thread).
    func takeJournal() -> ChangeJournal {
        guard let journal = spareJournals.withLock({ $0.take() }) else { return ChangeJournal() }
        journal.reset()
        return journal
    }

    /// The journal of `txn`, taken if it has none yet.
    func journal(of txn: borrowing LMDB.WriteTransaction) -> ChangeJournal {
        txn.local(ObjectIdentifier(ChangeJournal.self), make: takeJournal)
    }

    func willCommit(_ txn: borrowing LMDB.WriteTransaction) throws {
        if let changeLogLength, let changeLog {
            try ChangeLogFormat.write(
                journal(of: txn), transaction: txn.id, keeping: changeLogLength, in: changeLog, txn: txn)
        }
        if let journal = txn.local(ObjectIdentifier(ChangeJournal.self), as: ChangeJournal.self) {
            announce(journal)
        }
    }

    func didCommit(transaction id: Int, local: (ObjectIdentifier) -> AnyObject?) {
        if let journal = local(ObjectIdentifier(ChangeJournal.self)) as? ChangeJournal {
            publishInTurn(journal) {
                journal.stamp(transaction: id)
                journal.forEachBatch { state, batch in
                    guard !batch.isEmpty, state.observerCount.load(ordering: .relaxed) > 0 else { return }
                    state.publish(batch)
                }
            }
            if journal.isWorthKeeping { spareJournals.withLock { $0.keep(journal) } }
        }
    }

    /// Passes on the place of a transaction that did not commit, with nothing published.
    func didNotCommit(transaction id: Int, local: (ObjectIdentifier) -> AnyObject?) {
        if let journal = local(ObjectIdentifier(ChangeJournal.self)) as? ChangeJournal {
            publishInTurn(journal) {}
        }
    }

    // MARK: Order of publication

    // LMDB releases its writer lock inside the commit, before the committing thread publishes:
    // another thread could commit the next transaction and publish it first. So each journal
    // takes a place as its transaction is about to commit (under the writer lock), and is
    // published only after the one before it: a wait for another writer, never for a consumer.

    /// Gives `journal` the next place in the order of publication.
    func announce(_ journal: ChangeJournal) {
        journal.publication = nextPublication
        nextPublication += 1
    }

    /// Runs `publish` once every journal before `journal` in the order has been published or
    /// withdrawn, then marks `journal`'s place passed.
    func publishInTurn(_ journal: ChangeJournal, _ publish: () -> Void) {
        let place = journal.publication
        guard place > 0 else { return publish() }
        while published.load(ordering: .acquiring) != place - 1 { sched_yield() }
        publish()
        published.store(place, ordering: .releasing)
    }

    // MARK: Subscribers

    /// Adds `subscriber` to `state`'s; starts the watch of other processes with the first one.
    func subscribe(_ subscriber: ChangeSubscriber, to state: CollectionState, store: Store) {
        observed.withLock { $0[state.name] = state }
        // The listener before the subscriber counts: a write that sees the subscriber (and so
        // records its changes) commits with the listener set. Set and removed under the watch's
        // lock, so that the last subscriber leaving never removes a newcomer's listener.
        let start = watch.withLock { watch -> Bool in
            watch.subscribers += 1
            store.environment.setCommitListenerOnce(self)
            return watch.subscribers == 1 && watch.watcher == nil
        }
        state.subscribe(subscriber)
        if start { startWatch(store: store) }
    }

    /// Removes `subscriber`; with the last one, stops the watch and, unless the store keeps a
    /// change log, stops listening to commits (a writer is then back to one atomic load a commit).
    func unsubscribe(_ subscriber: ChangeSubscriber, from state: CollectionState, store: Store) {
        subscriber.finish()
        state.unsubscribe(subscriber)
        let stopping = watch.withLock { watch -> ProcessWatcher? in
            watch.subscribers -= 1
            guard watch.subscribers == 0 else { return nil }
            if !logsChanges { store.environment.setCommitListener(nil) }
            guard let watcher = watch.watcher else { return nil }
            // Under the lock: a newcomer's watch starts noting this process's commits after
            // this, never before (it would then run without them being noted).
            store.environment.ownCommits.setOn(false)
            watch.watcher = nil
            return watcher
        }
        stopping?.stop()
    }

    /// Ends observation for a store being closed (``Store/close()``): stops the watch for other
    /// processes' commits, and finishes every subscriber's sequence, so that no loop over
    /// `changes()` or `observe(_:)` waits for a commit that will never come.
    func close(store: Store) {
        let watcher = watch.withLock { watch -> ProcessWatcher? in
            defer { watch.watcher = nil }
            return watch.watcher
        }
        watcher?.stop()
        for state in observed.withLock({ Array($0.values) }) {
            for subscriber in state.observers.withLock({ $0.subscribers }) { subscriber.finish() }
        }
    }

    private func startWatch(store: Store) {
        guard otherProcesses.mode != .off else { return }
        // Before the watch takes its first mark: every commit after it is noted.
        store.environment.ownCommits.setOn(true)
        let watcher: ProcessWatcher
        do {
            watcher = try ProcessWatcher(environment: store.environment, observation: self)
        } catch {
            store.environment.ownCommits.setOn(false)
            logger.error(
                "cannot watch the store for other processes' commits",
                metadata: ["path": "\(store.path)", "error": "\(error)"])
            return
        }
        let started = watch.withLock { watch -> Bool in
            guard watch.watcher == nil else { return false }
            guard watch.subscribers > 0 else {
                // The subscribers left meanwhile: nothing is to note this process's commits.
                store.environment.ownCommits.setOn(false)
                return false
            }
            watch.watcher = watcher
            return true
        }
        if started { watcher.start() } else { watcher.stop() }
    }

    /// Whether the listener must hear of every commit (to write each one's change log entry), or
    /// only of the transactions that kept a journal.
    var hearsEveryCommit: Bool { logsChanges }

    /// Hands `batch` to every subscriber of collection `name`.
    func publish(_ batch: RawChanges, toCollection name: String) {
        observed.withLock { $0[name] }?.publish(batch)
    }

    /// Hands `batch` (unknown changes) to every observed collection.
    func publishToAll(_ batch: RawChanges) {
        for state in observed.withLock({ Array($0.values) }) where state.observerCount.load(ordering: .relaxed) > 0 {
            state.publish(batch)
        }
    }
}

extension Environment {
    /// Makes `listener` the environment's commit listener unless it already is.
    func setCommitListenerOnce(_ listener: Observation) {
        if let current = currentCommitListener, current === listener { return }
        setCommitListener(listener, everyCommit: listener.hearsEveryCommit)
    }
}
