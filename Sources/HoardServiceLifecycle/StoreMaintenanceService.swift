public import Hoard
public import ServiceLifecycle

// Hoard's link to swift-service-lifecycle, in a module of its own so that an app that runs no
// ServiceGroup (an iOS app, a command-line tool) does not link the lifecycle package.

extension StoreMaintenance {
    /// This maintenance as a swift-service-lifecycle `Service`, to run in a `ServiceGroup` beside
    /// the application's server.
    public var service: StoreMaintenanceService { StoreMaintenanceService(self) }
}

/// A ``Hoard/StoreMaintenance`` run as a swift-service-lifecycle `Service`.
///
/// ```swift
/// let group = ServiceGroup(
///     services: [StoreMaintenance(store: store).service, app],
///     gracefulShutdownSignals: [.sigterm, .sigint],
///     logger: logger)
/// try await group.run()
/// ```
///
/// It runs the maintenance's steps on their intervals until the service group shuts down.
/// On a graceful shutdown (or cancellation) it stops after the write in progress, so a purge
/// batch either commits or is not begun, and returns without an error. The store itself stays
/// open: the application closes it (or lets it go) after the group has returned.
public struct StoreMaintenanceService: Service, CustomStringConvertible {
    /// The maintenance this service runs.
    public let maintenance: StoreMaintenance

    /// A service that runs `maintenance`.
    public init(_ maintenance: StoreMaintenance) {
        self.maintenance = maintenance
    }

    /// Runs the maintenance until a graceful shutdown or cancellation, then returns.
    ///
    /// - Throws: nothing in practice; a failing step is logged and tried again at its next interval.
    public func run() async throws {
        let maintenance = maintenance
        await cancelWhenGracefulShutdown { await maintenance.run() }
    }

    /// A short description for the service group's logs.
    public var description: String { "StoreMaintenance(\(maintenance.store.path))" }
}
