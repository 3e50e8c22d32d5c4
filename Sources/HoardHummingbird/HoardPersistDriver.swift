#if Hummingbird
public import Hoard
public import Hummingbird
import Foundation

/// Hummingbird's key-value persistence (`PersistDriver`: sessions, small state) over a Hoard
/// collection: what a request stores outlives the process, and every process that opens the
/// store sees it.
///
/// ```swift
/// let persist = try HoardPersistDriver(store: store)
/// let app = Application(router: router, services: [persist, StoreMaintenance(store: store).service])
/// try await persist.create(key: token, value: session, expires: .minutes(30))
/// ```
///
/// Values are stored as JSON text (`hoard get` shows them as they are), one record per key, in
/// the collection `persist` unless another name is given. Keys are strings of at most 511 bytes
/// (LMDB's key limit; a longer key is a `HoardError` of kind `invalidID`).
///
/// The protocol's rules, as this driver keeps them:
/// - `create` throws `PersistError.duplicate` when the key holds a value that has not expired; an
///   expired value counts as absent (as in Redis, and unlike `MemoryPersistDriver`, which keeps
///   expired values until its next tidy).
/// - `set` with `expires: nil` keeps the expiry of the value it replaces, when that value has not
///   expired; otherwise the new value never expires.
/// - `get` returns `nil` for an absent or expired key, and throws `PersistError.invalidConversion`
///   when the stored JSON does not decode as the type asked for, as Hummingbird's own drivers do
///   and its persist tests ask: a value whose type changed shape in a deploy stays an error here
///   (and is kept), where HoardVapor's cache makes it a miss. Catch `invalidConversion` to treat it
///   as one, and `remove(key:)` it.
/// - Each call is one write of the store's group commit (or one read): a `create` that checks and
///   stores does both in one transaction, so two processes racing to create a key cannot both
///   succeed.
///
/// Expired records are hidden at once and deleted by the store's maintenance
/// (`StoreMaintenance(store:).service`, a service of the application's like this driver); the
/// driver's own `run()` only waits for the shutdown.
public struct HoardPersistDriver: PersistDriver {
    let store: Store
    let values: HoardCollection<PersistedValue>

    /// A driver over the collection `name` of `store`.
    ///
    /// - Throws: what opening the collection throws (a `HoardError` when the collection holds
    ///   another model, or `HoardError.storage` when the storage fails).
    public init(store: Store, collection name: String = "persist") throws {
        self.store = store
        values = try store.collection(PersistedValue.self, named: name)
    }

    /// Stores `value` under `key`, unless a value that has not expired is there.
    ///
    /// - Throws: `PersistError.duplicate` when one is; an encoding or storage error.
    public func create<Object: Codable & Sendable>(key: String, value: Object, expires: Duration?) async throws {
        let record = PersistedValue(id: key, json: try Self.json(of: value))
        let values = values
        try await store.write { txn in
            if try values.get(key, in: txn) != nil { throw PersistError.duplicate }
            try values.put(record, expiry: expires.map { .after($0) } ?? .never, in: txn)
        }
    }

    /// Stores `value` under `key`, replacing what is there; with `expires: nil` the replaced
    /// value's expiry stays.
    ///
    /// - Throws: an encoding or storage error.
    public func set<Object: Codable & Sendable>(key: String, value: Object, expires: Duration?) async throws {
        let record = PersistedValue(id: key, json: try Self.json(of: value))
        let values = values
        try await store.write { txn in
            var expiry = Expiry.never
            if let expires {
                expiry = .after(expires)
            } else if try values.get(key, in: txn) != nil, let kept = try values.header(of: key, in: txn)?.expiresAt {
                expiry = .at(Date(timeIntervalSince1970: Double(kept) / 1000))
            }
            try values.put(record, expiry: expiry, in: txn)
        }
    }

    /// The value under `key` as an `Object`, or `nil` when there is none or it has expired.
    ///
    /// - Throws: `PersistError.invalidConversion` when the stored value is not an `Object`; a
    ///   storage error.
    public func get<Object: Codable & Sendable>(key: String, as type: Object.Type) async throws -> Object? {
        guard let stored = try values.get(key) else { return nil }
        return try Self.decode(stored.json, as: type)
    }

    /// The value under `key` with the time it has left (`nil`: it never expires).
    ///
    /// - Throws: as ``get(key:as:)`` does.
    public func getWithTTL<Object: Codable & Sendable>(
        key: String, as type: Object.Type
    ) async throws -> (object: Object, ttl: Duration?)? {
        let found = try store.read { txn -> (PersistedValue, Int64?)? in
            guard let stored = try values.get(key, in: txn) else { return nil }
            return (stored, try values.header(of: key, in: txn)?.expiresAt)
        }
        guard let (stored, expiresAt) = found else { return nil }
        let ttl = expiresAt.map { expiresAt -> Duration in
            let now = Int64(((store.options.clock?() ?? Date()).timeIntervalSince1970 * 1000).rounded(.down))
            return .milliseconds(max(0, expiresAt - now))
        }
        return (try Self.decode(stored.json, as: type), ttl)
    }

    /// Removes the value under `key`, if there is one.
    ///
    /// - Throws: a storage error.
    public func remove(key: String) async throws {
        try await values.delete(key)
    }

    static func json(of value: some Encodable) throws -> String {
        String(decoding: try JSONEncoder().encode(value), as: UTF8.self)
    }

    static func decode<Object: Decodable>(_ json: String, as type: Object.Type) throws -> Object {
        do {
            return try JSONDecoder().decode(type, from: Data(json.utf8))
        } catch {
            throw PersistError.invalidConversion
        }
    }
}

/// One persisted value: its key and its JSON text (Hoard's record of the framework adapters).
typealias PersistedValue = KeyedJSON
#endif
