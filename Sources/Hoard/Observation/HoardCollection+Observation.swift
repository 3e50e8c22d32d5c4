internal import LMDB
internal import Synchronization
#if canImport(FoundationEssentials)
internal import FoundationEssentials
#else
internal import Foundation
#endif

extension HoardCollection {
    /// The collection's changes from now on, one batch per commit that changed it (merged when
    /// the consumer lags), from this process and others (``Store/Options/otherProcesses``).
    ///
    /// ```swift
    /// for await batch in users.changes() {
    ///     for (id, kind) in batch.records { print(id, kind) }
    /// }
    /// ```
    ///
    /// The subscription starts with this call: every commit that returns after it is delivered,
    /// and only commits (nothing undone). A batch is queued before the write that made it returns.
    /// Ending the loop, cancelling its task or dropping the sequence ends the subscription. A lazy
    /// migration's rewrite of a record is not a change.
    ///
    /// - Parameter limit: the most record changes kept for a consumer that lags; past it, its
    ///   next batch is ``ChangeBatch/Content/unknown``.
    public func changes(limit: Int = 10_000) -> ChangeSequence<Model.ID> {
        let subscription = Subscription(
            ChangeSubscriber(interest: .all(limit: max(limit, 1))), state: state, store: store)
        return ChangeSequence(subscription: subscription)
    }

    /// The record under `id` as it is now (`nil` when absent or expired), then each time it
    /// changes: a new value, a removal, or its expiry (which makes no commit: the store wakes at
    /// the expiry time of its clock). A consumer that lags gets the latest value only; a record
    /// rewritten with the same value (a lazy migration, a put of an equal model) is not yielded
    /// again.
    ///
    /// The first value is read after the subscription begins, and commits it already includes
    /// are not reported again, so no change is missed and the first value comes once. Reading a
    /// damaged or undecodable record throws, and ends the sequence.
    ///
    /// - Throws: ``HoardError/invalidID(collection:reason:)`` when the ID is too long for a key.
    public func observe(_ id: Model.ID) throws -> RecordObservation<Model> {
        let key = try keyBytes(id)
        let subscription = Subscription(ChangeSubscriber(interest: .key(key)), state: state, store: store)
        return RecordObservation(collection: self, key: key, subscription: subscription)
    }

    /// The record under `key` in a read transaction: its model when live, the bytes that stand
    /// for its value (the payload in the current version, so that a migration's rewrite compares
    /// equal), when it expires, and the transaction's id.
    func observedState(_ key: [UInt8]) throws -> ObservedState<Model> {
        let now = store.options.now()
        return try store.readLMDB { txn in
            var state = ObservedState<Model>(transaction: txn.id)
            guard let record = try txn.withValue(forKey: key, in: database, { $0 }) else { return state }
            let expiry = readRule(in: txn, lease: false).expiry(of: record)
            guard let model = try decode(record, key: { key }, expired: expiry.map { $0 <= now } ?? false) else {
                return state
            }
            let (header, payload) = try RecordHeader.parse(record)
            state.model = model
            state.expiresAt = expiry
            if header.version == currentVersion && header.isCurrentFormat {
                state.value = Array(payload)
            } else {
                state.value = try withPayload(of: model, key: UnsafeRawBufferPointer(start: nil, count: 0)) {
                    Array($0)
                }
            }
            return state
        }
    }
}

/// What an observer read of a record.
struct ObservedState<Model> {
    var transaction: Int
    var model: Model?
    /// The value's bytes in the current version; `nil` when absent or expired.
    var value: [UInt8]?
    var expiresAt: Int64?
}

/// A subscriber registered with its collection while alive: the sequence and its iterators
/// share it, and when the last of them goes, so does the subscription.
final class Subscription: Sendable {
    let subscriber: ChangeSubscriber
    let state: CollectionState
    let store: Store
    /// For an observed record that expires: the task that wakes the subscriber then.
    let expiryWake = Mutex<Task<Void, Never>?>(nil)

    init(_ subscriber: ChangeSubscriber, state: CollectionState, store: Store) {
        self.subscriber = subscriber
        self.state = state
        self.store = store
        store.observation.subscribe(subscriber, to: state, store: store)
    }

    deinit {
        expiryWake.withLock { $0 }?.cancel()
        store.observation.unsubscribe(subscriber, from: state, store: store)
    }

    /// Wakes the subscriber once the store's clock reaches `expiresAt` (replacing an earlier wake).
    func wake(at expiresAt: Int64?, transaction: Int) {
        let store = self.store
        let subscriber = self.subscriber
        let task = expiresAt.map { expiresAt in
            Task {
                do {
                    if let sleepUntil = store.options.sleepUntil {
                        try await sleepUntil(Date(timeIntervalSince1970: Double(expiresAt) / 1000))
                    } else {
                        let wait = expiresAt - store.options.now()
                        if wait > 0 { try await Task.sleep(for: .milliseconds(wait)) }
                    }
                } catch {
                    return  // cancelled: a newer value replaced this one, or the observation ended
                }
                var tick = RawChanges(first: transaction, last: transaction, origin: [])
                tick.expiryTick = true
                subscriber.deliver(tick)
            }
        }
        expiryWake.withLock { wake in
            wake?.cancel()
            wake = task
        }
    }
}

/// The changes of a collection (``HoardCollection/changes(limit:)``).
public struct ChangeSequence<ID: HoardKey>: AsyncSequence, Sendable {
    /// A batch of changes.
    public typealias Element = ChangeBatch<ID>
    /// Nothing: the sequence ends when the subscription does.
    public typealias Failure = Never
    let subscription: Subscription

