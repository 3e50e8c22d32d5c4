// swift-tools-version:6.2
//
// An example Vapor 4 application that keeps its cache and its sessions in a Hoard store
// (HoardVapor): a slow route answered from `req.cache`, a session that counts visits, both kept
// across restarts. `HOARD_EXAMPLE_CACHE=memory` or `none` runs the same routes with Vapor's memory
// cache or without a cache, for the comparison in BENCHMARKS.md (scripts/bench.sh).
//
// A package of its own, as an application that depends on Hoard would be. See README.md.
import PackageDescription

let package = Package(
    name: "VaporCache",
    platforms: [.macOS(.v15)],
    dependencies: [
        // Hoard from this repository, with HoardVapor.
        .package(name: "Hoard", path: "../..", traits: ["Vapor"]),
        .package(url: "https://github.com/vapor/vapor", from: "4.100.0"),
    ],
    targets: [
        .executableTarget(
            name: "VaporCache",
            dependencies: [
                .product(name: "HoardVapor", package: "Hoard"),
                .product(name: "Vapor", package: "vapor"),
            ],
            swiftSettings: [
                .enableUpcomingFeature("ExistentialAny"),
                .enableUpcomingFeature("InternalImportsByDefault"),
            ])
    ],
    swiftLanguageModes: [.v6]
)
