internal import LMDB
internal import Synchronization
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

// The lease: a store that follows a bus vouches for its records only while the bus holds a lease
// (docs/REPLICAS.md, "The lease"). Once a writer's wait has stopped counting this replica, it
// may have missed an invalidation, and must not serve a record as fresh. The check is on the read
// path, against the clock, not a timer's: a process stopped past its lease (SIGSTOP, a long
// pause) must not serve a record in the moments after it resumes, before any timer has run.

/// An instant of the clock a store counts its lease on: the system's monotonic clock, which
/// never jumps with the wall clock, read coarsely (on Linux `CLOCK_MONOTONIC_COARSE`), so that a
/// get on a store that holds its lease pays almost nothing for the check.
///
/// A reading may lag the true time by up to ``resolution``; a bus subtracts that from every
/// deadline it sets, so that a lagging reading never stretches a lease.
public struct LeaseInstant: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Nanoseconds of the monotonic clock.
    let nanoseconds: Int64

    /// Now.
    public static func now() -> LeaseInstant { LeaseInstant(nanoseconds: leaseClockNanoseconds()) }

    /// How far a reading may lag the true time: the coarse clock's tick (1 to 4 ms on Linux, set
    /// by the kernel's `CONFIG_HZ`).
    public static let resolution: Duration = {
        var tick = timespec()
        #if os(Linux)
        clock_getres(CLOCK_MONOTONIC_COARSE, &tick)
        #else
        clock_getres(CLOCK_MONOTONIC, &tick)
        #endif
        return .seconds(Int64(tick.tv_sec)) + .nanoseconds(Int64(tick.tv_nsec))
    }()

    /// The instant `duration` later (earlier for a negative one).
    public func advanced(by duration: Duration) -> LeaseInstant {
        let (seconds, attoseconds) = duration.components
        return LeaseInstant(
            nanoseconds: nanoseconds.addingSaturating(
                seconds.multipliedReportingOverflow(by: 1_000_000_000).partialValue
                    .addingSaturating(attoseconds / 1_000_000_000)))
    }

    /// The time from this instant to `other`.
    public func duration(to other: LeaseInstant) -> Duration { .nanoseconds(other.nanoseconds - nanoseconds) }

    /// Whether `lhs` comes before `rhs`.
    public static func < (lhs: LeaseInstant, rhs: LeaseInstant) -> Bool { lhs.nanoseconds < rhs.nanoseconds }

    /// The instant in nanoseconds of the monotonic clock.
    public var description: String { "\(nanoseconds) ns" }
}

/// The lease clock in nanoseconds.
@inline(__always)
func leaseClockNanoseconds() -> Int64 {
    var now = timespec()
    #if os(Linux)
    clock_gettime(CLOCK_MONOTONIC_COARSE, &now)
    #else
    clock_gettime(CLOCK_MONOTONIC, &now)
    #endif
    return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
}

/// What the store keeps of its lease, read by every get of a store that follows a bus.
final class LeaseState: Sendable {
    /// `Int64.max` while no bus holds the store to a lease (it vouches for what it holds, as a
    /// store without replicas does); otherwise the deadline of the lease in nanoseconds of the
    /// lease clock, 0 when it has none.
    let until = Atomic<Int64>(.max)
    /// The oldest LMDB snapshot a read may vouch for under the lease: the last transaction committed
    /// when the lease began, after the catch-up that had to come first. A read transaction that
    /// began before that (a caller's own, say) sees a store that may still lack an invalidation.
    let since = Atomic<Int>(0)
    /// Reads answered as expired because the store held no lease.
    let readsWithout = Atomic<Int>(0)

    static let notRequired = Int64.max
}

extension Store {
    /// Whether the store vouches for what `txn` reads as fresh: always, unless a bus holds it to a
    /// lease, and then only while the lease runs and `txn`'s snapshot is no older than the lease's
    /// start. One atomic load on a store without a bus.
    ///
    /// `startedAt`, when given, is the ``monotonicNanoseconds()`` reading a get takes as it begins:
    /// the lease is judged at that instant, with no clock read of its own. That clock is never
    /// behind the lease clock, so it ends a lease no later (docs/REPLICAS.md, "Why it holds").
    @inline(__always)
    func vouches<Access>(for txn: borrowing LMDB.Transaction<Access>, startedAt: UInt64? = nil) -> Bool {
        let until = replicationState.lease.until.load(ordering: .acquiring)
        if until == LeaseState.notRequired { return true }
        let now = startedAt.map { Int64(truncatingIfNeeded: $0) } ?? leaseClockNanoseconds()
        return vouchesUnderLease(until: until, snapshot: txn.id, now: now)
    }

