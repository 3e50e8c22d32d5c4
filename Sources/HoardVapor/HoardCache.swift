#if Vapor
import CoreMetrics
public import Hoard
public import Vapor
import Foundation

extension Application.Caches.Provider {
    /// A Vapor `Cache` kept in the application's Hoard store (``Vapor/Application/hoard``): it
    /// outlives restarts, every process that opens the store sees it, and with a capacity it
    /// stays bounded, evicting what is least likely to be asked for again.
    ///
    /// ```swift
    /// app.caches.use(.hoard(capacity: .records(100_000), timeToLive: .seconds(3600)))
    /// let user = try await req.cache.get("user:\(id)", as: User.self)
    /// ```
    ///
    /// - Parameters:
    ///   - collection: the collection that holds the values.
    ///   - capacity: the most records or bytes it keeps (recorded in the store); `nil` keeps what
    ///     the store records, unbounded for a new collection.
    ///   - timeToLive: how long a value set without `expiresIn` lives; `nil` for as long as it is not replaced.
    ///   - mismatch: what a value that no longer decodes as the type asked for is (after a deploy
    ///     changed the type, say: the cache survives it): a miss, and removed, by default.
    public static func hoard(
        collection: String = "vapor-cache", capacity: Capacity? = nil, timeToLive: Duration? = nil,
        mismatch: HoardCache.Mismatch = .miss
    ) -> Self {
        .init { app in
            let values = Result {
                try app.hoard.handle { store in
                    HoardCache.Values(
                        store: store,
                        collection: try store.collection(
                            CachedValue.self, named: collection, timeToLive: timeToLive, capacity: capacity),
                        mismatches: Counter(
                            label: "hoard_vapor_cache_mismatches_total", dimensions: [("collection", collection)],
                            factory: store.options.metricsFactory ?? MetricsSystem.factory),
                        logger: app.logger)
                }
            }
            if case .failure(let error) = values {
                app.logger.error("hoard: the cache's collection did not open: \(error)")
            }
            app.caches.use { app in
                HoardCache(values: values, mismatch: mismatch, eventLoop: app.eventLoopGroup.any())
            }
        }
    }
}

/// A Vapor `Cache` over a Hoard collection; ``Vapor/Application/Caches/Provider/hoard(collection:capacity:timeToLive:mismatch:)`` makes it.
///
/// Values are stored as JSON text, one record per key (`hoard get STORE vapor-cache KEY` shows
/// one). Where it differs from Vapor's memory cache:
/// - A value that does not decode as the type asked for (its type changed shape in a deploy, which
///   the cache, unlike Vapor's memory cache, survives) is a miss, as in the memory cache: `get`
///   returns `nil` and the value is removed (unless set again meanwhile), logged at `notice` and
///   counted in `hoard_vapor_cache_mismatches_total`. With ``Mismatch/error`` it is
///   ``HoardVaporError/valueMismatch(collection:key:type:reason:)`` instead, as with Vapor's Redis
///   and Fluent caches.
/// - A value expires at its expiry time exactly: one set with `expiresIn: .seconds(0)` (or less)
///   is absent at once; the memory cache still returns it until the clock has passed that time.
/// - A key longer than 511 bytes (LMDB's limit) fails with Hoard's `invalidID` error.
/// - Reads complete on the event loop of the cache (the request's, through `req.cache`) without
///   leaving it; writes are group-committed and complete on that event loop too.
public struct HoardCache: Cache, Sendable {
    /// What a stored value that does not decode as the type asked for is.
    public enum Mismatch: Sendable {
        /// A miss: `get` returns `nil`, and the value is removed.
        case miss
        /// ``HoardVaporError/valueMismatch(collection:key:type:reason:)``, and the value stays.
        case error
    }

    /// The collection and what reading it reports to.
    struct Values: Sendable {
        let store: Store
        let collection: HoardCollection<CachedValue>
        let mismatches: Counter
        let logger: Logger
    }

    let values: Result<ApplicationHandle<Values>, any Error>
    let mismatch: Mismatch
    let eventLoop: any EventLoop

    /// The value under `key` as a `T`, or `nil` when there is none, it has expired, or (unless the
    /// cache was made with ``Mismatch/error``) it does not decode as a `T`.
    public func get<T: Decodable & Sendable>(_ key: String, as type: T.Type) -> EventLoopFuture<T?> {
        eventLoop.makeCompletedFuture {
            let values = try values.get().get()
            guard let stored = try values.collection.get(key) else { return nil }
            do {
                return try JSONDecoder().decode(T.self, from: Data(stored.json.utf8))
            } catch {
                let mismatch = HoardVaporError.valueMismatch(
                    collection: values.collection.name, key: key, type: String(describing: T.self),
                    reason: "\(error)")
                if self.mismatch == .error { throw mismatch }
                values.mismatches.increment()
                values.logger.notice("hoard: a cached value no longer decodes; it is a miss, and removed: \(mismatch)")
                Self.remove(stored, from: values)
                return nil
            }
        }
    }

    /// Removes `stored` unless its key holds another value by then (set again meanwhile), as a
    /// write of the store's next group commit, not on the event loop.
    private static func remove(_ stored: CachedValue, from values: Values) {
        Task {
            do {
                try await values.store.write { txn in
                    if try values.collection.get(stored.id, in: txn) == stored {
                        _ = try values.collection.delete(stored.id, in: txn)
                    }
                }
            } catch {
                values.logger.warning("hoard: a cached value that no longer decodes was not removed: \(error)")
            }
        }
    }

    /// Stores `value` under `key` for the collection's time to live; `nil` removes the key.
    public func set<T: Encodable>(_ key: String, to value: T?) -> EventLoopFuture<Void> {
        store(key, value, expiry: .collectionDefault)
    }

    /// Stores `value` under `key` until `expirationTime` has passed (the collection's time to live
    /// when `nil`); a `nil` value removes the key.
    public func set<T: Encodable>(
        _ key: String, to value: T?, expiresIn expirationTime: CacheExpirationTime?
    ) -> EventLoopFuture<Void> {
        store(key, value, expiry: expirationTime.map { .after(.seconds($0.seconds)) } ?? .collectionDefault)
    }

    /// This cache, completing on the request's event loop.
    public func `for`(_ request: Request) -> HoardCache {
        HoardCache(values: values, mismatch: mismatch, eventLoop: request.eventLoop)
    }

    private func store<T: Encodable>(_ key: String, _ value: T?, expiry: Expiry) -> EventLoopFuture<Void> {
        let record: Result<CachedValue?, any Error> = Result {
            try value.map { CachedValue(id: key, json: String(decoding: try JSONEncoder().encode($0), as: UTF8.self)) }
        }
        let values = values
        return eventLoop.makeFutureWithTask {
            let values = try values.get().get().collection
            if let record = try record.get() {
                try await values.put(record, expiry: expiry)
            } else {
                _ = try await values.delete(key)
            }
        }
    }
}

/// One cached value: its key and its JSON text (Hoard's record of the framework adapters).
typealias CachedValue = KeyedJSON
#endif
