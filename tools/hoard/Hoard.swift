import ArgumentParser
import LMDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@main
struct HoardCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hoard",
        abstract: "Inspect and exercise Hoard stores (LMDB files holding cached models).",
        version: "0.1.0",
        subcommands: [Demo.self]
    )
}

/// Where the demo keeps its store unless told otherwise: the user's cache directory.
func defaultStorePath() -> String {
    let environment = ProcessInfoLite.self
    if let cache = environment.variable("XDG_CACHE_HOME"), !cache.isEmpty { return cache + "/hoard/demo.hoard" }
    if let home = environment.variable("HOME"), !home.isEmpty { return home + "/.cache/hoard/demo.hoard" }
    return "/tmp/hoard-demo.hoard"
}

enum ProcessInfoLite {
    static func variable(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }
}
