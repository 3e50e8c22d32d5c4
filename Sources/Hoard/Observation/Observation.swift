internal import LMDB

#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif
internal import Logging
internal import Synchronization

// Change observation. Every write site that changes a record records it in the transaction's
// ChangeJournal, but only while the collection has subscribers or the store keeps a change log
// (an atomic load otherwise). The store listens to its environment's commits: just before one,
// it writes the change log entry; once it committed, it hands each subscriber of each changed
// collection its batch, on the committing thread, before the write returns (and before any
// group-commit caller resumes). Commits of other processes are found by ProcessWatcher.

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
    /// The commits this process made that the watch has not passed yet: those it is making
    /// (`true`: the commit has not returned) and those it made.
    let ownCommits = Mutex(OwnCommits())
    /// This process's commit the watch waits to see settled (0 for none).
    let watchWaitsFor = Atomic<Int>(0)
    /// Whether ``ownCommits`` is kept (only while a watch runs).
    let tracksOwnCommits = Atomic<Bool>(false)
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

    /// A journal for a write transaction: a spare one emptied, or a new one. Only one write
    /// transaction runs at a time, but the last one may still be publishing on another thread,
    /// hence the lock.
    func takeJournal() -> ChangeJournal {
        guard let journal = spareJournals.withLock({ $0.take() }) else { return ChangeJournal() }
        journal.reset()
        return journal
    }

    /// The journal of `txn`, taken if it has none yet.
    func journal(of txn: borrowing WriteTransaction) -> ChangeJournal {
        txn.local(ObjectIdentifier(ChangeJournal.self), make: takeJournal)
    }

    func willCommit(_ txn: borrowing WriteTransaction) throws {
        if tracksOwnCommits.load(ordering: .acquiring) {
            let id = txn.id
            ownCommits.withLock { $0.begin(id) }
        }
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
        if tracksOwnCommits.load(ordering: .acquiring) {
            ownCommits.withLock { $0.settle(id, committed: true) }
            wakeWatchWaiting(for: id)
        }
    }

    /// Forgets a commit this process began but that failed (the id may be another process's next).
    func didNotCommit(transaction id: Int, local: (ObjectIdentifier) -> AnyObject?) {
        if let journal = local(ObjectIdentifier(ChangeJournal.self)) as? ChangeJournal {
            // Its place in the order passes on, with nothing published.
            publishInTurn(journal) {}
        }
        guard tracksOwnCommits.load(ordering: .acquiring) else { return }
        ownCommits.withLock { $0.settle(id, committed: false) }
        wakeWatchWaiting(for: id)
    }

    /// Wakes the watch if it met this process's commit `id` while it was being made and waits
    /// for it to be settled (``watchWaitsFor``).
    private func wakeWatchWaiting(for id: Int) {
        guard watchWaitsFor.load(ordering: .acquiring) == id else { return }
        watch.withLock { $0.watcher }?.wake()
    }

    // MARK: Order of publication

    // LMDB releases its writer lock inside the commit, before the committing thread publishes:
    // another thread of this process can commit the next transaction and publish it first. A
    // subscriber would then get the later batch first, and a merged batch would give an ID the
    // kind of its earlier change. So each journal takes a place as its transaction is about to
    // commit (under the writer lock, so in the order of the commits), and is published only
    // after the journal before it. The wait is for another writer's few instructions between its
    // commit and its publication, never for a consumer.

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
            trackOwnCommits(false, in: store.environment)
            ownCommits.withLock { $0.removeAll() }
            watch.watcher = nil
            return watcher
        }
        stopping?.stop()
    }

    private func startWatch(store: Store) {
        guard otherProcesses.mode != .off else { return }
        trackOwnCommits(true, in: store.environment)
        let watcher: ProcessWatcher
        do {
            watcher = try ProcessWatcher(environment: store.environment, observation: self)
        } catch {
            trackOwnCommits(false, in: store.environment)
            logger.error(
                "cannot watch the store for other processes' commits",
                metadata: ["path": "\(store.path)", "error": "\(error)"])
            return
        }
        let started = watch.withLock { watch -> Bool in
            guard watch.watcher == nil else { return false }
            guard watch.subscribers > 0 else {
                // The subscribers left meanwhile: nothing is to note this process's commits.
                trackOwnCommits(false, in: store.environment)
                ownCommits.withLock { $0.removeAll() }
                return false
            }
            watch.watcher = watcher
            return true
        }
        if started { watcher.start() } else { watcher.stop() }
    }

    /// Starts or stops noting this process's commits for the watch. The listener hears of
    /// every commit while it notes them or writes the change log, and otherwise only of the
    /// transactions that kept a journal: a write of a key nobody observes then makes no call.
    /// Every commit is heard before the first is noted, and noted no more before they are not.
    private func trackOwnCommits(_ on: Bool, in environment: Environment) {
        if on { environment.setCommitListenerHearsEveryCommit(true) }
        tracksOwnCommits.store(on, ordering: .releasing)
        if !on && !logsChanges { environment.setCommitListenerHearsEveryCommit(false) }
    }

    /// Whether the listener must hear of every commit (``trackOwnCommits(_:in:)``).
    var hearsEveryCommit: Bool { logsChanges || tracksOwnCommits.load(ordering: .acquiring) }

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

