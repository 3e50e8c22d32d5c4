#if canImport(FoundationEssentials)
internal import FoundationEssentials
#else
internal import Foundation
#endif

// A read-through fetch through the store's shared fill tier (Replication/SharedFills.swift): the
// models other replicas fetched come as records, which this replica decodes as it decodes its own.

extension HoardCollection where Model: Sendable, Model.ID: Sendable {
    /// What `fetch` answers for `ids`, through the shared fill tier when the store shares this
    /// collection's fills: the tier supplies what another replica fetched, and calls `fetch` for
    /// the rest. A key invalidated here and not yet announced bypasses the tier (it may hold what
    /// the invalidation made obsolete), as does a shared record that does not decode here.
    func fetchSharing(_ ids: [Model.ID], _ fetch: @escaping Fetcher) async throws -> [Answer] {
        guard let tier = store.replicationState.sharedFills.tier(for: name) else { return try await fetch(ids) }
        let idOfKey = Dictionary(ids.map { ($0.keyBytes, $0) }, uniquingKeysWith: { first, _ in first })
        let replication = store.replication
        let unannounced = idOfKey.keys.contains { (try? replication.hasUnannounced(collection: name, key: $0)) ?? true }
        if unannounced { return try await fetch(ids) }
        return try await store.withSpan("shared_fill", collection: name) { span in
            let result = try await tier.fill(collection: name, keys: Array(idOfKey.keys)) { [self] keys in
                let answers = try await fetch(keys.compactMap { idOfKey[$0] })
                var records: [[UInt8]: SharedRecord] = [:]
                for answer in answers {
                    if let (key, record) = sharedRecord(of: answer) { records[key] = record }
                }
                return (answers, records)
            }
            var answers = result.fetched.flatMap { $0 }
            var unreadable: [Model.ID] = []
            let now = store.options.now()
            for (key, record) in result.shared {
                if let answer = answer(from: record, key: key, now: now) {
                    answers.append(answer)
                } else if let id = idOfKey[key] {
                    unreadable.append(id)
                }
            }
            span?.attributes[SpanKey.sharedRecords] = result.shared.count - unreadable.count
            span?.attributes[SpanKey.outcome] =
                result.waited ? "waited" : result.fetched.isEmpty ? "shared" : "fetched"
            if !unreadable.isEmpty { answers += try await fetch(unreadable) }
            return answers
        }
    }

    /// The record a fetched model is shared as (its key and the bytes this store would hold), or
    /// `nil` for a "not modified" answer or a model that does not encode.
    func sharedRecord(of answer: Answer) -> ([UInt8], SharedRecord)? {
        guard case .model(let model, let expiry, let tags) = answer else { return nil }
        let header = header(for: expiry)
        return try? model.id.withKeyBytes { key in
            try withPayload(of: model, key: key) { payload in
                var bytes = [UInt8](repeating: 0, count: header.size + payload.count)
                bytes.withUnsafeMutableBytes { header.write(payload: payload, into: $0) }
                return (Array(key), SharedRecord(bytes: bytes, tags: tags ?? [], expiresAt: header.expiresAt))
            }
        }
    }

    /// The answer a shared record gives for `key`, or `nil` when it has expired, is damaged, does
    /// not decode here (a newer version of the app wrote it) or holds another key's model.
    func answer(from record: SharedRecord, key: [UInt8], now: Int64) -> Answer? {
        if let expiresAt = record.expiresAt, expiresAt <= now { return nil }
        let decoded = try? record.bytes.withUnsafeBytes { try decode($0, key: { key }) }
        guard let model = decoded ?? nil, model.id.keyBytes == key else { return nil }
        let expiry: Expiry = record.expiresAt.map { .at(Date(storedMilliseconds: $0)) } ?? .never
        return .model(model, expiry, tags: record.tags.isEmpty ? nil : record.tags)
    }
}
