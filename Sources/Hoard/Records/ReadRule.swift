internal import LMDB

// The read rule: what a read may serve of a stored record. Every read path asks it — a get (in a
// transaction of its own or a caller's), `contains`, scans and visits, read-through, observation
// — and differs only in what it does with the answer. The rule has two parts:
//   1. `ReadRule.expiry(of:)`: when a record stops being fresh. Its own expiry; for a record
//      written before the store's last reset, the reset; and while the store holds no lease
//      (Lease.swift), `staleWhileRevalidate` ago: read-through fetches every record then.
//   2. `Freshness.serving(expiry:now:)`: what read-through does with an expired record: serve it
//      stale while refreshing (`staleWhileRevalidate`), keep it to serve if the fetch fails
//      (`staleIfError`, and only a record the store vouches for), or fetch.

/// When the records of one read snapshot stop being fresh (see the top of this file). Made once a
/// snapshot (``HoardCollection/readRule(in:startedAt:lease:)``): one atomic load for the lease,
/// one for the reset.
struct ReadRule {
    /// One millisecond past the store's last reset; 0 when it was never reset.
    let resetAt: Int64
    /// The expiry every record has while the store does not vouch for its records; `nil` while it does.
    let unvouchedExpiry: Int64?

    /// When a record written at `writtenAt` with expiry `expiresAt` stops being fresh; `nil`: never.
    @inline(__always)
    func expiry(writtenAt: Int64, expiresAt: Int64?) -> Int64? {
        var expiry = expiresAt
        if resetAt != 0, writtenAt < resetAt {
            // Expired as of the reset's millisecond (``Replication/reset(bus:to:)`` keeps the one after it).
            expiry = min(expiresAt ?? (resetAt - 1), resetAt - 1)
        }
        guard let unvouchedExpiry else { return expiry }
        return min(expiry ?? .max, unvouchedExpiry)
    }

    /// ``expiry(writtenAt:expiresAt:)`` of a record's bytes, read from its header without the checksum.
    @inline(__always)
    func expiry(of record: UnsafeRawBufferPointer) -> Int64? {
        let expiresAt = RecordHeader.peekExpiry(record)
        guard resetAt != 0 || unvouchedExpiry != nil else { return expiresAt }
        return expiry(writtenAt: RecordHeader.peekWrittenAt(record) ?? 0, expiresAt: expiresAt)
    }

    /// Whether the store vouches for a record's bytes: it holds its lease, and the record was
    /// written after the last reset. One it does not vouch for may hold a value that a change the
    /// store missed replaced, and is never served stale-if-error.
    func vouches(for record: UnsafeRawBufferPointer) -> Bool {
        unvouchedExpiry == nil && (resetAt == 0 || (RecordHeader.peekWrittenAt(record) ?? 0) >= resetAt)
    }

    /// ``expiry(writtenAt:expiresAt:)`` of a parsed header.
    @inline(__always)
    func expiry(of header: RecordHeader) -> Int64? { expiry(writtenAt: header.writtenAt, expiresAt: header.expiresAt) }
}

extension HoardCollection {
    /// The read rule of snapshot `txn`. `startedAt`: the ``monotonicNanoseconds()`` reading a get
    /// began with, at which the lease is judged (``Store/vouches(for:startedAt:)``). `lease:
    /// false` leaves the lease out: for an observer, which is told what a record holds.
    @inline(__always)
    func readRule<Access>(
        in txn: borrowing LMDB.Transaction<Access>, startedAt: UInt64? = nil, lease: Bool = true
    )
        -> ReadRule
    {
        let vouched = !lease || store.vouches(for: txn, startedAt: startedAt)
        return ReadRule(
            resetAt: store.replicationState.staleBefore.load(ordering: .relaxed),
            unvouchedExpiry: vouched
                ? nil : store.options.now() - (freshness.staleWhileRevalidate?.storedMilliseconds ?? 0))
    }
}

extension HoardCollection where Model: Sendable, Model.ID: Sendable {
    /// What read-through does with a record found (`nil`: none): ``Freshness/serving(expiry:now:)``.
    func serve(_ found: Stored?, now: Int64) -> Serving {
        guard let found else { return .fetch }
        switch freshness.serving(expiry: found.expiresAt, now: now) {
        case .fresh: return .fresh(found.model)
        case .staleWhileRefreshing: return .staleWhileRefreshing(found.model)
        case .fetch, .fetchKeepingForError: return .fetch
        }
    }

    /// The stale model to return for a failed fetch, within ``Freshness/staleIfError``; never one
    /// the store does not vouch for (``ReadRule/vouches(for:)``).
    func staleIfError(_ found: Stored?, now: Int64) -> Model? {
        guard let found, found.vouched,
            case .fetchKeepingForError = freshness.serving(expiry: found.expiresAt, now: now)
        else {
            return nil
        }
        return found.model
    }
}

extension Freshness {
    /// What read-through does with a record whose expiry (``ReadRule/expiry(of:)``) is `expiry`.
    enum Verdict: Equatable {
        /// Serve it: it has not expired.
        case fresh
        /// Serve it and refresh it in the background: within `staleWhileRevalidate` of its expiry.
        case staleWhileRefreshing
        /// Fetch, and serve it if the fetch fails: within `staleIfError` of its expiry.
        case fetchKeepingForError
        /// Fetch.
        case fetch
    }

    /// The stale windows (see the top of ReadRule.swift), at `now`.
    func serving(expiry: Int64?, now: Int64) -> Verdict {
        guard let expiry, expiry <= now else { return .fresh }
        if let window = staleWhileRevalidate, now < expiry.addingSaturating(window.storedMilliseconds) {
            return .staleWhileRefreshing
        }
        if let window = staleIfError, now < expiry.addingSaturating(window.storedMilliseconds) {
            return .fetchKeepingForError
        }
        return .fetch
    }
}
