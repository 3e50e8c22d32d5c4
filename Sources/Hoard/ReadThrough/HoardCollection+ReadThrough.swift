internal import LMDB
internal import Logging

// Read-through: a read that misses fetches from the source of truth, stores what it got and
// returns it. Concurrent misses for one key share one fetch (SingleFlight.swift); records past
// their expiry may be served under the collection's Freshness.

extension HoardCollection where Model: Sendable, Model.ID: Sendable {
    /// The model stored under `id` when it is fresh; otherwise the model `fetch` returns, stored
    /// (with the collection's time to live) and returned.
    ///
    /// - A miss while another task's fetch of `id` is under way waits for that fetch: concurrent
    ///   misses for one key make one call of a fetcher (single flight, within this process), and
    ///   its result or error reaches every waiter. An error is not remembered: the next miss
    ///   fetches again.
    /// - `fetch` returning `nil` means that `id` does not exist: `nil` is returned, a stored
    ///   record of `id` is deleted, and with ``Freshness/negativeTimeToLive`` the answer is
    ///   remembered for that long.
    /// - Past its expiry, a record is served under the collection's ``Freshness``: within
    ///   `staleWhileRevalidate` it is returned at once and refreshed in the background; within
    ///   `staleIfError` it is returned when the fetch fails.
    /// - A damaged record, or one that does not decode, is fetched again and replaced; one
    ///   written by a newer version of the app is not touched (the error is thrown).
    /// - A task cancelled while it waits stops waiting (`CancellationError`); the fetch goes on
    ///   for the other waiters and is cancelled only when no one waits for it any more.
    /// - The wait is bounded by `timeouts` (by default the collection's, ``Freshness/timeouts``):
    ///   past either timeout a read that has a stale record to serve (within `staleIfError`)
    ///   returns it, and the fetch goes on in the background and stores its result; past the hard
    ///   timeout a read without one throws ``HoardError/fetchTimedOut(collection:key:after:)``.
    /// - With ``Freshness/refreshAhead``, a hit on a record past that fraction of its time to
    ///   live also starts a background refresh of it (single flight) and returns at once.
    ///
    /// The fetched model is stored with the async put (group commit) before the waiters resume,
    /// so a read after this call returns finds it. A model that cannot be stored is returned all
    /// the same, and the error reported (``Freshness/onFetchError``).
    ///
    /// - Parameters:
    ///   - id: the model's ID.
    ///   - timeouts: how long to wait for the fetch; `nil` for the collection's.
    ///   - fetch: the source of truth; it must return the model of the ID it is given.
    /// - Throws: what `fetch` throws (unless a stale record is served in its place),
    ///   ``HoardError/fetchTimedOut(collection:key:after:)``, `CancellationError`, or what reading
    ///   the stored record throws (``HoardError/newerRecord(collection:key:version:current:)``, ``HoardError/storage(_:)``).
    @inlinable
    public func get(
        _ id: Model.ID, timeouts: FetchTimeouts? = nil,
        orFetch fetch: @escaping @Sendable (Model.ID) async throws -> Model?
    ) async throws -> Model? {
        try await readThrough(id, timeouts) { _ in Self.one(fetch) }
    }

    /// A read-through get of `id` with the fetcher `fetcher` makes of the stored model (expired or
    /// not). The hit path is a plain get (which counts the hit or miss), inlinable so that it is
    /// specialized in the caller's module: unspecialized, a `Model?` costs a metadata lookup.
    @inlinable
    func readThrough(
        _ id: Model.ID, _ timeouts: FetchTimeouts?, _ fetcher: (Model?) -> Fetcher
    ) async throws -> Model? {
        if freshness.refreshAhead == nil {
            if let model = try? get(id) { return model }
        } else if let model = try? getRefreshingAhead(id, { fetcher($0) }) {
            return model
        }
        return try await readThroughMiss(id, timeouts ?? freshness.timeouts, fetcher)
    }

