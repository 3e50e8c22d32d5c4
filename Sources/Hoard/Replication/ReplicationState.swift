#if canImport(FoundationEssentials)
internal import FoundationEssentials
#else
internal import Foundation
#endif
internal import Synchronization

/// What an outbox entry announces of a collection: a record's key, a tag, or the whole collection.
enum Announced: Hashable {
    case key([UInt8])
    case tag([UInt8])
    case all
}

/// The outbox's keys: the collection's name (its UTF-8 length as two bytes big-endian, then its
/// UTF-8), then the record's key; so the entries of one collection's keys are together. A tag's
/// entry has the length's top bit set and the tag's UTF-8 after the name; the whole collection's
/// has the next bit set and nothing after the name (docs/FORMAT.md).
enum OutboxKey {
    static let tagFlag: UInt8 = 0x80
    static let allFlag: UInt8 = 0x40

    static func make(collection: String, key: some Collection<UInt8>) -> [UInt8] {
        let name = Array(collection.utf8)
        return [UInt8(truncatingIfNeeded: name.count >> 8), UInt8(truncatingIfNeeded: name.count)] + name + key
    }

    static func make(collection: String, _ announced: Announced) -> [UInt8] {
        switch announced {
        case .key(let key): return make(collection: collection, key: key)
        case .tag(let tag):
            var bytes = make(collection: collection, key: tag)
            bytes[0] |= tagFlag
            return bytes
        case .all:
            var bytes = make(collection: collection, key: [])
            bytes[0] |= allFlag
            return bytes
        }
    }

    static func parse(_ bytes: UnsafeRawBufferPointer) -> (collection: String, announced: Announced)? {
        guard bytes.count >= 2 else { return nil }
        let flags = bytes[0] & (tagFlag | allFlag)
        let length = Int(bytes[0] & ~(tagFlag | allFlag)) << 8 | Int(bytes[1])
        guard bytes.count >= 2 + length,
            let name = String(validating: bytes[2..<(2 + length)], as: UTF8.self)
        else { return nil }
        let rest = Array(bytes[(2 + length)...])
        switch flags {
        case 0 where !rest.isEmpty: return (name, .key(rest))
        case tagFlag where !rest.isEmpty: return (name, .tag(rest))
        case allFlag where rest.isEmpty: return (name, .all)
        default: return nil
        }
    }
}

/// What a store keeps in memory for replication.
final class ReplicationState: Sendable {
    /// The store's identity, once read or made.
    let identity = Mutex<UUID?>(nil)
    /// ``Replication/staleBefore``, 0 for never; read by every get of a record, so an atomic.
    let staleBefore = Atomic<Int64>(0)
    /// Tells the bus's publisher that the outbox has entries.
    let outboxSignal = Signal()
    /// Outbox entries published and waiting for the commit that removes them: outbox key -> stamp.
    let acknowledged = Mutex<[[UInt8]: [UInt8]]>([:])
    /// The outbox entries the latest write transaction that announced anything wrote (with its
    /// LMDB ID), from the moment it wrote them: a read transaction sees them only once it
    /// commits, and a fetch that begins in between must still find them pending
    /// (``Replication/hasUnannounced(collection:key:)``). One transaction's are enough: LMDB
    /// runs one write transaction at a time, so an older one has committed (or was undone).
    let announcingNow = Mutex<(transaction: Int, entries: Set<[UInt8]>)>((0, []))
    /// Invalidations that fetches under way must not overwrite.
    let invalidations = InvalidationGuard()
    let discardedFills = Atomic<Int>(0)
    let resets = Atomic<Int>(0)
    /// The lease a bus holds the store to, if any (Lease.swift).
    let lease = LeaseState()
    /// The tier read-through shares its fills through, if any (SharedFills.swift).
    let sharedFills = SharedFillsState()

    /// Notes outbox `entries` written by write transaction `transaction` (``announcingNow``).
    func announcing(_ entries: [[UInt8]], in transaction: Int) {
        announcingNow.withLock { now in
            if now.transaction != transaction { now = (transaction, []) }
            now.entries.formUnion(entries)
        }
    }
}

/// A wake-up for one waiter: ``notify()`` before ``wait()`` makes it return at once; many
/// notifications before a wait count as one.
final class Signal: Sendable {
    private struct State {
        var pending = true
        var waiter: CheckedContinuation<Void, Never>?
    }
    private let state = Mutex(State())

    func notify() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.pending = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    func wait() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> CheckedContinuation<Void, Never>? in
                    if state.pending || Task.isCancelled {
                        state.pending = false
                        return continuation
                    }
                    // One waiter: a second replaces the first, which returns.
                    let previous = state.waiter
                    state.waiter = continuation
                    return previous
                }
                resumeNow?.resume()
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }
}