/// The journals kept for the next write transactions (``Observation/takeJournal()``): two, so
/// that a subscriber has a whole commit more to let go of a batch's buffers before they are
/// needed again. A journal whose buffers a subscriber still holds would copy them when emptied
/// (an allocation the writer makes and the consumer's thread frees, which each cost about what
/// the rest of recording a small commit does).
struct SpareJournals {
    private var older: ChangeJournal?
    private var newer: ChangeJournal?

    /// A spare journal whose buffers are free, the older first; `nil` when neither's are (a new
    /// journal costs no more than emptying one, and the spares may be free by the next commit).
    mutating func take() -> ChangeJournal? {
        if let older, older.buffersAreFree {
            self.older = nil
            return older
        }
        if let newer, newer.buffersAreFree {
            self.newer = nil
            return newer
        }
        return nil
    }

    /// Keeps `journal`, letting go of the older one if there are two.
    mutating func keep(_ journal: ChangeJournal) {
        if let newer { older = newer }
        newer = journal
    }
}

/// This process's commits that the watch has not passed yet, in the order of their ids (each
/// is begun under LMDB's writer lock, so they come in order): those being made, and those made.
/// An array rather than a dictionary: a writer adds and settles one at the end, and hashing cost
/// a commit more than that.
struct OwnCommits {
    private var commits: [(id: Int, made: Bool)] = []

    /// Notes that this process is about to commit `id`.
    mutating func begin(_ id: Int) { commits.append((id, false)) }

    /// Notes that `id` committed, or forgets it when it did not (its id may be another process's).
    mutating func settle(_ id: Int, committed: Bool) {
        guard let index = commits.lastIndex(where: { $0.id == id }) else { return }
        if committed { commits[index].made = true } else { commits.remove(at: index) }
    }

    /// Whether every commit in `range` is one this process made.
    func madeAll(_ range: ClosedRange<Int>) -> Bool {
        commits.count { range.contains($0.id) && $0.made } == range.count
    }

    /// The commits in `range` this process made, and the first one in it still being made.
    func made(in range: ClosedRange<Int>) -> (made: Set<Int>, beingMade: Int?) {
        var made = Set<Int>()
        for commit in commits where range.contains(commit.id) {
            if !commit.made { return (made, commit.id) }
            made.insert(commit.id)
        }
        return (made, nil)
    }

    /// Whether `id` is still being made.
    func isBeingMade(_ id: Int) -> Bool { commits.contains { $0.id == id && !$0.made } }

    /// Forgets the commits up to `id`, which the watch passed.
    mutating func forget(through id: Int) {
        commits.removeFirst(commits.firstIndex { $0.id > id } ?? commits.count)
    }

    mutating func removeAll() { commits.removeAll() }
}

/// The subscribers of one collection in this process, and the keys they observe.
struct CollectionObservers {
    var subscribers: [ChangeSubscriber] = []
    /// The keys observed (``HoardCollection/observe(_:)``); `nil` when a subscriber wants every
    /// change.
    var keys: ObservedKeys? = ObservedKeys()

    mutating func updateKeys() {
        var observed = ObservedKeys()
        for subscriber in subscribers {
            guard case .key(let key) = subscriber.interest else {
                keys = nil
                return
            }
            key.withUnsafeBytes { observed.insert($0) }
        }
        keys = observed
    }
}

