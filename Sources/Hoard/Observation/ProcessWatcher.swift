internal import Dispatch
internal import LMDB
internal import Logging
internal import Synchronization
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

/// Notices other processes' commits, while a collection of the store has subscribers.
///
/// Every commit of every process writes the data file (`pwrite`, the meta page last): on Linux
/// an inotify watch of it wakes on another process's commit; elsewhere, or with
/// ``Store/OtherProcessChanges/poll(every:)``, the watch polls the last transaction id. On waking
/// it takes a new read transaction's id as its mark; the commits since the old mark that this
/// process did not make are other processes': the change log names their keys when it has them,
/// else every observed collection gets an "unknown" batch for the range.
///
/// A watched file costs every `pwrite` to it an event, so the watch is one-shot (`IN_ONESHOT`),
/// set again at most every ``rearmInterval``, with a look at the transaction id after each
/// setting for commits made while unset. Woken by this process's commits only, it stays unset and
/// polls every ``ownCommitsPoll`` ms until another process commits or ``ownCommitsQuiet`` passes.
final class ProcessWatcher: @unchecked Sendable {
    // @unchecked: `mark`, `inotify` and `changeLog` belong to the watch's own queue; the rest is
    // immutable or atomic.
    private let environment: Environment
    private let observation: Observation
    private let queue = DispatchQueue(label: "hoard.observation.watch")
    /// The read end and write end of a pipe that wakes the watch (a stop, a commit it waits for);
    /// the write end is closed under its lock, so that no late wake writes to a reused descriptor.
    private let wakeRead: Int32
    private let wakeWrite: Mutex<Int32>
    private let stopped = Atomic<Bool>(false)
    private let started = Atomic<Bool>(false)
    /// Signalled when the loop has ended.
    private let ended = DispatchSemaphore(value: 0)
    /// The inotify descriptor; `-1` when polling.
    private var inotify: Int32 = -1
    /// The watched data file's device and inode, to tell a file replaced under the store when
    /// the watch is set again.
    private var watchedFile: (device: UInt64, inode: UInt64)?
    /// When the watch was last set (monotonic nanoseconds).
    private var armedAt: UInt64 = 0
    /// How long at least between two settings of the watch: the most a commit waits to be noticed
    /// beyond the watch's own work, and what keeps a stream of commits to one event an interval.
    static let rearmInterval: UInt64 = 100_000
    /// How often the watch looks, in milliseconds, while it is left unset for this process's
    /// commits: another process's commit made meanwhile waits up to that long.
    static let ownCommitsPoll: Int32 = 1
    /// Whether the watch is left unset while this process commits (``ownCommitsPoll``).
    private var unsetForOwnCommits = false
    /// How long the watch stays unset after a look last found this process's commits: longer than
    /// the gaps between a large put's commits, which would otherwise each pay a wake-up.
    static let ownCommitsQuiet: UInt64 = 10_000_000
    /// When a look last found this process's commits (monotonic nanoseconds).
    private var ownCommitSeenAt: UInt64 = 0
    /// How often to look when polling, in milliseconds.
    private let pollMilliseconds: Int32
    /// The last transaction whose changes were handed out.
    private var mark = 0
    private var changeLog: Database?