    /// ``get(_:timeouts:orFetch:)`` past its hit path: the record is absent, expired, damaged or unreadable.
    /// `fetcher` makes the fetch, given the stored model (expired or not) for a revalidating one.
    @usableFromInline
    func readThroughMiss(
        _ id: Model.ID, _ timeouts: FetchTimeouts, _ fetcher: (Model?) -> Fetcher
    ) async throws -> Model? {
        let key = try keyBytes(id)
        let found = try storedForReadThrough(key)
        let now = store.options.now()
        switch serve(found, now: now) {
        case .fresh(let model):
            return model
        case .staleWhileRefreshing(let model):
            state.counters.add(.staleServed)
            startRefresh(of: [key], ids: [id], fetch: fetcher(model))
            return model
        case .fetch:
            if isRememberedAbsent(key, now: now) { return nil }
            if let stale = staleIfError(found, now: now), isBackingOff(key, now: now) {
                state.counters.add(.throttledRefreshes)
                state.counters.add(.staleServed)
                return stale
            }
            // The span is the miss as its caller waits for it; the fetch's own span (a child,
            // through the task it runs in) is made only by the caller that starts the fetch.
            return try await store.withSpan("read_through", collection: name) { span in
                let flights = state.singleFlight(of: Model.self)
                let joined = join(flights, [key])
                if joined.toFetch == nil { state.counters.add(.coalesced) }
                startFetch(joined, ids: [id], stale: found == nil ? [] : [key], fetch: fetcher(found?.model))
                do {
                    let stale = staleIfError(found, now: now)
                    let deadline = timeouts.deadline(from: .now, withStale: stale != nil)
                    switch try await wait(for: joined.tickets[0], in: flights, until: deadline) {
                    case .answered(let model):
                        span?.attributes[SpanKey.outcome] =
                            joined.toFetch == nil ? "joined" : model == nil ? "absent" : "fetched"
                        return model
                    case .timedOut(let limit):
                        span?.attributes[SpanKey.outcome] = stale == nil ? "timed out" : "stale"
                        return try timedOut(key, after: limit, serving: stale)
                    }
                } catch let error where !(error is CancellationError) {
                    guard let stale = staleIfError(found, now: now) else { throw error }
                    report(.fetchServedStale, keys: [key], error)
                    state.counters.add(.staleServed)
                    span?.attributes[SpanKey.outcome] = "stale"
                    return stale
                }
            }
        }
    }

    /// The models of `ids`, in the order asked, each read as ``get(_:timeouts:orFetch:)`` reads one, with
    /// one call of `fetch` for all the IDs that need fetching.
    ///
    /// An ID whose fetch is already under way (another call's) joins it instead of being fetched
    /// again. The models `fetch` returns are stored together, in one write; an ID it does not
    /// return is absent from the result (and its stored record, if any, deleted), not an error.
    /// Stale records within `staleWhileRevalidate` are returned and refreshed by one background
    /// call of `fetch`. `timeouts` (by default the collection's) bound the wait as they bound
    /// ``get(_:timeouts:orFetch:)``'s, each ID's from the start of the call.
    ///
    /// - Throws: the error of a fetch that failed for an ID without a stale record to serve in its
    ///   place (after every other ID's fetch has ended), ``HoardError/fetchTimedOut(collection:key:after:)``
    ///   for the first such ID the hard timeout left, `CancellationError`, or what reading the
    ///   stored records throws.
    public func get(
        _ ids: [Model.ID], timeouts: FetchTimeouts? = nil,
        orFetchMissing fetch: @escaping @Sendable ([Model.ID]) async throws -> [Model]
    ) async throws -> [Model] {
        let now = store.options.now()
        let keys = try ids.map { try keyBytes($0) }
        let found = try store.readLMDB { txn in try keys.map { try storedForReadThrough($0, in: txn) } }
        var models = [Model?](repeating: nil, count: ids.count)
        var refresh: [Int] = []
        var missing: [Int] = []
        var hits = 0
        for index in ids.indices {
            switch serve(found[index], now: now) {
            case .fresh(let model):
                models[index] = model
                hits += 1
            case .staleWhileRefreshing(let model):
                models[index] = model
                state.counters.add(.staleServed)
                refresh.append(index)
            case .fetch:
                if !isRememberedAbsent(keys[index], now: now) { missing.append(index) }
            }
        }
        // As one get each would count them: every ID not served fresh is a miss.
        state.counters.add(.hits, hits)
        state.counters.add(.misses, ids.count - hits)
        if !refresh.isEmpty {
            let staleKeys = refresh.map { keys[$0] }
            startRefresh(of: staleKeys, ids: refresh.map { ids[$0] }, fetch: Self.many(fetch))
        }
        guard !missing.isEmpty else { return models.compactMap { $0 } }

        return try await store.withSpan("read_through", collection: name) { span in
            span?.attributes[SpanKey.batchSize] = missing.count
            return try await fetchMissing(
                missing, of: ids, keys: keys, found: found, now: now, into: models, timeouts ?? freshness.timeouts,
                fetch)
        }
    }