/// The keys a collection's ``HoardCollection/observe(_:)`` subscribers watch, as a writer looks a
/// written key up: first in a word with one bit set for each observed key (a few instructions
/// tell most keys apart, with no hash of the whole key), then by the key's hash.
struct ObservedKeys {
    private var hashes = KeyHashSet()
    /// The bits of the keys observed (``bit(_:)``).
    private(set) var summary: UInt64 = 0

    mutating func insert(_ key: UnsafeRawBufferPointer) {
        hashes.insert(keyHash(key))
        summary |= Self.bit(key)
    }

    @inline(__always)
    func contains(_ key: UnsafeRawBufferPointer) -> Bool {
        summary & Self.bit(key) != 0 && hashes.contains(keyHash(key))
    }

    /// The key's bit in the summary: from its length and its first and last eight bytes (which
    /// overlap in a shorter key), multiplied so that every byte moves the top six bits.
    @inline(__always)
    static func bit(_ key: UnsafeRawBufferPointer) -> UInt64 {
        var folded = UInt64(truncatingIfNeeded: key.count)
        if key.count >= 8 {
            let last = key.loadUnaligned(fromByteOffset: key.count - 8, as: UInt64.self)
            folded ^= key.loadUnaligned(as: UInt64.self) ^ (last << 29 | last >> 35)
        } else {
            for byte in key { folded = folded << 8 | UInt64(byte) }
        }
        return 1 << ((folded &* 0x9E37_79B9_7F4A_7C15) >> 58)
    }
}

extension CollectionState {
    func subscribe(_ subscriber: ChangeSubscriber) {
        observers.withLock { observers in
            observers.subscribers.append(subscriber)
            observers.updateKeys()
            observedKeysVersion.add(1, ordering: .releasing)
        }
        observerCount.add(1, ordering: .sequentiallyConsistent)
        metrics.observers.record(observerCount.load(ordering: .relaxed))
    }

    func unsubscribe(_ subscriber: ChangeSubscriber) {
        let removed = observers.withLock { observers -> Bool in
            guard let index = observers.subscribers.firstIndex(where: { $0 === subscriber }) else { return false }
            observers.subscribers.remove(at: index)
            observers.updateKeys()
            observedKeysVersion.add(1, ordering: .releasing)
            return true
        }
        if removed { observerCount.subtract(1, ordering: .sequentiallyConsistent) }
        metrics.observers.record(observerCount.load(ordering: .relaxed))
    }

    /// Brings the writer's copy of the keys observed (``writersKeys``) up to date, taking the lock
    /// only when they changed since it was taken (``observedKeysVersion``). Called only by the
    /// thread that holds the store's write transaction.
    @inline(__always)
    func refreshWritersKeys() {
        let version = observedKeysVersion.load(ordering: .acquiring)
        guard version != writersKeysVersion else { return }
        writersKeys = observers.withLock { $0.keys }
        writersKeysSummary = writersKeys?.summary ?? ~0
        writersWantEverything = writersKeys == nil
        writersKeysVersion = version
    }

    /// Hands `batch` to every subscriber. Under the lock, rather than on a copy of the
    /// subscribers: a copy counts a reference to each subscriber, whose cache line its consumer
    /// keeps reading (``ChangeSubscriber/deliver(_:)`` never blocks).
    func publish(_ batch: RawChanges) {
        observers.withLock { observers in
            for index in observers.subscribers.indices { observers.subscribers[index].deliver(batch) }
        }
    }
}

extension Store {
    /// What records the changes of the collection of `state` in `txn`, or `nil` when nobody would
    /// read them (no subscriber in this process, no change log): one atomic load.
    @inline(__always)
    func changeRecorder(for state: CollectionState, in txn: borrowing WriteTransaction) -> ChangeRecorder? {
        guard state.observerCount.load(ordering: .acquiring) > 0 || observation.logsChanges else { return nil }
        return ChangeRecorder(state: state, observation: observation, in: txn)
    }

    /// What records the changes of collection `name` in `txn`, or `nil` when nobody would read
    /// them. For writers that know the collection by name (a replica's invalidations).
    func changeRecorder(forCollection name: String, in txn: borrowing WriteTransaction) -> ChangeRecorder? {
        let state = observation.logsChanges ? state(of: name) : existingState(of: name)
        guard let state else { return nil }
        return changeRecorder(for: state, in: txn)
    }
}

