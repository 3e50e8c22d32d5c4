// crash-soak: the crash driver at length, with a summary line for docs/RELIABILITY.md.
//
//   tools/crash/soak.sh [KILLS] [SEED]      (builds in release mode and runs this)
import CrashHarness
@_spi(LMDB) import Hoard
import LMDB
import TestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

let kills = commandLineValue("kills").flatMap(Int.init) ?? 5_000
let seed = commandLineValue("seed").flatMap(UInt64.init) ?? UInt64(time(nil))
let modes: [Hoard.Durability] =
    commandLineValue("durability") == "nosync"
    ? [.riskStoreOnOSCrash]
    : commandLineValue("durability") == "durable" ? [.durable] : [.durable, .riskStoreOnOSCrash]
var failed = false
for (offset, durability) in modes.enumerated() {
    let directory = try makeTemporaryDirectory()
    let driver = CrashDriver(
        storePath: directory + "/store", workload: try builtExecutable("CrashWorkload"),
        hoard: try builtExecutable("hoard"),
        seed: seed &+ UInt64(offset)
    )
    driver.durability = durability
    let name = durability == .durable ? "durable" : "nosync"
    let report = try driver.run(kills: kills / modes.count) { report in
        if report.kills % 100 == 0 { print("[\(name)] \(report)") }
    }
    print("\(name): \(report)")
    for violation in report.violations { print("VIOLATION: \(violation)") }
    failed = failed || !report.violations.isEmpty
    removeTree(directory)
}
exit(failed ? 1 : 0)