    /// The part of ``get(_:timeouts:orFetchMissing:)`` that fetches the IDs at `missing`, joining fetches
    /// under way, and returns every model in the order asked.
    private func fetchMissing(
        _ missing: [Int], of ids: [Model.ID], keys: [[UInt8]], found: [Stored?], now: Int64, into models: [Model?],
        _ timeouts: FetchTimeouts, _ fetch: @escaping @Sendable ([Model.ID]) async throws -> [Model]
    ) async throws -> [Model] {
        let started = ContinuousClock.now
        var models = models
        let flights = state.singleFlight(of: Model.self)
        let joined = join(flights, missing.map { keys[$0] })
        state.counters.add(.coalesced, missing.count - (joined.toFetch?.keys.count ?? 0))
        let idOfKey = Dictionary(missing.map { (keys[$0], ids[$0]) }, uniquingKeysWith: { first, _ in first })
        startFetch(
            joined, ids: joined.toFetch?.keys.compactMap { idOfKey[$0] } ?? [],
            stale: Set(missing.filter { found[$0] != nil }.map { keys[$0] }), fetch: Self.many(fetch))
        // Every ticket is waited for (or given up), so that no fetch keeps a waiter that is gone.
        var failure: (any Error)?
        for (position, index) in missing.enumerated() {
            do {
                let stale = staleIfError(found[index], now: now)
                let deadline = timeouts.deadline(from: started, withStale: stale != nil)
                switch try await wait(for: joined.tickets[position], in: flights, until: deadline) {
                case .answered(let model): models[index] = model
                case .timedOut(let limit): models[index] = try timedOut(keys[index], after: limit, serving: stale)
                }
            } catch let error as CancellationError {
                for ticket in joined.tickets[(position + 1)...] { flights.leave(ticket) }
                throw error
            } catch {
                if let stale = staleIfError(found[index], now: now) {
                    report(.fetchServedStale, keys: [keys[index]], error)
                    state.counters.add(.staleServed)
                    models[index] = stale
                } else if failure == nil {
                    failure = error
                }
            }
        }
        if let failure { throw failure }
        return models.compactMap { $0 }
    }

    /// What the collection's reads, writes and read-through calls did in this process since the store was opened.
    public func statistics() -> CollectionStatistics {
        let counters = state.counters
        return CollectionStatistics(
            hits: counters[.hits], misses: counters[.misses], puts: counters[.puts], removed: counters.removals,
            evictedBytes: counters[.evictedBytes], fetches: counters[.fetches], fetchErrors: counters[.fetchErrors],
            coalesced: counters[.coalesced], staleServed: counters[.staleServed], refreshes: counters[.refreshes],
            refreshesAhead: counters[.refreshesAhead], throttledRefreshes: counters[.throttledRefreshes],
            softTimeouts: counters[.softTimeouts], hardTimeouts: counters[.hardTimeouts],
            notModified: counters[.notModified], tagInvalidations: counters[.tagInvalidations],
            absentServed: counters[.absentServed],
            fetchesInFlight: state.singleFlight(of: Model.self).groupsInFlight,
            accessStateBytes: state.policy?.byteCount ?? 0)
    }

    // MARK: - Reading what is stored

    /// A stored record as read-through sees it: its model and expiry, expired or not, and
    /// whether the store vouches for it (``ReadRule/vouches(for:)``).
    struct Stored {
        var model: Model
        var expiresAt: Int64?
        var vouched: Bool
    }

    /// The record under `key`, expired or not; `nil` when there is none, or when it is damaged or
    /// does not decode (read-through then fetches it again and replaces it).
    func storedForReadThrough(_ key: [UInt8]) throws -> Stored? {
        try store.readLMDB { txn in try storedForReadThrough(key, in: txn) }
    }

    /// The record under `key` in `txn`. A store without its lease may have missed invalidations:
    /// the read then counts as one of `key` for the race guard, so that it joins no earlier fetch
    /// (nor is such a fetch's result stored).
    func storedForReadThrough(_ key: [UInt8], in txn: borrowing LMDB.ReadTransaction) throws -> Stored? {
        let rule = readRule(in: txn)
        let vouched = rule.unvouchedExpiry == nil
        if !vouched { store.replicationState.invalidations.noteRemoved(collection: name, keys: [key]) }
        do {
            return try txn.withValue(forKey: key, in: database) { record -> Stored? in
                guard let model = try decode(record, key: { key }) else { return nil }
                return Stored(
                    model: model, expiresAt: rule.expiry(of: record), vouched: rule.vouches(for: record))
            } ?? nil
        } catch let error as HoardError where error.kind == .corruptRecord || error.kind == .decoding {
            store.logger.warning(
                "read-through replaces a record it cannot read",
                metadata: ["collection": "\(name)", "error": "\(error)"])
            return nil
        }
    }

