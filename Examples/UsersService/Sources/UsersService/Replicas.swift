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

    /// The bus, when a port was given.
    func bus(store: Store) -> PostgresBus? {
        guard let postgresPort else { return nil }
        var configuration = PostgresBus.Configuration(
            postgres: PostgresClient.Configuration(
                host: postgresHost, port: postgresPort, username: postgresUser, password: postgresPassword,
                database: postgresDatabase, tls: .disable))
        if let replicaName { configuration.replicaName = replicaName }
        return PostgresBus(store: store, configuration: configuration, logger: Logger(label: "hoard.postgres"))
    }
}

/// `GET /replication`: this replica's bus and outbox, for scripts and people.
func addReplicationRoute(to router: Router<BasicRequestContext>, bus: PostgresBus) {
    router.get("replication") { _, _ -> Response in
        let status = bus.status
        let replication = bus.store.replication
        let fields: [String] = [
            #""connected":\#(status.connected)"#, #""applied":\#(status.applied)"#,
            #""pending":\#(try replication.pendingCount())"#, #""reconnects":\#(status.reconnects)"#,
            #""resets":\#(replication.resets)"#, #""discardedFills":\#(replication.discardedFills)"#,
        ]
        return Response(
            status: .ok, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: "{" + fields.joined(separator: ",") + "}")))
    }
}
#endif
