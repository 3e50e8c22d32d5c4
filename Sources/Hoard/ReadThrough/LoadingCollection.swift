/// A collection that knows where its models come from: ``get(_:timeouts:)->Model?`` reads through its loader, and
/// a background refresh (``Freshness/staleWhileRevalidate``) calls it too, so a read need not
/// carry a fetcher. Opened with ``Store/collection(_:named:timeToLive:capacity:freshness:migration:loader:)``.
///
/// ```swift
/// let users = try store.collection(User.self, timeToLive: .minutes(5)) { id in
///     try await upstream.user(id)
/// }
/// let user = try await users.get(42)   // stored and fresh, or fetched, stored and returned
/// ```
///
/// Everything else (puts, scans, synchronize) is the plain collection's: ``collection``.
public struct LoadingCollection<Model: VariablyCodable & Identifiable & Sendable>: Sendable
where Model.ID: HoardKey {
    /// The collection itself, for everything but reading through.
    public let collection: HoardCollection<Model>
    /// Fetches one model from the source of truth; `nil` when it does not exist.
    public let loader: @Sendable (Model.ID) async throws -> Model?

    /// A loading view of `collection`.
    public init(_ collection: HoardCollection<Model>, loader: @escaping @Sendable (Model.ID) async throws -> Model?) {
        self.collection = collection
        self.loader = loader
    }

    /// The model of `id`, read through the loader as ``HoardCollection/get(_:timeouts:orFetch:)`` reads.
    ///
    /// - Parameters:
    ///   - id: the model's ID.
    ///   - timeouts: how long to wait for the loader; `nil` for the collection's.
    /// - Throws: as ``HoardCollection/get(_:timeouts:orFetch:)`` does, with the loader's errors.
    public func get(_ id: Model.ID, timeouts: FetchTimeouts? = nil) async throws -> Model? {
        try await collection.get(id, timeouts: timeouts, orFetch: loader)
    }

    /// The model of `id`, read through `fetch` instead of the loader for this call.
    ///
    /// - Parameters:
    ///   - id: the model's ID.
    ///   - timeouts: how long to wait for `fetch`; `nil` for the collection's.
    ///   - fetch: the source of truth for this call.
    /// - Throws: as ``HoardCollection/get(_:timeouts:orFetch:)`` does.
    public func get(
        _ id: Model.ID, timeouts: FetchTimeouts? = nil,
        orFetch fetch: @escaping @Sendable (Model.ID) async throws -> Model?
    ) async throws -> Model? {
        try await collection.get(id, timeouts: timeouts, orFetch: fetch)
    }

    /// The models of `ids`, in the order asked, as ``HoardCollection/get(_:timeouts:orFetchMissing:)``
    /// reads them; the IDs to fetch are loaded concurrently, one loader call each, as one fetch
    /// that fails when any of its calls fails. Absent IDs are left out.
    ///
    /// - Parameters:
    ///   - ids: the models' IDs.
    ///   - timeouts: how long to wait for the loader; `nil` for the collection's.
    /// - Throws: as ``HoardCollection/get(_:timeouts:orFetchMissing:)`` does.
    public func get(_ ids: [Model.ID], timeouts: FetchTimeouts? = nil) async throws -> [Model] {
        let loader = self.loader
        return try await collection.get(ids, timeouts: timeouts) { missing in
            try await withThrowingTaskGroup(of: Model?.self) { group in
                for id in missing { group.addTask { try await loader(id) } }
                var models: [Model] = []
                for try await model in group { if let model { models.append(model) } }
                return models
            }
        }
    }

    /// What the collection's read-through calls did in this process (``HoardCollection/statistics()``).
    public func statistics() -> CollectionStatistics { collection.statistics() }
}

extension Store {
    /// Opens the collection of `Model` as ``collection(_:named:timeToLive:capacity:freshness:migration:)``
    /// does, with a loader that reads through: ``LoadingCollection/get(_:timeouts:)->Model?``.
    ///
    /// - Parameters:
    ///   - type: the model type.
    ///   - name: the collection's name in the store; the type's name when `nil`.
    ///   - timeToLive: how long records live when a put does not say; `nil` for forever.
    ///   - capacity: the most records and/or bytes the collection keeps; `nil` keeps what the store records.
    ///   - freshness: how records past their expiry are served.
    ///   - migration: whether records read in an older version are rewritten lazily.
    ///   - loader: fetches one model from the source of truth; `nil` when it does not exist.
    /// - Throws: as ``collection(_:named:timeToLive:capacity:freshness:migration:)`` does.
    public func collection<Model: Sendable>(
        _ type: Model.Type, named name: String? = nil, timeToLive: Duration? = nil, capacity: Capacity? = nil,
        freshness: Freshness = Freshness(), migration: MigrationPolicy = .never,
        loader: @escaping @Sendable (Model.ID) async throws -> Model?
    ) throws -> LoadingCollection<Model> {
        LoadingCollection(
            try collection(
                type, named: name, timeToLive: timeToLive, capacity: capacity, freshness: freshness,
                migration: migration),
            loader: loader)
    }
}