    enum Serving {
        case fresh(Model)
        case staleWhileRefreshing(Model)
        case fetch
    }

    // MARK: - Fetching

    /// Starts a background refresh of the stale records of `keys` (those not being fetched
    /// already, nor backing off after a failed fetch); returns whether it started one.
    @discardableResult
    func startRefresh(of keys: [[UInt8]], ids: [Model.ID], fetch: @escaping Fetcher) -> Bool {
        let now = store.options.now()
        let due = keys.indices.filter { !isBackingOff(keys[$0], now: now) }
        state.counters.add(.throttledRefreshes, keys.count - due.count)
        guard !due.isEmpty else { return false }
        let (keys, ids) = (due.map { keys[$0] }, due.map { ids[$0] })
        let joined = join(state.singleFlight(of: Model.self), keys, waiting: false)
        guard let toFetch = joined.toFetch else { return false }
        state.counters.add(.refreshes)
        let idOfKey = Dictionary(zip(keys, ids), uniquingKeysWith: { first, _ in first })
        startFetch(joined, ids: toFetch.keys.compactMap { idOfKey[$0] }, stale: Set(keys), fetch: fetch, refresh: true)
        return true
    }

    /// Joins the flights of `keys`, except those whose fetch began before the key was invalidated:
    /// a get that starts after an invalidation never receives a value fetched before it.
    func join(_ flights: SingleFlight<Model>, _ keys: [[UInt8]], waiting: Bool = true) -> SingleFlight<Model>.Joined {
        let invalidations = store.replicationState.invalidations
        return flights.join(keys, waiting: waiting, keepsRunning: !waiting) { key, ticket in
            invalidations.forbidsJoining(collection: name, key: key, after: ticket)
        }
    }

    /// Runs the fetch of the flights `joined` started (if it started any): calls `fetch` once
    /// with their IDs, stores what it returns in one write (deleting the records of IDs it does
    /// not return among `stale`), and ends the flights with each key's model.
    func startFetch(
        _ joined: SingleFlight<Model>.Joined, ids: [Model.ID], stale: Set<[UInt8]>,
        fetch: @escaping Fetcher, refresh: Bool = false
    ) {
        guard let (group, keys) = joined.toFetch else { return }
        let flights = state.singleFlight(of: Model.self)
        // The race guard's ticket is taken before the upstream is called (InvalidationGuard.swift).
        let invalidations = store.replicationState.invalidations
        let ticket = invalidations.beginFetch()
        flights.began(group, ticket: ticket)
        // The task inherits the caller's span context: the fetch's span is a child of the miss's
        // (a refresh's, of the span of the read that served the stale record).
        let task = Task { [self] in
            defer { invalidations.endFetch(ticket) }
            state.counters.add(.fetches)
            let outcome = await store.withSpan(refresh ? "refresh" : "fetch", collection: name) { span in
                span?.attributes[SpanKey.batchSize] = ids.count
                do {
                    flights.markCalling(group)
                    let fetched = try await fetchSharing(ids, fetch)
                    flights.markAnswered(group)
                    noteFetch(of: keys, failed: false, ticket: ticket)
                    var byKey: [[UInt8]: Model] = [:]
                    for answer in fetched { byKey[answer.model.id.keyBytes] = answer.model }
                    await storeFetched(fetched, absent: keys.filter { byKey[$0] == nil }, stale: stale, ticket: ticket)
                    span?.attributes[SpanKey.outcome] =
                        fetched.isEmpty
                        ? "absent" : fetched.allSatisfy(\.isNotModified) ? "not modified" : "stored"
                    return Result<[[UInt8]: Model], any Error>.success(byKey)
                } catch {
                    state.counters.add(.fetchErrors)
                    noteFetch(of: keys, failed: true, ticket: ticket)
                    if refresh { report(.refresh, keys: keys, error) }
                    span?.recordFailure(error)
                    return .failure(error)
                }
            }
            flights.finish(group, keys: keys) { key in outcome.map { $0[key] } }
        }
        flights.attach(task, to: group)
    }

