#if Vapor
public import Hoard
public import Vapor
import Foundation
import NIOConcurrencyHelpers

extension Application {
    /// The application's Hoard store: opened once, shared by its caches and sessions, maintained
    /// while the application runs, and let go at its shutdown.
    ///
    /// ```swift
    /// try app.hoard.open(at: "Storage/hoard")
    /// app.caches.use(.hoard(capacity: .records(100_000), timeToLive: .seconds(3600)))
    /// app.sessions.use(.hoard(idleTimeout: .seconds(30 * 60)))
    /// app.middleware.use(app.sessions.middleware)
    /// ```
    public var hoard: HoardStorage { HoardStorage(application: self) }

    /// Opens and holds the application's Hoard store (see ``Vapor/Application/hoard``).
    public struct HoardStorage: Sendable {
        /// The application whose store this is.
        public let application: Application

        /// The path the store opens at when ``store`` is asked for before ``open(at:options:maintenance:)``:
        /// `hoard` in the application's working directory.
        public var defaultPath: String { application.directory.workingDirectory + "hoard" }

        /// Opens the store at `path` for this application and returns it; when it is open
        /// already, returns it as it is (one store per application, whatever calls this).
        ///
        /// The store's maintenance (purging expired records) runs from then until the
        /// application shuts down; at the shutdown it stops and the application lets go of the
        /// store, which closes once the caches and sessions made from it are gone too.
        ///
        /// - Parameters:
        ///   - path: the store's directory, created when missing.
        ///   - options: the store's options; by default `Store.Options.cache` (one flush a
        ///     commit: an operating-system crash may lose the last commit, a process crash nothing)
        ///     with the application's logger.
        ///   - maintenance: the maintenance to run, made from the store (by default Hoard's: expired
        ///     records purged every minute, metrics, the reader table checked); `nil` runs none.
        /// - Throws: what `Store(path:options:)` throws: an `LMDBError` or a
        ///   `HoardError` naming the path (not a Hoard store, written by a newer version…);
        ///   ``HoardVaporError/anotherStoreOpen(open:asked:)`` when the application has a store at
        ///   another path.
        @discardableResult
        public func open(
            at path: String, options: Store.Options? = nil,
            maintenance: @escaping @Sendable (Store) -> StoreMaintenance? = { StoreMaintenance(store: $0) }
        ) throws -> Store {
            let store = try box.store(opening: path, options: options ?? defaultOptions, maintenance: maintenance)
            guard Self.samePath(store.path, path) else {
                throw HoardVaporError.anotherStoreOpen(open: store.path, asked: path)
            }
            return store
        }

        private static func samePath(_ one: String, _ other: String) -> Bool {
            URL(fileURLWithPath: one).standardizedFileURL.path == URL(fileURLWithPath: other).standardizedFileURL.path
        }

        /// The store, opened at ``defaultPath`` with the default options if
        /// ``open(at:options:maintenance:)`` was not called first.
        ///
        /// - Throws: what ``open(at:options:maintenance:)`` throws.
        public var store: Store {
            get throws {
                try box.store(opening: defaultPath, options: defaultOptions) { StoreMaintenance(store: $0) }
            }
        }

        var defaultOptions: Store.Options {
            var options = Store.Options.cache
            options.logger = application.logger
            return options
        }

        private var box: HoardBox {
            application.locks.lock(for: HoardBoxKey.self).withLock {
                if let box = application.storage[HoardBoxKey.self] { return box }
                let box = HoardBox(logger: application.logger)
                application.storage[HoardBoxKey.self] = box
                application.lifecycle.use(HoardLifecycle(box: box))
                return box
            }
        }
    }
}

private struct HoardBoxKey: StorageKey, LockKey {
    typealias Value = HoardBox
}

/// The application's store and its maintenance task, under a lock: the first opener wins.
final class HoardBox: Sendable {
    private struct State {
        var store: Store?
        var maintenance: Task<Void, Never>?
    }
    private let state = NIOLockedValueBox(State())
    let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }

    func store(
        opening path: String, options: Store.Options, maintenance: @Sendable (Store) -> StoreMaintenance?
    ) throws -> Store {
        try state.withLockedValue { state in
            if let store = state.store { return store }
            let store = try Store(path: path, options: options)
            state.store = store
            if let steps = maintenance(store) {
                state.maintenance = Task { await steps.run() }
            }
            logger.debug("hoard: store open", metadata: ["path": "\(path)"])
            return store
        }
    }

    /// Stops the maintenance (after the purge in progress) and lets go of the store.
    func shutDown() async {
        let task = state.withLockedValue { state -> Task<Void, Never>? in
            defer { state.maintenance = nil }
            return state.maintenance
        }
        task?.cancel()
        await task?.value
        state.withLockedValue { $0.store = nil }
    }

    /// The synchronous shutdown's part: the maintenance is told to stop, not waited for.
    func shutDownWithoutWaiting() {
        let task = state.withLockedValue { state -> Task<Void, Never>? in
            defer {
                state.maintenance = nil
                state.store = nil
            }
            return state.maintenance
        }
        task?.cancel()
    }
}

/// Vapor 4 runs no swift-service-lifecycle services: the maintenance starts when the store opens
/// and stops here, at the application's shutdown.
struct HoardLifecycle: LifecycleHandler {
    let box: HoardBox

    func shutdown(_ application: Application) {
        box.shutDownWithoutWaiting()
    }

    func shutdownAsync(_ application: Application) async {
        await box.shutDown()
    }
}

/// What goes wrong in HoardVapor itself (the store's own failures are Hoard's errors).
public enum HoardVaporError: Error, CustomStringConvertible, Sendable {
    /// The value stored under `key` does not decode as the type asked for.
    case valueMismatch(collection: String, key: String, type: String, reason: String)
    /// A store at `asked` was to be opened while the application's store is the one at `open`.
    case anotherStoreOpen(open: String, asked: String)

    /// What happened and where.
    public var description: String {
        switch self {
        case .valueMismatch(let collection, let key, let type, let reason):
            "the value under '\(key)' in collection '\(collection)' is not a \(type): \(reason)"
        case .anotherStoreOpen(let open, let asked):
            "the application's Hoard store is the one at \(open); it has one store, so \(asked) was not opened"
        }
    }
}
#endif
