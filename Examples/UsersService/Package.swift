// swift-tools-version:6.2
//
// An example service that embeds Hoard: a Hummingbird 2 application serving users from a Hoard
// collection that reads through to an upstream HTTP API (the Upstream executable plays it), with
// periodic synchronize, Prometheus metrics, graceful shutdown through swift-service-lifecycle, and
// sessions kept by Hoard's Hummingbird persist driver (HoardHummingbird).
//
// A package of its own, so that Hoard itself does not depend on a web framework. See README.md.
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "UsersService",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "users-service", targets: ["UsersService"]),
        .executable(name: "upstream", targets: ["Upstream"]),
        .executable(name: "replica-load", targets: ["ReplicaLoad"]),
    ],
    // Replicas: the service joins the others on a PostgreSQL database (HoardPostgres), which
    // brings postgres-nio and swift-crypto into the build (about 8 more minutes of a first debug
    // build on two cores): off unless asked for (`--traits Replicas`; scripts/replicas.sh does).
    traits: [.trait(name: "Replicas", description: "Invalidations between replicas over PostgreSQL")],
    dependencies: [
        // Hoard from this repository, with HoardHummingbird, and `@VariablyCoded` for the model
        // (the trait Macros: a service built in a container from clean pays swift-syntax's build
        // for it; the README's model is written without). Named, so that the products below need
        // not know the clone's directory name.
        .package(
            name: "Hoard", path: "../..",
            traits: ["Hummingbird", "Macros", .trait(name: "Postgres", condition: .when(traits: ["Replicas"]))]),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.0"),
        // Without its default traits: this example uses neither swift-configuration nor the
        // features that need all of Foundation, and builds faster without them.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.0.0", traits: []),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.21.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.0.0"),
        // Traces (the requests' spans and Hoard's) over OTLP/HTTP, when --otlp-endpoint says where;
        // without its gRPC exporter, which this example does not use.
        .package(url: "https://github.com/swift-otel/swift-otel", from: "1.0.0", traits: ["OTLPHTTP"]),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.0.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
    ],
    targets: [
        // The user model both processes share: one key set for the upstream API, one for storage.
        .target(
            name: "UsersModel", dependencies: [.product(name: "Hoard", package: "Hoard")], swiftSettings: strict),

        .executableTarget(
            name: "UsersService",
            dependencies: [
                "UsersModel",
                .product(name: "Hoard", package: "Hoard"),
                .product(name: "HoardHummingbird", package: "Hoard"),
                .product(name: "HoardPostgres", package: "Hoard", condition: .when(traits: ["Replicas"])),
                .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["Replicas"])),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "OTel", package: "swift-otel"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: strict),

        // The upstream API: users with a configurable latency and error rate.
        .executableTarget(
            name: "Upstream",
            dependencies: [
                "UsersModel",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict),

        // Reads, writes and checks across replicas (scripts/replicas.sh).
        .executableTarget(
            name: "ReplicaLoad",
            dependencies: [
                "UsersModel",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict),
    ],
    swiftLanguageModes: [.v6]
)