    init(environment: Environment, observation: Observation) throws {
        self.environment = environment
        self.observation = observation
        mark = try environment.read { $0.id }
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw HoardError.observation(reason: "pipe failed: errno \(errno)") }
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        wakeRead = fds[0]
        wakeWrite = Mutex(fds[1])
        switch observation.otherProcesses.mode {
        case .poll(let interval):
            pollMilliseconds = Int32(clamping: max(interval.storedMilliseconds, 1))
        case .watchFile(let fallback):
            pollMilliseconds = Int32(clamping: max(fallback.storedMilliseconds, 1))
            watchedFile = Self.identity(of: environment.dataFilePath)
            inotify = watchedFile == nil ? -1 : Self.watch(environment.dataFilePath)
            armedAt = monotonicNanoseconds()
            if inotify < 0 {
                observation.logger.warning(
                    "cannot watch the data file; polling for other processes' commits instead",
                    metadata: ["path": "\(environment.dataFilePath)", "errno": "\(errno)"])
            }
        case .off:
            pollMilliseconds = -1
        }
    }

    /// An inotify descriptor watching `path` for its next modification, or -1 (not Linux, or
    /// inotify refused).
    private static func watch(_ path: String) -> Int32 {
        #if os(Linux)
        let fd = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        guard fd >= 0 else { return -1 }
        guard arm(fd, path) else {
            close(fd)
            return -1
        }
        return fd
        #else
        return -1
        #endif
    }

    #if os(Linux)
    /// Sets the watch of `path` on `fd` for one event.
    private static func arm(_ fd: Int32, _ path: String) -> Bool {
        inotify_add_watch(fd, path, UInt32(IN_MODIFY | IN_DELETE_SELF | IN_MOVE_SELF) | UInt32(IN_ONESHOT)) >= 0
    }
    #endif

    /// The device and inode of the file at `path`, or `nil` when it cannot be read.
    private static func identity(of path: String) -> (device: UInt64, inode: UInt64)? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return (UInt64(info.st_dev), UInt64(info.st_ino))
    }

    func start() {
        started.store(true, ordering: .releasing)
        queue.async { self.run() }
    }

    /// Ends the watch and waits for its loop to end: it holds the environment while it runs,
    /// and a store closed by its last user must be closed, so that it can be opened again at once.
    func stop() {
        stopped.store(true, ordering: .releasing)
        wake()
        if started.load(ordering: .acquiring) {
            ended.wait()
        } else {
            closeDescriptors()
        }
    }

    /// Wakes the watch's loop.
    func wake() {
        wakeWrite.withLock { fd in
            var byte: UInt8 = 1
            if fd >= 0 { _ = write(fd, &byte, 1) }
        }
    }

    private func closeDescriptors() {
        if inotify >= 0 { close(inotify) }
        close(wakeRead)
        wakeWrite.withLock { fd in
            close(fd)
            fd = -1
        }
    }

    private func run() {
        defer {
            closeDescriptors()
            ended.signal()
        }
        while !stopped.load(ordering: .acquiring) {
            var fds = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            if inotify >= 0 { fds.append(pollfd(fd: inotify, events: Int16(POLLIN), revents: 0)) }
            let timeout: Int32 = inotify < 0 ? pollMilliseconds : unsetForOwnCommits ? Self.ownCommitsPoll : -1
            let ready = poll(&fds, nfds_t(fds.count), timeout)
            if ready < 0 && errno != EINTR {
                observation.logger.error(
                    "the watch of other processes' commits failed", metadata: ["errno": "\(errno)"])
                guard inotify >= 0 else { return }
                // Without the file watch, polling may still work.
                close(inotify)
                inotify = -1
            }
            if stopped.load(ordering: .acquiring) { return }
            drain(wakeRead)
            let fired = inotify >= 0 && readEvents()
            let found = look()
            guard inotify >= 0, fired || unsetForOwnCommits else { continue }
            // Only this process's commits: leave the watch unset and look again on a timer, until
            // another process commits or this one has not for a while.
            let now = monotonicNanoseconds()
            if found == .ownOnly {
                ownCommitSeenAt = now
                unsetForOwnCommits = true
            } else if found == .others || now &- ownCommitSeenAt >= Self.ownCommitsQuiet {
                unsetForOwnCommits = false
            }
            if !unsetForOwnCommits {
                // Set the watch again after what woke it was handed out, so that the wait for
                // the interval delays only the commits made meanwhile, which the second look finds.
                rearm(after: Self.rearmInterval)
                _ = look()
            }
        }
    }

    /// What a look found since the mark.
    private enum Found {
        /// No commit (or none settled yet: a commit whose meta page is not written yet wakes
        /// the watch too), or a look that failed.
        case nothing
        /// Only this process's commits.
        case ownOnly
        /// Other processes' commits.
        case others
    }

    /// Hands out the changes of other processes' commits since the mark; logs what fails.
    private func look() -> Found {
        do {
            return try check()
        } catch {
            observation.logger.error(
                "cannot read other processes' commits",
                metadata: ["path": "\(environment.path)", "error": "\(error)"])
            return .nothing
        }
    }

    private func drain(_ fd: Int32) {
        var buffer = [UInt8](repeating: 0, count: 256)
        while read(fd, &buffer, buffer.count) > 0 {}
    }

    /// Reads the inotify events; returns whether the watch fired (and must be set again). A data
    /// file deleted or renamed away ends the watch of it (an overflow of the queue needs nothing:
    /// every wake-up looks at the transaction id).
    private func readEvents() -> Bool {
        #if os(Linux)
        var buffer = [UInt8](repeating: 0, count: 4096)
        var (fired, replaced) = (false, false)
        while true {
            let count = read(inotify, &buffer, buffer.count)
            guard count > 0 else { break }
            var offset = 0
            while offset + MemoryLayout<inotify_event>.size <= count {
                let event = buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: inotify_event.self) }
                if event.mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF) != 0 { replaced = true }
                // A one-shot watch is removed once it fired (IN_IGNORED follows its event).
                if event.mask & UInt32(IN_IGNORED) != 0 { fired = true }
                offset += MemoryLayout<inotify_event>.size + Int(event.len)
            }
        }
        if replaced { endFileWatch() }
        return fired && !replaced
        #else
        return false
        #endif
    }

    /// Sets the watch again, once `interval` has passed since it was last set; a path that names
    /// another file by now ends the watch.
    private func rearm(after interval: UInt64) {
        #if os(Linux)
        let due = armedAt &+ interval
        let now = monotonicNanoseconds()
        if due > now {
            var pause = timespec(tv_sec: 0, tv_nsec: Int(due - now))
            _ = nanosleep(&pause, nil)
        }
        armedAt = monotonicNanoseconds()
        let armed = Self.arm(inotify, environment.dataFilePath)
        let file = Self.identity(of: environment.dataFilePath)
        if !armed || file == nil || file?.device != watchedFile?.device || file?.inode != watchedFile?.inode {
            endFileWatch()
        }
        #endif
    }

    /// Falls back to polling, for a data file that is not the store's any more.
    private func endFileWatch() {
        observation.logger.warning(
            "the data file was replaced or removed; polling for other processes' commits from now on",
            metadata: ["path": "\(environment.dataFilePath)"])
        close(inotify)
        inotify = -1
    }

    /// Hands out the changes of the commits between the mark and what a read transaction sees now.
    private func check() throws -> Found {
        // The newest commit of the meta pages (LMDB reads them from the map, which shows what
        // writers wrote at once): when every commit since the mark is this process's own, the
        // mark moves without a read transaction (the watch wakes at this process's commits too).
        let ledger = environment.ownCommits
        let committed = try environment.info().lastTransactionID
        guard committed > mark else {
            // The next commit is under way: this process's own when it is making it (LMDB lets
            // one writer write at a time), which woke the watch with its first pages.
            return ledger.entry(mark + 1) == .beingMade ? .ownOnly : .nothing
        }
        var next = mark + 1
        while next <= committed, ledger.entry(next) == .made { next += 1 }
        mark = next - 1
        if next > committed { return .ownOnly }
        if ledger.entry(next) == .beingMade {
            // This process's commit, its meta page written and its outcome not noted yet: the
            // ledger wakes the watch when it is, and the commits after it wait till then. Passed
            // as this process's own, so that the watch stays unset while this process commits.
            waitForSettle(of: next)
            return .ownOnly
        }
        // A writer writes its meta page (what the watch sees) before it publishes the transaction
        // to readers in the lock file: look again until it is visible (bounded, for a writer
        // killed in between, whose commit the next writer makes visible).
        var now = try environment.read { $0.id }
        var waited = 0
        while committed > now, waited < 200 {
            var none = pollfd()
            _ = poll(&none, 0, waited < 20 ? 0 : 1)
            waited += 1
            now = try environment.read { $0.id }
        }
        guard now > mark else { return .nothing }
        let range = (mark + 1)...now
        // This process's commits in the range, and the first one still being made (its outcome
        // decides whether its id is this process's or, if it failed, the next writer's).
        var own = Set<Int>()
        var unsettled: Int?
        for id in range {
            let entry = ledger.entry(id)
            if entry == .beingMade {
                unsettled = id
                break
            }
            if entry == .made { own.insert(id) }
        }
        let end = unsettled.map { $0 - 1 } ?? now
        waitForSettle(of: unsettled)
        guard end > mark else { return unsettled == nil ? .nothing : .ownOnly }
        let settled = (mark + 1)...end
        let foreign = settled.count - own.count
        if foreign > 0 {
            let covered = try publishLogged(settled, skipping: own)
            if covered < foreign {
                var batch = RawChanges(first: settled.lowerBound, last: settled.upperBound, origin: .otherProcess)
                batch.unknown = true
                observation.publishToAll(batch)
            }
        }
        mark = end
        return foreign > 0 ? .others : .ownOnly
    }

    /// Has the ledger wake the watch when this process's commit `id`, met while being made,
    /// settles (`nil`: no commit to wait for).
    private func waitForSettle(of id: Int?) {
        environment.ownCommits.wake(whenSettled: id ?? 0) { [weak self] in self?.wake() }
        // Settled between the look and the wait: look again rather than wait.
        if let id, environment.ownCommits.entry(id) != .beingMade { wake() }
    }

    /// Publishes what the change log says of the commits in `range` not in `own`; returns how
    /// many of those commits it has entries for.
    private func publishLogged(_ range: ClosedRange<Int>, skipping own: Set<Int>) throws -> Int {
        if changeLog == nil {
            changeLog = observation.changeLog ?? (try? environment.openDatabase(ChangeLogFormat.databaseName))
        }
        guard let changeLog else { return 0 }
        var covered = 0
        var batches: [(String, RawChanges)] = []
        try environment.read { txn in
            try txn.forEach(
                in: changeLog, range: LMDB.KeyRange(from: .inclusive(ChangeLogFormat.key(range.lowerBound)))
            ) { key, value in
                guard let id = ChangeLogFormat.transaction(of: key), id <= range.upperBound else { return .stop }
                guard !own.contains(id) else { return .next }
                // An entry this code cannot read covers nothing: its commit is an unknown change.
                do {
                    batches.append(contentsOf: try ChangeLogFormat.batches(value, transaction: id))
                    covered += 1
                } catch {
                    observation.logger.warning(
                        "a change log entry cannot be read; its commit is reported as an unknown change",
                        metadata: ["path": "\(environment.path)", "error": "\(error)"])
                }
                return .next
            }
        }
        for (collection, batch) in batches { observation.publish(batch, toCollection: collection) }
        return covered
    }
}
