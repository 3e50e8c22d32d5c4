import ArgumentParser
import AsyncHTTPClient
import Foundation
import Hoard
import HoardHummingbird
import Hummingbird
import Logging
import Metrics
import OTel
import Prometheus
import ServiceLifecycle
import UsersModel

/// A Hummingbird service that serves users from a Hoard collection reading through to the
/// upstream API (see Upstream), synchronizes the collection with the upstream's whole list on an
/// interval, keeps sessions with the Hoard persist driver, exports Prometheus metrics at
/// `/metrics`, and shuts down gracefully on SIGTERM or SIGINT.
@main
struct UsersService: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "users-service", abstract: "Serves users from a Hoard cache over an upstream API.")

    @Option(help: "The address to listen on.") var host = "127.0.0.1"
    @Option(help: "The port to listen on (0: any free port; see --port-file).") var port = 8080
    @Option(help: "Write the port listened on to this file once listening.") var portFile: String?
    @Option(help: "The upstream API's base URL.") var upstream = "http://127.0.0.1:8081"
    @Option(help: "The store's directory.") var store = "/tmp/users-service.hoard"
    @Option(help: "How long a stored user is fresh, in seconds.") var ttl = 60
    @Option(help: "How long past that a user is served while it is refreshed, in seconds.") var staleWhileRevalidate =
        30
    @Option(help: "How long past that a user is served when the upstream fails, in seconds.") var staleIfError = 3_600
    @Option(help: "Seconds between synchronizations with the upstream's whole list.") var syncInterval = 30
    @Option(help: "Seconds a graceful shutdown may take before the rest is cancelled.") var shutdownTimeout = 10
    @Option(help: "Seconds an upstream request may take.") var upstreamTimeout = 2
    @Option(help: "Connections to the upstream at most (HTTP/1.1, one request each at a time).")
    var upstreamConnections = 64
    @Option(help: "trace, debug, info, notice, warning, error or critical.") var logLevel = "info"
    @Option(
        help: """
            Send traces (each request's span, and Hoard's: read-through misses, fetches, refreshes, \
            synchronizes, group commits) to this OTLP/HTTP endpoint, e.g. http://127.0.0.1:4318; \
            none by default.
            """)
    var otlpEndpoint: String?
    #if Replicas
    @OptionGroup(title: "Replicas (invalidations over PostgreSQL)") var replicas: ReplicaOptions
    #endif

    func validate() throws {
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown --log-level \(logLevel)") }
        guard ttl > 0, syncInterval > 0, shutdownTimeout > 0, upstreamTimeout > 0, upstreamConnections > 0 else {
            throw ValidationError(
                "--ttl, --sync-interval, --shutdown-timeout, --upstream-timeout and --upstream-connections must be positive"
            )
        }
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "users-service")
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        // Before the store opens, as the metrics: a store sends its spans to the tracer
        // bootstrapped when it opened (none: it skips them).
        let traceExporter = try otlpEndpoint.map(Self.bootstrapTraces)

        let store = try Store(path: store, options: Store.Options(logger: Logger(label: "hoard")))
        // A client of its own rather than `HTTPClient.shared`: the shared one keeps at most 8
        // connections to a host, which caps the misses fetched at once (and so the throughput
        // while many keys expire together) far below what the service serves.
        var clientConfiguration = HTTPClient.Configuration()
        clientConfiguration.connectionPool = .init(
            idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: upstreamConnections)
        let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: clientConfiguration)
        let api = UpstreamClient(base: upstream, client: client, timeout: .seconds(Int64(upstreamTimeout)))
        let users = Users(
            collection: try store.collection(
                User.self, timeToLive: .seconds(ttl),
                freshness: Freshness(
                    staleWhileRevalidate: .seconds(staleWhileRevalidate), staleIfError: .seconds(staleIfError),
                    onFetchError: { failure in
                        logger.warning("upstream fetch failed", metadata: ["failure": "\(failure)"])
                    }
                )),
            api: api)
        let sessions = try HoardPersistDriver(store: store, collection: "sessions")
        var services: [any Service] = [StoreMaintenance(store: store).service, sessions]
        if let traceExporter { services.append(traceExporter) }
        #if Replicas
        let bus = replicas.bus(store: store, sharing: [users.collection.name])
        if let bus { services.append(bus) }
        #else
        let bus: Bus? = nil
        #endif

        let router = Router()
        router.add(middleware: MetricsMiddleware())
        // A span for each request, the parent of the spans Hoard makes while it waits.
        router.add(middleware: TracingMiddleware())
        router.add(middleware: CloseWhenShuttingDown())
        addRoutes(to: router, users: users, api: api, sessions: sessions, registry: registry)
        addWriteRoutes(to: router, users: users.collection, api: api, bus: bus)
        addEventRoutes(to: router, users: users.collection)

        let portFile = portFile
        let app = Application(
            router: router,
            configuration: .init(address: .hostname(host, port: port), serverName: "users-service"),
            // Shut down in reverse order: the server first (no new requests; those in flight
            // finish), then synchronize, the bus (it leaves the replicas), sessions and the
            // store's maintenance.
            services: services + [
                SynchronizeService(
                    users: users.collection, upstream: api, interval: .seconds(syncInterval), logger: logger)
            ],
            onServerRunning: { channel in
                let bound = channel.localAddress?.port ?? 0
                logger.notice("listening", metadata: ["port": "\(bound)", "store": "\(store.path)"])
                if let portFile { try? "\(bound)\n".write(toFile: portFile, atomically: true, encoding: .utf8) }
            },
            logger: logger)
        var configuration = ServiceGroupConfiguration(
            services: [.init(service: app)], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        configuration.maximumGracefulShutdownDuration = .seconds(shutdownTimeout)
        // The client goes after the group, when no request or synchronization uses it any more.
        do {
            try await ServiceGroup(configuration: configuration).run()
        } catch {
            try? await client.shutdown()
            throw error
        }
        try await client.shutdown()
        logger.notice("stopped")
    }

    /// Bootstraps swift-distributed-tracing with swift-otel's OTLP/HTTP exporter (traces only:
    /// metrics go to Prometheus, logs to standard error) and returns its exporting service.
    static func bootstrapTraces(to endpoint: String) throws -> any Service {
        var configuration = OTel.Configuration.default
        configuration.serviceName = "users-service"
        configuration.metrics.enabled = false
        configuration.logs.enabled = false
        configuration.traces.exporter = .otlp
        configuration.traces.otlpExporter.endpoint = endpoint
        configuration.traces.otlpExporter.protocol = .httpProtobuf
        return try OTel.bootstrap(configuration: configuration)
    }
}

