internal import Dispatch
internal import Synchronization

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
        if let writersKeys {
            writersKeys.copyBitmap(to: writersKeysBitmap)
        } else {
            writersKeysBitmap.update(repeating: ~0, count: ObservedKeys.bitmapWords)
        }
        writersWantEverything = writersKeys == nil
        writersKeysVersion = version
    }

    /// Hands `batch` to every subscriber, under the lock (a copy of the subscribers would count a
    /// reference to each; ``ChangeSubscriber/deliverLater(_:)`` never blocks). Consumers found
    /// parked are resumed after it: one on this thread, more by one job on the global queue, so
    /// that the writer pays one wake-up however many consumers.
    func publish(_ batch: RawChanges) {
        var first: ChangeSubscriber.Wake?
        // Allocated only for a second consumer found parked.
        var others: [ChangeSubscriber.Wake] = []
        observers.withLock { observers in
            for index in observers.subscribers.indices {
                // Unretained: the array holds the subscriber while the lock is held, and a count
                // of a reference to it is a cache line its consumer's thread keeps reading.
                let subscriber = Unmanaged.passUnretained(observers.subscribers[index])
                guard let wake = subscriber._withUnsafeGuaranteedRef({ $0.deliverLater(batch) }) else { continue }
                if first == nil { first = wake } else { others.append(wake) }
            }
        }
        guard let first else { return }
        if others.isEmpty {
            first.resume()
        } else {
            let others = others
            DispatchQueue.global().async {
                first.resume()
                for wake in others { wake.resume() }
            }
        }
    }
}
