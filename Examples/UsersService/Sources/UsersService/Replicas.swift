#if Replicas
import ArgumentParser
import Foundation
import Hoard
import HoardPostgres
import Hummingbird
import Logging
import PostgresNIO

/// Where the replicas meet: a PostgreSQL database (the service runs without one when
/// `--postgres-port` is not given).
struct ReplicaOptions: ParsableArguments {
    @Option(help: "PostgreSQL's port; with it, this service is one of several replicas.") var postgresPort: Int?
    @Option(help: "PostgreSQL's host.") var postgresHost = "127.0.0.1"
    @Option(help: "The PostgreSQL role.") var postgresUser = "hoard"
    @Option(help: "The role's password, if it needs one.") var postgresPassword: String?
    @Option(help: "The database.") var postgresDatabase = "hoard"
    @Option(help: "This replica's name in hoard_replicas (default: the host name).") var replicaName: String?
    @Option(help: "The replica's lease in milliseconds (default: PostgresBus's, 10 s).") var leaseMs: Int?
    @Option(help: "How often it renews the lease, in milliseconds (default: PostgresBus's, 2 s).") var heartbeatMs: Int?
    @Option(help: "Share the users' fetches with the other replicas, with a fill lease of this many milliseconds.")
    var sharedFillsLeaseMs: Int?

    /// The bus, when a port was given; it shares the fills of `shared` with `--shared-fills-lease-ms`.
    func bus(store: Store, sharing shared: Set<String>) -> PostgresBus? {
        guard let postgresPort else { return nil }
        var configuration = PostgresBus.Configuration(
            postgres: PostgresClient.Configuration(
                host: postgresHost, port: postgresPort, username: postgresUser, password: postgresPassword,
                database: postgresDatabase, tls: .disable))
        if let replicaName { configuration.replicaName = replicaName }
        if let leaseMs { configuration.lease = .milliseconds(leaseMs) }
        if let heartbeatMs { configuration.heartbeat = .milliseconds(heartbeatMs) }
        if let sharedFillsLeaseMs {
            configuration.sharedFills = .init(collections: shared, lease: .milliseconds(sharedFillsLeaseMs))
        }
        return PostgresBus(store: store, configuration: configuration, logger: Logger(label: "hoard.postgres"))
    }
}

/// `GET /replication`: this replica's bus and outbox, for scripts and people.
func addReplicationRoute(to router: Router<BasicRequestContext>, bus: PostgresBus) {
    router.get("replication") { _, _ -> Response in
        let status = bus.status
        let replication = bus.store.replication
        let lease: String
        switch status.lease {
        case .held(let until): lease = #""lease":"held","leaseLeftSeconds":\#((until - .now).secondsValue)"#
        case .out(let since): lease = #""lease":"out","leaseOutSeconds":\#((.now - since).secondsValue)"#
        }
        let fields: [String] = [
            #""connected":\#(status.connected)"#, #""applied":\#(status.applied)"#, lease,
            #""pending":\#(try replication.pendingCount())"#, #""reconnects":\#(status.reconnects)"#,
            #""resets":\#(replication.resets)"#, #""discardedFills":\#(replication.discardedFills)"#,
        ]
        let shared = bus.sharedFillStatistics
        let sharing: [String] = [
            #""sharedHits":\#(shared.hits)"#, #""sharedMisses":\#(shared.misses)"#, #""sharedWaits":\#(shared.waits)"#,
            #""sharedVoided":\#(shared.voided)"#, #""sharedBypassed":\#(shared.bypassed)"#,
        ]
        return Response(
            status: .ok, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: "{" + (fields + sharing).joined(separator: ",") + "}")))
    }
}

extension Duration {
    /// Seconds, to the millisecond.
    var secondsValue: Double {
        ((Double(components.seconds) + Double(components.attoseconds) / 1e18) * 1_000).rounded() / 1_000
    }
}
#endif