    /// Stores fetched models in one write, with the deletion of the records of `absent` IDs that
    /// were stored (`stale`); remembers the absent ones when the freshness says to. A model whose
    /// key was invalidated after the fetch took `ticket` is not stored: it may predate the change.
    func storeFetched(_ answers: [Answer], absent: [[UInt8]], stale: Set<[UInt8]>, ticket: UInt64) async {
        let models = answers.map(\.model)
        let gone = absent.filter { stale.contains($0) }
        if !answers.isEmpty || !gone.isEmpty {
            do {
                let replication = store.replicationState
                let metrics = store.metrics
                try await store.submit(nested: false) { txn in
                    try self.migratePending(in: txn)
                    // Checked inside the write: LMDB serializes it with the invalidations' writes.
                    let current = answers.filter {
                        !replication.invalidations.wasRemoved(
                            collection: self.name, key: $0.model.id.keyBytes, tags: $0.tags, after: ticket)
                    }
                    let discarded = answers.count - current.count
                    try self.store(current, in: txn)
                    _ = try self.remove(gone, .deleted, in: txn)
                    if discarded > 0 {
                        txn.onCommit {
                            replication.discardedFills.add(discarded, ordering: .relaxed)
                            metrics.discardedFills.increment(by: discarded)
                        }
                    }
                }
            } catch {
                report(.store, keys: models.map { $0.id.keyBytes }, error)
            }
        }
        let now = store.options.now()
        state.absent.withLock { remembered in
            for model in models { remembered[model.id.keyBytes] = nil }
            guard let window = freshness.negativeTimeToLive else { return }
            for key in absent {
                if remembered.count >= CollectionState.absentLimit {
                    remembered = remembered.filter { $0.value > now }
                    if remembered.count >= CollectionState.absentLimit {
                        remembered = Dictionary(
                            uniqueKeysWithValues: remembered.sorted { $0.value > $1.value }
                                .prefix(CollectionState.absentLimit / 2).map { ($0.key, $0.value) })
                    }
                }
                remembered[key] = now.addingSaturating(window.storedMilliseconds)
            }
        }
    }

    /// Whether `key`'s last fetch failed within ``Freshness/retryFailedFetchAfter``.
    func isBackingOff(_ key: [UInt8], now: Int64) -> Bool {
        state.failing.withLock { failing in
            guard let until = failing[key] else { return false }
            if until > now { return true }
            failing[key] = nil
            return false
        }
    }

    /// Remembers that the fetch of `keys` (which took `ticket`) failed, until the retry period is
    /// over, or forgets it. A key invalidated while the fetch ran is not remembered: the failure
    /// says nothing of the value that replaced the one invalidated.
    func noteFetch(of keys: [[UInt8]], failed: Bool, ticket: UInt64) {
        let until = store.options.now().addingSaturating(freshness.retryFailedFetchAfter.storedMilliseconds)
        let invalidations = store.replicationState.invalidations
        let keys = failed ? keys.filter { !invalidations.wasRemoved(collection: name, key: $0, after: ticket) } : keys
        state.failing.withLock { failing in
            guard failed else {
                if !failing.isEmpty { for key in keys { failing[key] = nil } }
                return
            }
            if failing.count + keys.count > CollectionState.absentLimit {
                let now = store.options.now()
                failing = failing.filter { $0.value > now }
            }
            for key in keys.prefix(CollectionState.absentLimit - min(failing.count, CollectionState.absentLimit)) {
                failing[key] = until
            }
        }
    }

    /// Whether a fetch said recently that `key` does not exist (``Freshness/negativeTimeToLive``).
    func isRememberedAbsent(_ key: [UInt8], now: Int64) -> Bool {
        guard freshness.negativeTimeToLive != nil else { return false }
        let remembered = state.absent.withLock { absent -> Bool in
            guard let until = absent[key] else { return false }
            if until > now { return true }
            absent[key] = nil
            return false
        }
        if remembered { state.counters.add(.absentServed) }
        return remembered
    }

    /// Reports an error that is not thrown: to the freshness's handler and the store's logger.
    func report(_ stage: FetchFailure.Stage, keys: [[UInt8]], _ error: any Error) {
        let failure = FetchFailure(collection: name, keys: keys.map(storedKey), stage: stage, error: error)
        store.logger.warning("\(failure)", metadata: ["collection": "\(name)"])
        freshness.onFetchError?(failure)
    }
}
