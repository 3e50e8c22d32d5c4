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
        /// application shuts down; the shutdown, synchronous or async, closes the store before it
        /// returns (`Store.close()`: the writes in flight commit first), so that the path can be
        /// opened again at once. A cache or a session driver used after that throws
        /// ``HoardVaporError/storeClosed(path:)``.
        ///
        /// When the open fails, the application's caches and sessions fail with its error at
        /// their first use, rather than opening a store at ``defaultPath`` (a later call of this
        /// method tries the open again).
        ///
        /// - Parameters:
        ///   - path: the store's directory, created when missing.
        ///   - options: the store's options; by default `Store.Options.cache` (one flush a
        ///     commit: an operating-system crash may lose the last commit, a process crash nothing)
        ///     with the application's logger.
        ///   - maintenance: the maintenance to run, made from the store (by default Hoard's: expired
        ///     records purged every minute, metrics, the reader table checked); `nil` runs none.
        /// - Throws: what `Store(path:options:)` throws: a `HoardError` naming the path (not a
        ///   Hoard store, written by a newer version, a storage failure…);
        ///   ``HoardVaporError/anotherStoreOpen(open:asked:)`` when the application has a store at
        ///   another path.
        @discardableResult
        public func open(
            at path: String, options: Store.Options? = nil,
            maintenance: @escaping @Sendable (Store) -> StoreMaintenance? = { StoreMaintenance(store: $0) }
        ) throws -> Store {
            let store = try box.store(
                opening: path, options: options ?? defaultOptions, explicitly: true, maintenance: maintenance)
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
        /// - Throws: what ``open(at:options:maintenance:)`` throws, or threw the last time it
        ///   was called and failed.
        public var store: Store {
            get throws {
                try box.store(opening: defaultPath, options: defaultOptions, explicitly: false) {
                    StoreMaintenance(store: $0)
                }
            }
        }

        /// A handle on `open(store)`, made from the application's store, that the application
        /// lets go of at its shutdown (the caches and session drivers hold such handles, so that
        /// the store closes then, not when the last of them is gone).
        func handle<Value: Sendable>(_ open: (Store) throws -> Value) throws -> ApplicationHandle<Value> {
            let store = try store
            let handle = ApplicationHandle(try open(store), path: store.path)
            box.register(handle)
            return handle
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
        var handles: [any ReleasableHandle] = []
        /// Why the last `open(at:)` failed, while no store is open: what the first use throws.
        var openFailure: (any Error)?
    }
    private let state = NIOLockedValueBox(State())
    let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }

    /// The store, opened at `path` if none is open. `explicitly`: asked for by `open(at:)`, which
    /// tries again after a failure; a first use after a failed `open(at:)` throws its error.
    func store(
        opening path: String, options: Store.Options, explicitly: Bool,
        maintenance: @Sendable (Store) -> StoreMaintenance?
    ) throws -> Store {
        try state.withLockedValue { state in
            if let store = state.store { return store }
            if !explicitly, let failure = state.openFailure { throw failure }
            let store: Store
            do {
                store = try Store(path: path, options: options)
            } catch {
                if explicitly { state.openFailure = error }
                throw error
            }
            state.openFailure = nil
            state.store = store
            if let steps = maintenance(store) {
                state.maintenance = Task { await steps.run() }
            }
            logger.debug("hoard: store open", metadata: ["path": "\(path)"])
            return store
        }
    }

    func register(_ handle: some ReleasableHandle) {
        state.withLockedValue { $0.handles.append(handle) }
    }

    /// Stops the maintenance (after the purge in progress), lets go of every handle on the store
    /// and closes it.
    func shutDown() async {
        let task = state.withLockedValue { state -> Task<Void, Never>? in
            defer { state.maintenance = nil }
            return state.maintenance
        }
        task?.cancel()
        await task?.value
        release()
    }

    /// The synchronous shutdown's part: the maintenance is told to stop, not waited for (a step
    /// it had begun ends with the store closed under it), and the store is closed.
    func shutDownWithoutWaiting() {
        let task = state.withLockedValue { $0.maintenance }
        task?.cancel()
        release()
    }

    private func release() {
        let (handles, store) = state.withLockedValue { state -> ([any ReleasableHandle], Store?) in
            defer {
                state.handles = []
                state.store = nil
                state.maintenance = nil
            }
            return (state.handles, state.store)
        }
        for handle in handles { handle.release() }
        // Closed, not only let go of: a task that still holds the store (a maintenance step the
        // synchronous shutdown did not wait for) would otherwise keep the path open.
        store?.close()
    }
}

protocol ReleasableHandle: Sendable {
    func release()
}

/// Something made from the application's store (a collection), until the application shuts down.
final class ApplicationHandle<Value: Sendable>: ReleasableHandle {
    private let value: NIOLockedValueBox<Value?>
    /// The store's path, for the error after the shutdown.
    let path: String

    init(_ value: Value, path: String) {
        self.value = NIOLockedValueBox(value)
        self.path = path
    }

    /// The value.
    ///
    /// - Throws: ``HoardVaporError/storeClosed(path:)`` after the application shut down.
    func get() throws -> Value {
        guard let value = value.withLockedValue({ $0 }) else { throw HoardVaporError.storeClosed(path: path) }
        return value
    }

    func release() {
        value.withLockedValue { $0 = nil }
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
    /// A cache or a session driver was used after the application shut down and closed its store.
    case storeClosed(path: String)

    /// What happened and where.
    public var description: String {
        switch self {
        case .valueMismatch(let collection, let key, let type, let reason):
            "the value under '\(key)' in collection '\(collection)' is not a \(type): \(reason)"
        case .anotherStoreOpen(let open, let asked):
            "the application's Hoard store is the one at \(open); it has one store, so \(asked) was not opened"
        case .storeClosed(let path):
            "the Hoard store at \(path) was closed when the application shut down"
        }
    }
}
#endif
