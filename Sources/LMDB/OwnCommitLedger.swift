import Synchronization

/// This process's write transactions by id, noted while ``isOn``: for a watch of the data file,
/// which sees every process's commits and must tell this process's from the others'.
///
/// The committing thread notes its transaction in a ring of atomic slots, one store just before
/// the commit and one after it, with no lock and no call. (Heard through the commit listener,
/// with a lock to note each commit and another to settle it, a single put observed in its own
/// process cost a measurable share more; the ledger's part of a commit is too small to see.) A slot holds the id of the last transaction noted there, with whether
/// it committed; an id that another noted since took over counts as not this process's, which a
/// watch treats as a change it cannot name, never as a change missed.
package final class OwnCommitLedger: @unchecked Sendable {
    // @unchecked: `slots` is written and read only through atomic operations; the pointer
    // itself never changes.

    /// What the ledger knows of a transaction id.
    package enum Entry: Sendable, Equatable {
        /// Not noted: another process's transaction, or one this process made while the ledger
        /// was off, or one noted so long ago that its slot was taken over.
        case notOwn
        /// This process is committing it now: its outcome decides whether the id is this
        /// process's (the commit succeeded) or the next writer's (it failed).
        case beingMade
        /// This process committed it.
        case made
    }

    /// The ring's size: the most transactions a watch may be behind and still tell them apart.
    package static let capacity = 4_096

    private let slots: UnsafeMutablePointer<Atomic<Int>>
    private let on = Atomic<Bool>(false)
    /// The transaction a watch waits to see settled (0: none), and how it is woken.
    private let waitingFor = Atomic<Int>(0)
    private let waker = Mutex<(@Sendable () -> Void)?>(nil)

    init() {
        slots = .allocate(capacity: Self.capacity)
        for index in 0..<Self.capacity { (slots + index).initialize(to: Atomic(0)) }
    }

    deinit {
        slots.deinitialize(count: Self.capacity)
        slots.deallocate()
    }

    /// Whether this process's write transactions are noted.
    package var isOn: Bool { on.load(ordering: .acquiring) }

    /// Starts or stops noting this process's write transactions. A transaction about to commit
    /// may still see the former setting; ids noted before stay until their slots are taken over.
    package func setOn(_ value: Bool) { on.store(value, ordering: .releasing) }

    /// What the ledger knows of transaction `id`.
    package func entry(_ id: Int) -> Entry {
        // An empty slot holds 0, which would read as id 0 being made (LMDB's ids start at 1).
        guard id > 0 else { return .notOwn }
        return switch slot(id).pointee.load(ordering: .acquiring) {
        case id << 1: .beingMade
        case id << 1 | 1: .made
        default: .notOwn
        }
    }

    /// Calls `wake` once transaction `id` settles (it committed or failed), if it is still being
    /// made; `id` 0 stops waiting. The caller looks at ``entry(_:)`` again after this, since the
    /// transaction may have settled just before.
    package func wake(whenSettled id: Int, _ wake: @escaping @Sendable () -> Void) {
        waker.withLock { $0 = wake }
        waitingFor.store(id, ordering: .releasing)
    }

    /// Notes that this process is about to commit `id` (under LMDB's writer lock); returns
    /// whether it did, which its ``settle(_:committed:)`` must be told.
    @inline(__always)
    func begin(_ id: Int) -> Bool {
        guard on.load(ordering: .relaxed) else { return false }
        slot(id).pointee.store(id << 1, ordering: .releasing)
        return true
    }

    /// Notes whether `id`, begun, committed. When it did not, the id passes to the next writer,
    /// and the mark is cleared only while it still reads as being made: a later writer here that
    /// committed the same id keeps its mark. (One that noted the same id as being made meanwhile
    /// loses it until it settles; a watch looking then takes its commit for another process's,
    /// an "unknown" batch at worst, never a missed change.)
    @inline(__always)
    func settle(_ id: Int, committed: Bool) {
        if committed {
            slot(id).pointee.store(id << 1 | 1, ordering: .releasing)
        } else {
            _ = slot(id).pointee.compareExchange(
                expected: id << 1, desired: 0, successOrdering: .releasing, failureOrdering: .relaxed)
        }
        if waitingFor.load(ordering: .acquiring) == id { wakeWatch() }
    }

    /// Out of line, so that the part of ``settle(_:committed:)`` every commit runs is inlined
    /// into the commit: called whole, with this lock in it, the two cost a commit twice the
    /// instructions (callgrind).
    @inline(never)
    private func wakeWatch() {
        if let wake = waker.withLock({ $0 }) { wake() }
    }

    @inline(__always)
    private func slot(_ id: Int) -> UnsafeMutablePointer<Atomic<Int>> {
        slots + (id & (Self.capacity - 1))
    }
}
