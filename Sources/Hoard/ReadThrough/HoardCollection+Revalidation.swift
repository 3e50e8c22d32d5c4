internal import LMDB

// What a read-through fetch answers: every read-through path runs one `Fetcher`, whose `Answer`
// per ID is a model to store with its expiry or, from a revalidating fetch, "not modified" for
// the stored record, which is renewed without being encoded again.

extension HoardCollection where Model: Sendable, Model.ID: Sendable {
    /// ``get(_:timeouts:orFetch:)`` with a fetch that revalidates: it receives the record stored
    /// for `id` (expired or not; `nil` when there is none) and answers with a model and its own
    /// expiry (an upstream's `Cache-Control: max-age`), with ``Revalidation/notModified(expiry:)``
    /// when the stored record is still current, or with ``Revalidation/absent``.
    ///
    /// "Not modified" gives the stored record a new write time and expiry and keeps its payload:
    /// the model is not encoded again, and the read returns the stored model. The validators an
    /// upstream needs for a conditional request (an ETag, a Last-Modified time) are the model's
    /// own properties, stored with it in its key set, so the fetch finds them in the model it
    /// receives. A "not modified" answer when nothing was stored is taken as ``Revalidation/absent``.
    /// A renewed record is not a change: observers and other replicas are not told of it.
    ///
    /// - Parameters:
    ///   - id: the model's ID.
    ///   - timeouts: how long to wait for the fetch; `nil` for the collection's.
    ///   - fetch: the source of truth, given the ID and the stored model.
    /// - Throws: as ``get(_:timeouts:orFetch:)`` does.
    @inlinable
    public func get(
        _ id: Model.ID, timeouts: FetchTimeouts? = nil,
        orRevalidate fetch: @escaping @Sendable (Model.ID, Model?) async throws -> Revalidation<Model>
    ) async throws -> Model? {
        try await readThrough(id, timeouts) { revalidating(fetch, stored: $0) }
    }

    /// What a fetch made of one ID: a model to store with its expiry, or the stored model,
    /// still current, to renew with a new expiry.
    @usableFromInline
    enum Answer: Sendable {
        /// A model to store with its expiry and, unless `nil`, its tags (sorted, without repeats).
        case model(Model, Expiry, tags: [[UInt8]]?)
        case notModified(Model, Expiry)

        var model: Model {
            switch self {
            case .model(let model, _, _), .notModified(let model, _): model
            }
        }

        /// Whether the answer is "not modified".
        var isNotModified: Bool {
            if case .notModified = self { true } else { false }
        }

        /// The tags the answer gives its record.
        var tags: [[UInt8]] {
            if case .model(_, _, let tags?) = self { tags } else { [] }
        }
    }

    /// A fetch of many IDs, answering for those that exist, as every read-through path runs it.
    @usableFromInline
    typealias Fetcher = @Sendable ([Model.ID]) async throws -> [Answer]

    /// A one-ID fetcher as a fetcher of many.
    @usableFromInline
    static func one(_ fetch: @escaping @Sendable (Model.ID) async throws -> Model?) -> Fetcher {
        { ids in try await fetch(ids[0]).map { [.model($0, .collectionDefault, tags: nil)] } ?? [] }
    }

    /// A bulk fetcher's models, stored with the collection's time to live.
    static func many(_ fetch: @escaping @Sendable ([Model.ID]) async throws -> [Model]) -> Fetcher {
        { ids in try await fetch(ids).map { .model($0, .collectionDefault, tags: nil) } }
    }

    /// A revalidating fetch of one ID, given the model stored for it.
    @usableFromInline
    func revalidating(
        _ fetch: @escaping @Sendable (Model.ID, Model?) async throws -> Revalidation<Model>, stored: Model?
    ) -> Fetcher {
        let name = name
        return { ids in
            switch try await fetch(ids[0], stored) {
            case .model(let model, let expiry, let tags):
                [.model(model, expiry, tags: try tags.map { try TagIndex.normalized($0, collection: name) })]
            case .notModified(let expiry): stored.map { [.notModified($0, expiry)] } ?? []
            case .absent: []
            }
        }
    }

    /// Stores fetched answers in `txn`: the models, in one put per expiry (most share the
    /// collection's); the stored records that are still current, renewed (``renew(_:expiry:in:)``).
    func store(_ answers: [Answer], in txn: borrowing LMDB.WriteTransaction) throws {
        var byExpiry: [Expiry: [Model]] = [:]
        for case .model(let model, let expiry, let tags) in answers {
            if let tags {
                try put(model, PutRequest(expiry: expiry, tags: tags), in: txn)
            } else {
                byExpiry[expiry, default: []].append(model)
            }
        }
        for (expiry, models) in byExpiry { try put(models, PutRequest(expiry: expiry), in: txn) }
        var renewed = 0
        for case .notModified(let model, let expiry) in answers
        where try model.id.withKeyBytes({ try renew($0, expiry: expiry, in: txn) }) {
            renewed += 1
        }
        // Counted when the write commits: not for one undone, nor twice for one LMDB ran again.
        let counters = state.counters
        if renewed > 0 { txn.onCommit { counters.add(.notModified, renewed) } }
    }
}
