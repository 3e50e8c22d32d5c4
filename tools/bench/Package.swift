// swift-tools-version:6.1
//
// Hoard's benchmarks, a package of their own (as swift-nio keeps its Benchmarks/) so that
// comparison-only dependencies never reach the library's users. Every figure is a ratio against
// a baseline measured in the same run; see BENCHMARKS.md at the repository root.
import PackageDescription

let package = Package(
    name: "HoardBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        // With the trait Postgres: replica-bench runs PostgresBus.
        .package(name: "Hoard", path: "../..", traits: ["Postgres"]),
        // The PostgreSQL client's configuration, for replica-bench.
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.0"),
        // The reference for durable writes (write-bench): SQLite as a Swift service would use it.
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.0.0"),
        // A metrics backend of the bench's own, for what metrics cost on the get path, and for the
        // sizes of Hoard's commits that write-bench's floor replays.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
    ],
    targets: [
        // The raw C API, for the baselines: the same system liblmdb the LMDB module wraps.
        .systemLibrary(
            name: "CLMDBRaw", path: "Sources/CLMDBRaw", pkgConfig: "lmdb", providers: [.apt(["liblmdb-dev"])]),
        .target(name: "BenchSupport", path: "Sources/BenchSupport"),
        .target(
            name: "BenchModels",
            dependencies: [
                .product(name: "VariableCoding", package: "Hoard"),
                .product(name: "VariableCodingMacros", package: "Hoard"),
            ],
            path: "Sources/BenchModels"
        ),
        .target(
            name: "GRDBModels",
            dependencies: ["BenchModels", .product(name: "GRDB", package: "GRDB.swift")],
            path: "Sources/GRDBModels"
        ),
        .executableTarget(
            name: "codec-bench",
            dependencies: [
                "BenchSupport", "BenchModels",
                .product(name: "CBOR", package: "Hoard"),
                .product(name: "VariableCoding", package: "Hoard"),
            ],
            path: "Sources/CodecBench"
        ),
        .executableTarget(
            name: "store-bench",
            dependencies: [
                "CLMDBRaw", "BenchSupport", "BenchModels",
                .product(name: "Hoard", package: "Hoard"),
                .product(name: "LMDB", package: "Hoard"),
                .product(name: "CBOR", package: "Hoard"),
                .product(name: "VariableCoding", package: "Hoard"),
            ],
            path: "Sources/StoreBench"
        ),
        .executableTarget(
            name: "sync-bench",
            dependencies: ["BenchSupport", "BenchModels", .product(name: "Hoard", package: "Hoard")],
            path: "Sources/SyncBench"
        ),
        .executableTarget(
            name: "cli-bench",
            dependencies: [
                "CLMDBRaw", "BenchSupport", "BenchModels", .product(name: "Hoard", package: "Hoard"),
                .product(name: "LMDB", package: "Hoard"),
            ],
            path: "Sources/CLIBench"
        ),
        // Counts the flushes of the process it is linked into (write-bench): fsync, fdatasync and
        // writes through O_DSYNC descriptors, with their time.
        .target(name: "SyncCounter", path: "Sources/SyncCounter"),
        .executableTarget(
            name: "write-bench",
            dependencies: [
                "BenchSupport", "BenchModels", "GRDBModels", "SyncCounter", "CLMDBRaw",
                .product(name: "Hoard", package: "Hoard"), .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            path: "Sources/WriteBench"
        ),
        .executableTarget(
            name: "peers-bench",
            dependencies: [
                "BenchSupport", "BenchModels", "GRDBModels", .product(name: "Hoard", package: "Hoard"),
                .product(name: "LMDB", package: "Hoard"), .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Sources/PeersBench"
        ),
        .executableTarget(
            name: "readthrough-bench",
            dependencies: [
                "BenchSupport", "BenchModels", .product(name: "Hoard", package: "Hoard"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            path: "Sources/ReadThroughBench"
        ),
        .executableTarget(
            name: "slow-upstream-bench",
            dependencies: ["BenchSupport", "BenchModels", .product(name: "Hoard", package: "Hoard")],
            path: "Sources/SlowUpstreamBench"
        ),
        .executableTarget(
            name: "tag-bench",
            dependencies: [
                "BenchSupport", "BenchModels", .product(name: "Hoard", package: "Hoard"),
                .product(name: "LMDB", package: "Hoard"),
            ],
            path: "Sources/TagBench"
        ),
        .executableTarget(
            name: "hitratio-bench",
            dependencies: ["BenchSupport", "BenchModels", .product(name: "Hoard", package: "Hoard")],
            path: "Sources/HitRatioBench"
        ),
        .executableTarget(
            name: "capacity-bench",
            dependencies: [
                "BenchSupport", "BenchModels", .product(name: "Hoard", package: "Hoard"),
                .product(name: "LMDB", package: "Hoard"),
            ],
            path: "Sources/CapacityBench"
        ),
        .executableTarget(
            name: "replica-bench",
            dependencies: [
                "BenchSupport", "BenchModels", .product(name: "Hoard", package: "Hoard"),
                .product(name: "HoardPostgres", package: "Hoard"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            path: "Sources/ReplicaBench"
        ),
        .executableTarget(
            name: "shared-fill-bench",
            dependencies: [
                "BenchSupport", "BenchModels", .product(name: "Hoard", package: "Hoard"),
                .product(name: "HoardPostgres", package: "Hoard"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            path: "Sources/SharedFillBench"
        ),
        .executableTarget(
            name: "observation-bench",
            dependencies: ["BenchSupport", "BenchModels", .product(name: "Hoard", package: "Hoard")],
            path: "Sources/ObservationBench"
        ),
        .executableTarget(
            name: "lmdb-bench",
            dependencies: ["CLMDBRaw", "BenchSupport", .product(name: "LMDB", package: "Hoard")],
            path: "Sources/LMDBBench"
        ),
    ],
    swiftLanguageModes: [.v6]
)