    /// ``vouches(for:startedAt:)`` once a bus holds the store to a lease: the deadline against
    /// `now`, and the snapshot's age.
    @inline(__always)
    func vouchesUnderLease(until: Int64, snapshot: Int, now: Int64) -> Bool {
        let lease = replicationState.lease
        if now < until && snapshot >= lease.since.load(ordering: .relaxed) { return true }
        lease.readsWithout.add(1, ordering: .relaxed)
        return false
    }
}

extension Replication {
    // MARK: - The lease

    /// Holds the store to a lease from now on: it serves records as fresh only while a lease that
    /// a bus began (``beginLease(until:)``) runs. Until then, and whenever the lease runs out, a
    /// get answers `nil`, scans and visits find nothing, and read-through calls the upstream (a
    /// failed fetch throws: no stale-if-error for a record the store cannot vouch for). Nothing
    /// is deleted. Idempotent. `PostgresBus` calls it when it is made; it holds for the store in
    /// this process, for as long as it is open.
    public func requireLease() {
        _ = store.replicationState.lease.until.compareExchange(
            expected: LeaseState.notRequired, desired: 0, ordering: .releasing)
    }

    /// Begins a lease that runs until `deadline`, after a lapse or at the start: from now on,
    /// reads whose snapshot includes every change committed so far are served as before. The bus
    /// calls it once the store has applied every change that its lease's grant could have let a
    /// writer skip (docs/REPLICAS.md).
    ///
    /// - Throws: ``HoardError/storage(_:)`` when the storage fails (the store then stays without a lease).
    public func beginLease(until deadline: LeaseInstant) throws {
        let lease = store.replicationState.lease
        let snapshot = try store.readLMDB { txn in txn.id }
        lease.since.store(snapshot, ordering: .relaxed)
        // Released after `since`: a read that sees the new deadline sees the new floor too.
        lease.until.store(deadline.nanoseconds, ordering: .releasing)
    }

    /// Moves the deadline of the lease to `deadline`, for a renewal answered before the lease ran
    /// out (the bus judges that, on the same clock, when the answer arrives: a deadline that passes
    /// between that moment and this call is still extended, for the lease never lapsed). A renewal
    /// answered late begins a new lease instead (``beginLease(until:)``), after a catch-up; an
    /// ended lease is not brought back by this.
    public func extendLease(until deadline: LeaseInstant) {
        let lease = store.replicationState.lease
        var current = lease.until.load(ordering: .relaxed)
        while current != LeaseState.notRequired && current != 0 && current < deadline.nanoseconds {
            let (exchanged, found) = lease.until.compareExchange(
                expected: current, desired: deadline.nanoseconds, ordering: .releasing)
            if exchanged { return }
            current = found
        }
    }

    /// Ends the lease now (the bus stopped): the store serves nothing as fresh until a bus begins
    /// another.
    public func endLease() {
        let lease = store.replicationState.lease
        if lease.until.load(ordering: .relaxed) != LeaseState.notRequired {
            lease.until.store(0, ordering: .releasing)
        }
    }

    /// Whether the store vouches for its records now: it is not held to a lease, or its lease runs.
    public var holdsLease: Bool {
        let until = store.replicationState.lease.until.load(ordering: .acquiring)
        return until == LeaseState.notRequired || leaseClockNanoseconds() < until
    }

    /// The deadline of the lease, or `nil` when the store is not held to one or has none.
    public var leaseDeadline: LeaseInstant? {
        let until = store.replicationState.lease.until.load(ordering: .acquiring)
        guard until != LeaseState.notRequired, until > leaseClockNanoseconds() else { return nil }
        return LeaseInstant(nanoseconds: until)
    }

    /// Reads answered as expired because the store held no lease, since it was opened.
    public var readsWithoutLease: Int { store.replicationState.lease.readsWithout.load(ordering: .relaxed) }
}
