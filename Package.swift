// swift-tools-version:6.1
//
// Hoard: an embedded key-value cache engine for Swift over the system liblmdb.
// Layers (see docs/ARCHITECTURE.md): CLMDB -> LMDB -> (VariableCoding, CBOR) -> Hoard -> tools.
// Only the LMDB target imports CLMDB.
import CompilerPluginSupport
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "Hoard",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "LMDB", targets: ["LMDB"]),
        .library(name: "CBOR", targets: ["CBOR"]),
        .library(name: "VariableCoding", targets: ["VariableCoding"]),
        // @VariablyCoded on its own, for code that uses VariableCoding without the store; an app
        // that imports Hoard gets the macro from it with the trait `Macros`.
        .library(name: "VariableCodingMacros", targets: ["VariableCodingMacros"]),
        .library(name: "Hoard", targets: ["Hoard"]),
        .library(name: "HoardTesting", targets: ["HoardTesting"]),
        .library(name: "HoardServiceLifecycle", targets: ["HoardServiceLifecycle"]),
        // Replicas that agree over PostgreSQL. Its code is built only with the trait `Postgres`
        // (`.package(url: "https://github.com/hoard-swift/hoard", branch: "main", traits: ["Postgres"])`);
        // without it the module is empty and postgres-nio is not built.
        .library(name: "HoardPostgres", targets: ["HoardPostgres"]),
        // Hummingbird's PersistDriver over a collection, and the store's maintenance as a service;
        // built with the trait `Hummingbird` (else empty, and Hummingbird is not built).
        .library(name: "HoardHummingbird", targets: ["HoardHummingbird"]),
        // Vapor's Cache and SessionDriver over collections of an application-wide store; built
        // with the trait `Vapor` (else empty, and Vapor is not built).
        .library(name: "HoardVapor", targets: ["HoardVapor"]),
        .executable(name: "hoard", targets: ["HoardCLIMain"]),
    ],
    traits: [
        .trait(
            name: "Postgres",
            description: "HoardPostgres: invalidations between replicas over PostgreSQL (builds postgres-nio)"),
        .trait(
            name: "Hummingbird",
            description: "HoardHummingbird: Hummingbird's persist driver over a collection (builds hummingbird)"),
        .trait(name: "Vapor", description: "HoardVapor: Vapor's cache and sessions in a store (builds vapor)"),
        // Off by default: an app that depends on Hoard alone builds no swift-syntax (most of a
        // clean build's time with it: the article "Models in depth") and declares its models' two
        // coding methods itself.
        .trait(
            name: "Macros",
            description:
                "@VariablyCoded through `import Hoard`: a model's coding methods and a faster scan (builds swift-syntax)"
        ),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        // The store logs through the Logger its user passes in; nothing is printed by default.
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        // Counters, timers and gauges through the application's metrics backend (Prometheus,
        // OpenTelemetry…); no-op unless it bootstraps one. Only the small CoreMetrics API is linked.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        // Spans for read-through misses, refreshes, synchronizes and group commits, to the tracer
        // the application bootstraps (no-op unless it does), as with metrics.
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.2.0"),
        // Only for HoardServiceLifecycle: the store's maintenance as a Service of a ServiceGroup.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.0.0"),
        // Only for the @VariablyCoded macro (a compiler plugin), built for Hoard's users only with
        // the trait `Macros`: nothing of it is linked into the libraries. Any release from Swift
        // 6.0's to 6.3's.
        .package(url: "https://github.com/swiftlang/swift-syntax", "600.0.0"..<"604.0.0"),
        // Only for HoardPostgres, with the trait `Postgres`: the PostgreSQL client of the bus.
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.0"),
        // Only for HoardHummingbird, with the trait `Hummingbird`; without Hummingbird's default
        // traits (swift-configuration and all of Foundation), which the driver does not need.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.0.0", traits: []),
        // Only for HoardVapor, with the trait `Vapor`.
        .package(url: "https://github.com/vapor/vapor", from: "4.100.0"),
    ],
    targets: [
        // The system liblmdb through pkg-config; nothing of LMDB is vendored.
        .systemLibrary(
            name: "CLMDB",
            path: "CLib/CLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"]), .brew(["lmdb"])]
        ),
        .target(name: "LMDB", dependencies: ["CLMDB"], swiftSettings: strict),

        // One model type, many versioned key sets; pure Swift, works with any Encoder/Decoder.
        .target(name: "VariableCoding", swiftSettings: strict),

        // @VariablyCoded: writes a model's VariablyCodable code, and its generated fast path.
        .macro(
            name: "VariableCodingMacrosPlugin",
            dependencies: [
                .product(name: "SwiftSyntaxMacros", package: "swift-syntax"),
                .product(name: "SwiftCompilerPlugin", package: "swift-syntax"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "VariableCodingMacros", dependencies: ["VariableCoding", "VariableCodingMacrosPlugin"],
            swiftSettings: strict),

        // RFC 8949 CBOR as a Codable coder; pure Swift, no LMDB.
        .target(name: "CBOR", swiftSettings: strict),

        // Record checksums with the carry-less multiply instruction (x86-64), and a prefetch for
        // the eviction policy's counts; C, because Swift has no way to ask for those
        // instructions. Records/RecordHeader.swift falls back to tables without the first.
        .target(name: "CCRC32", path: "Sources/CCRC32"),

        // The product: typed collections of VariablyCodable models in LMDB, records in CBOR.
        .target(
            name: "Hoard",
            // VariableCoding, and with the trait `Macros` its macro, are re-exported (Exports.swift):
            // `import Hoard` is all an app writes to declare models and store them.
            dependencies: [
                "LMDB", "VariableCoding", "CBOR", "CCRC32",
                .target(name: "VariableCodingMacros", condition: .when(traits: ["Macros"])),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: strict
        ),

        // For applications' own tests: a temporary store, a manual clock, contents compared by ID.
        .target(name: "HoardTesting", dependencies: ["Hoard"], swiftSettings: strict),

        // StoreMaintenance as a swift-service-lifecycle Service, apart so that Hoard alone does not
        // link the lifecycle package (apps and tools run no ServiceGroup).
        .target(
            name: "HoardServiceLifecycle",
            dependencies: ["Hoard", .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")],
            swiftSettings: strict),

        // The change bus over PostgreSQL (docs/REPLICAS.md); its sources are `#if Postgres`.
        .target(
            name: "HoardPostgres",
            dependencies: [
                "Hoard",
                .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["Postgres"])),
                .product(
                    name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: .when(traits: ["Postgres"])
                ),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: strict),

        // Hummingbird's PersistDriver over a collection; its sources are `#if Hummingbird`.
        .target(
            name: "HoardHummingbird",
            dependencies: [
                "Hoard", "HoardServiceLifecycle",
                .product(name: "Hummingbird", package: "hummingbird", condition: .when(traits: ["Hummingbird"])),
            ],
            swiftSettings: strict),

        // Vapor's Cache and SessionDriver over collections; its sources are `#if Vapor`.
        .target(
            name: "HoardVapor",
            dependencies: [
                "Hoard", .product(name: "Vapor", package: "vapor", condition: .when(traits: ["Vapor"])),
                .product(name: "CoreMetrics", package: "swift-metrics", condition: .when(traits: ["Vapor"])),
            ],
            swiftSettings: strict),

        // Helpers shared by the test targets (temporary stores, child processes).
        .target(name: "TestSupport", dependencies: ["LMDB"], swiftSettings: strict),
        // The Hoard tests' shared models and helpers (a store per test, records of older
        // versions, HoardError expectations by case); apart from TestSupport, which the LMDB and
        // CBOR tests and the probe use without the store.
        .target(
            name: "HoardTestSupport",
            dependencies: ["Hoard", "HoardTesting", "LMDB", "CBOR", "VariableCoding", "TestSupport"],
            swiftSettings: strict),

        // The `hoard` command-line tool; `hoard demo` is the README's main job. Its code is a
        // library, so that the tests import it (a test importing an executable's main module failed
        // to build on CI: the module was not there yet), and the executable only starts it.
        .target(
            name: "HoardCLI",
            dependencies: [
                "Hoard", "LMDB", "CBOR", "VariableCoding",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "tools/hoard/HoardCLI",
            swiftSettings: strict
        ),
        .executableTarget(
            name: "HoardCLIMain",
            dependencies: ["HoardCLI"],
            path: "tools/hoard/Main",
            swiftSettings: strict
        ),
        // A child process the tests drive over a pipe (second reader/writer, fd leaks, privilege drop).
        .executableTarget(
            name: "LMDBProbe",
            dependencies: ["LMDB", "Hoard", "CBOR", "VariableCoding", "TestSupport"],
            path: "tools/lmdb-probe",
            swiftSettings: strict
        ),

        // A replica in a process of its own for HoardPostgres's tests (paused, killed, or holding
        // a store's bus against another process); its code is `#if Postgres`.
        .executableTarget(
            name: "BusReplica",
            dependencies: [
                "Hoard", "HoardPostgres",
                .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["Postgres"])),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "tools/bus-replica",
            swiftSettings: strict
        ),

        // The crash-recovery harness: seeded operations, the reference model and the
        // driver that kills the workload process and checks the store; used by the tests and the soak.
        .target(
            name: "CrashHarness",
            dependencies: ["Hoard", "HoardCLI", "LMDB", "VariableCoding", "VariableCodingMacros", "TestSupport"],
            path: "tools/crash/Harness",
            swiftSettings: strict
        ),
        .executableTarget(
            name: "CrashWorkload",
            dependencies: ["CrashHarness", "Hoard", "LMDB"],
            path: "tools/crash/Workload",
            swiftSettings: strict
        ),
        .executableTarget(
            name: "CrashImages",
            dependencies: ["CrashHarness", "Hoard", "LMDB", "TestSupport"],
            path: "tools/crash/PowerLoss",
            swiftSettings: strict
        ),
        .executableTarget(
            name: "CrashSoak",
            dependencies: ["CrashHarness", "Hoard", "LMDB", "TestSupport"],
            path: "tools/crash/Soak",
            swiftSettings: strict
        ),

        .testTarget(
            name: "CBORTests",
            dependencies: ["CBOR", "TestSupport"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "VariableCodingTests",
            dependencies: ["VariableCoding", "CBOR", "TestSupport"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "HoardTests",
            dependencies: [
                "Hoard", "LMDB", "CBOR", "VariableCoding", "VariableCodingMacros", "TestSupport", "HoardTestSupport",
                "HoardTesting", "LMDBProbe", "HoardCLI", "HoardCLIMain",
                "CrashHarness", "CrashWorkload",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                "HoardServiceLifecycle",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        // The macro's refusals through the compiler and the built plugin. Not through
        // SwiftSyntaxMacrosGenericTestSupport: a test target that depends on a macro target makes
        // SwiftPM build the whole test product, Vapor and SwiftNIO included, a second time for the host.
        .testTarget(
            name: "VariableCodingMacrosTests",
            dependencies: ["VariableCodingMacros", "TestSupport"],
            swiftSettings: strict
        ),
        // The PostgresBus against a real PostgreSQL (tools/scripts/postgres.sh starts one; built with the trait).
        .testTarget(
            name: "HoardPostgresTests",
            dependencies: [
                "Hoard", "HoardPostgres", "HoardTesting", "TestSupport", "BusReplica",
                .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["Postgres"])),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "HoardHummingbirdTests",
            dependencies: [
                "Hoard", "HoardHummingbird", "HoardTesting",
                .product(name: "Hummingbird", package: "hummingbird", condition: .when(traits: ["Hummingbird"])),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "HoardVaporTests",
            dependencies: [
                "Hoard", "HoardVapor", "HoardTesting", "TestSupport", "HoardCLIMain",
                .product(name: "Vapor", package: "vapor", condition: .when(traits: ["Vapor"])),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "VaporTesting", package: "vapor", condition: .when(traits: ["Vapor"])),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "LMDBTests",
            dependencies: ["LMDB", "TestSupport", "LMDBProbe"],
            swiftSettings: strict
        ),
    ],
    swiftLanguageModes: [.v6]
)