    /// The iterator of the subscription this sequence began (a sequence has one subscription:
    /// iterators made of it share it, each batch going to one of them).
    public func makeAsyncIterator() -> Iterator { Iterator(subscription: subscription) }

    /// Takes the batches of a subscription in turn.
    public struct Iterator: AsyncIteratorProtocol {
        /// A batch of changes.
        public typealias Element = ChangeBatch<ID>
        /// Nothing: the sequence ends when the subscription does.
        public typealias Failure = Never
        let subscription: Subscription

        /// The next batch: the one waiting, or the next one committed; `nil` once the task is
        /// cancelled (which ends the subscription).
        public mutating func next() async -> ChangeBatch<ID>? {
            while let raw = await subscription.subscriber.next() {
                if let batch = Self.batch(raw) { return batch }
            }
            return nil
        }

        /// `raw` with its keys as IDs; a key that is not an ID of this type makes it "unknown".
        static func batch(_ raw: RawChanges) -> ChangeBatch<ID>? {
            guard !raw.isEmpty else { return nil }
            let range = raw.first...raw.last
            if raw.unknown { return ChangeBatch(transactions: range, origin: raw.origin, content: .unknown) }
            var records: [ID: ChangeKind] = [:]
            var cleared = false
            records.reserveCapacity(raw.entries.count)
            for index in raw.entries.indices {
                guard let kind = raw.entries[index].kind.kind else {
                    cleared = true
                    records.removeAll()
                    continue
                }
                guard let id = raw.keys.withBytes(in: raw.keyRange(index), { ID(keyBytes: $0) }) else {
                    return ChangeBatch(transactions: range, origin: raw.origin, content: .unknown)
                }
                records[id] = kind
            }
            return ChangeBatch(
                transactions: range, origin: raw.origin, content: cleared ? .cleared(then: records) : .records(records))
        }
    }
}

/// One record's values as they change (``HoardCollection/observe(_:)``).
public struct RecordObservation<Model: VariablyCodable & Identifiable>: AsyncSequence, Sendable
where Model.ID: HoardKey {
    /// The record's model, or `nil` when it is absent or expired.
    public typealias Element = Model?
    /// What reading the record throws (``HoardError``).
    public typealias Failure = any Error
    let collection: HoardCollection<Model>
    let key: [UInt8]
    let subscription: Subscription

    /// The iterator: its first value is the record as it is when first asked for.
    public func makeAsyncIterator() -> Iterator {
        Iterator(collection: collection, key: key, subscription: subscription)
    }

    /// Reads the record when it may have changed, and yields it when it did.
    public struct Iterator: AsyncIteratorProtocol {
        /// The record's model, or `nil` when it is absent or expired.
        public typealias Element = Model?
        /// What reading the record throws (``HoardError``).
        public typealias Failure = any Error
        let collection: HoardCollection<Model>
        let key: [UInt8]
        let subscription: Subscription
        /// What was yielded last (`nil` before the first value).
        private var last: ObservedState<Model>?

        init(collection: HoardCollection<Model>, key: [UInt8], subscription: Subscription) {
            self.collection = collection
            self.key = key
            self.subscription = subscription
        }

        /// The record's value now (first), then its next different value; `nil` (the outer
        /// optional) once the task is cancelled.
        ///
        /// - Throws: ``HoardError`` when the record is damaged, newer or does not decode;
        ///   ``HoardError/storage(_:)`` when the storage fails.
        public mutating func next() async throws -> Model?? {
            guard var last = self.last else {
                // Subscribed already: read, and drop what that snapshot includes.
                let first = try collection.observedState(key)
                remember(first)
                return .some(first.model)
            }
            while let batch = await subscription.subscriber.next() {
                guard batch.expiryTick || batch.last > last.transaction else { continue }
                let now = try collection.observedState(key)
                // Bytes compared, not models (which need not be Equatable): an expiry or a
                // removal makes them `nil`.
                if now.value != last.value {
                    remember(now)
                    return .some(now.model)
                }
                // The same value, perhaps with another expiry (or read a moment before it: the
                // system clock is read coarsely): wait for that one.
                if batch.expiryTick || now.expiresAt != last.expiresAt {
                    subscription.wake(at: now.value == nil ? nil : now.expiresAt, transaction: now.transaction)
                }
                last = now
                self.last = now
            }
            return nil
        }

        private mutating func remember(_ state: ObservedState<Model>) {
            last = state
            subscription.wake(at: state.value == nil ? nil : state.expiresAt, transaction: state.transaction)
        }
    }
}

/// A key as a collection stores it, for code that has no ID type at hand (the `hoard` tool):
/// `Store.changes(ofCollection:limit:)` reports keys this way. ``StoredKey`` names one for people.
package struct RawKey: HoardKey, CustomStringConvertible {
    /// The key's bytes.
    package let bytes: [UInt8]

    package init?(keyBytes: some Swift.Collection<UInt8>) { bytes = Array(keyBytes) }
    package var keyBytes: [UInt8] { bytes }
    /// The key's bytes in hex.
    package var description: String { StoredKey(bytes, kind: .custom).description }
}

extension Store {
    /// The changes of collection `name`, with its keys as stored: ``HoardCollection/changes(limit:)``
    /// for code that knows the collection by name only.
    package func changes(ofCollection name: String, limit: Int = 10_000) -> ChangeSequence<RawKey> {
        ChangeSequence(
            subscription: Subscription(
                ChangeSubscriber(interest: .all(limit: max(limit, 1))), state: state(of: name), store: self))
    }
}