/// The users, read through the upstream with conditional requests: a user missing is fetched, and
/// an expired one (or one refreshed in the background within the stale window) is asked for with
/// its entity tag, so that the upstream's `304` renews the stored record without rewriting it.
struct Users: Sendable {
    let collection: HoardCollection<User>
    let api: UpstreamClient

    /// User `id`: stored and fresh, or read through (single flight, stale windows: the collection's).
    func get(_ id: Int64) async throws -> User? {
        try await collection.get(id, orRevalidate: { id, stored in try await api.user(id, revalidating: stored) })
    }
}

/// A session, kept by the persist driver.
struct Session: Codable, Sendable {
    var userID: Int64
    var created: Date
}

func addRoutes(
    to router: Router<BasicRequestContext>, users: Users, api: UpstreamClient,
    sessions: HoardPersistDriver, registry: PrometheusCollectorRegistry
) {
    router.get("health") { _, _ in "ok" }
    router.get("metrics") { _, _ in
        Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
            body: .init(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer())))
    }
    router.get("users/:id") { _, context -> Response in
        let id = try context.parameters.require("id", as: Int64.self)
        let user = try await upstreamErrorsAsBadGateway { try await users.get(id) }
        guard let user else { throw HTTPError(.notFound, message: "no user \(id)") }
        return try json(user)
    }
    router.get("users") { request, _ -> Response in
        guard let list = request.uri.queryParameters.get("ids") else {
            throw HTTPError(.badRequest, message: "ask for ?ids=1,2,3")
        }
        let ids = try list.split(separator: ",").map { part in
            guard let id = Int64(part) else { throw HTTPError(.badRequest, message: "not an ID: \(part)") }
            return id
        }
        guard ids.count <= 100 else { throw HTTPError(.badRequest, message: "at most 100 IDs a request") }
        // One upstream call for all the IDs that miss.
        let found = try await upstreamErrorsAsBadGateway {
            try await users.collection.get(ids, orFetchMissing: { missing in try await api.users(missing) })
        }
        return try json(found)
    }
    router.post("sessions") { request, context -> Response in
        struct NewSession: Decodable { var userID: Int64 }
        let asked = try await request.decode(as: NewSession.self, context: context)
        guard try await upstreamErrorsAsBadGateway({ try await users.get(asked.userID) }) != nil else {
            throw HTTPError(.notFound, message: "no user \(asked.userID)")
        }
        let token = UUID().uuidString
        try await sessions.create(
            key: token, value: Session(userID: asked.userID, created: Date()), expires: .minutes(30))
        return Response(
            status: .created, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: #"{"token":"\#(token)"}"#)))
    }
    router.get("sessions/:token") { _, context -> Response in
        let token = try context.parameters.require("token")
        guard let session = try await sessions.get(key: token, as: Session.self) else {
            throw HTTPError(.notFound, message: "no session \(token)")
        }
        return Response(
            status: .ok, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: #"{"userID":\#(session.userID)}"#)))
    }
}

/// Runs `body`; an upstream failure (an error status, a timeout, a refused connection) with
/// nothing stored to serve in its place becomes 502.
func upstreamErrorsAsBadGateway<T>(_ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let error as HTTPError {
        throw error
    } catch let error as HoardError {
        throw error
    } catch {
        throw HTTPError(.badGateway, message: "upstream: \(error)")
    }
}

func json(_ value: some Encodable) throws -> Response {
    let data = try JSONEncoder().encode(value, keySet: .api)
    return Response(
        status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
}