/// Records a write transaction's changes to one collection in the transaction's ``ChangeJournal``:
/// every change when the store keeps a change log or a subscriber wants them all (the journal is
/// taken at once), otherwise only those of the keys observed (``ObservedKeys``). The journal is
/// then taken by the first change kept, so that a write of a key nobody observes allocates nothing.
struct ChangeRecorder {
    // Unmanaged: a recorder lives within one write transaction, which the collection's state,
    // the store's observation and the transaction's journal all outlive. Held strongly (or
    // unowned), each use of them counted a reference, and that was most of what recording cost
    // a write of a key nobody observes.
    private let state: Unmanaged<CollectionState>
    private let observation: Unmanaged<Observation>
    /// The journal, when every change is kept.
    private let journal: Unmanaged<ChangeJournal>?
    /// The summary bits of the keys observed (``ObservedKeys/summary``), when only those are kept.
    private let summary: UInt64

    // Borrowed: an initializer takes its arguments owned by default, which cost a write a
    // retain and a release of each.
    init(state: borrowing CollectionState, observation: borrowing Observation, in txn: borrowing WriteTransaction) {
        self.state = Unmanaged.passUnretained(state)
        self.observation = Unmanaged.passUnretained(observation)
        state.refreshWritersKeys()
        summary = state.writersKeysSummary
        journal =
            observation.logsChanges || state.writersWantEverything
            ? Unmanaged.passUnretained(observation.journal(of: txn)) : nil
    }

    /// Records that the record under `key` changed, if it is kept. Inlined into the write sites
    /// down to the summary bit, the few instructions a key nobody observes costs.
    @inline(__always)
    func record(key: UnsafeRawBufferPointer, _ kind: RecordedKind, in txn: borrowing WriteTransaction) {
        if let journal {
            state._withUnsafeGuaranteedRef { state in
                journal._withUnsafeGuaranteedRef { $0.record(state, key: key, kind) }
            }
        } else if kind == .cleared || summary & ObservedKeys.bit(key) != 0 {
            recordIfObserved(key: key, kind, in: txn)
        }
    }

    private func recordIfObserved(key: UnsafeRawBufferPointer, _ kind: RecordedKind, in txn: borrowing WriteTransaction)
    {
        state._withUnsafeGuaranteedRef { state in
            guard kind == .cleared || state.writersKeys?.contains(key) != false else { return }
            observation._withUnsafeGuaranteedRef { $0.journal(of: txn) }.record(state, key: key, kind)
        }
    }

    func record(key: [UInt8], _ kind: RecordedKind, in txn: borrowing WriteTransaction) {
        key.withUnsafeBytes { record(key: $0, kind, in: txn) }
    }
}

extension Environment {
    /// Makes `listener` the environment's commit listener unless it already is.
    func setCommitListenerOnce(_ listener: Observation) {
        if let current = currentCommitListener, current === listener { return }
        setCommitListener(listener, everyCommit: listener.hearsEveryCommit)
    }
}

extension Store {
    /// How a process notices the commits of other processes (``Options/otherProcesses``).
    public struct OtherProcessChanges: Sendable, Hashable {
        enum Mode: Hashable {
            case watchFile(fallback: Duration)
            case poll(Duration)
            case off
        }

        let mode: Mode

        /// Watch the data file (inotify on Linux): a commit of another process wakes the watch,
        /// and no commit means no wake-up. The kernel charges each write to a watched file an
        /// event, so the watch is set for one event at a time, again at most every 100 µs (every
        /// millisecond after it woke for this process's commits only): a commit made while it is
        /// not set waits for the next setting. Where the file cannot be watched (other
        /// platforms, or a file replaced under the store), poll every 100 ms.
        public static let watchFile = OtherProcessChanges(mode: .watchFile(fallback: .milliseconds(100)))
        /// Read the last transaction id every `interval`.
        public static func poll(every interval: Duration) -> OtherProcessChanges {
            OtherProcessChanges(mode: .poll(interval))
        }
        /// Do not look: observers see this process's commits only.
        public static let off = OtherProcessChanges(mode: .off)
    }
}
