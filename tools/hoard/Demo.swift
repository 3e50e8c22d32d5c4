import ArgumentParser
import LMDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `hoard demo`: the README's main job. Creates (or reopens) a store, writes, reads back, scans
/// and reports, so that a newcomer sees the engine work end to end.
struct Demo: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a demo store, read it back and print what happened.",
        discussion: """
            The store lives at --path, or by default in your cache directory \
            ($XDG_CACHE_HOME/hoard/demo or ~/.cache/hoard/demo). Running the demo again reopens \
            the same store and shows that what the last run committed is still there.
            """
    )

    @Option(name: .long, help: "The store directory (created with mode 0700 when missing).")
    var path: String?

    @Option(name: .long, help: "How many records to write.")
    var count: Int = 50_000

    func validate() throws {
        guard count > 0 && count <= 10_000_000 else { throw ValidationError("--count must be between 1 and 10000000") }
    }

    func run() throws {
        let path = path ?? defaultStorePath()
        do {
            try runDemo(at: path)
        } catch let error as LMDBError {
            printError("hoard demo: \(error)")
            throw ExitCode(3)
        }
    }

    private func runDemo(at path: String) throws {
        // A small first map on purpose: the writes below outgrow it and the map grows on its own.
        let env = try Environment(path: path, options: .init(mapSize: 1 << 20))
        print("store      \(path) (\(env.wasCreated ? "created" : "reopened"))")

        let runs = try env.openDatabase("runs", create: true)
        let previous = try env.read { txn in
            try txn.value(forKey: Array("count".utf8), in: runs).flatMap { Int(String(decoding: $0, as: UTF8.self)) } ?? 0
        }
        print("runs       \(previous) before this one")

        let greetings = try env.openDatabase("greetings", create: true)
        let clock = ContinuousClock()
        let written = try clock.measure {
            try env.write { txn in
                for i in 0..<count {
                    let key = Array(String(format6(i)).utf8)
                    let value = Array("hello #\(i) from run \(previous + 1)".utf8)
                    try txn.put(value, forKey: key, in: greetings)
                }
                try txn.put(Array("\(previous + 1)".utf8), forKey: Array("count".utf8), in: runs)
            }
        }
        print("write      \(count) records in one transaction: \(milliseconds(written)) ms (committed, fsynced)")

        let (sample, inRange) = try env.read { txn in
            let sample = try txn.value(forKey: Array(format6(count / 2).utf8), in: greetings).map { String(decoding: $0, as: UTF8.self) }
            var inRange = 0
            try txn.forEach(in: greetings, range: .prefix(Array("00001".utf8))) { _, _ in
                inRange += 1
                return .next
            }
            return (sample, inRange)
        }
        print("read       \(format6(count / 2)) -> \(sample ?? "(missing)")")
        print("scan       prefix 00001: \(inRange) records")

        let last = try env.read { txn in
            try txn.entries(in: greetings, reverse: true, limit: 1).first.map { String(decoding: $0.key, as: UTF8.self) }
        }
        print("last key   \(last ?? "(none)")")

        let info = try env.info()
        let stat = try env.read { txn in try txn.statistics(of: greetings) }
        print("map        \(info.mapSize / 1024) KiB (started at 1024 KiB), last transaction \(info.lastTransactionID)")
        print("greetings  \(stat.entries) records in \(stat.leafPages + stat.branchPages + stat.overflowPages) pages of \(stat.pageSize) bytes, depth \(stat.depth)")
    }
}

/// Six-digit, zero-padded: keys that sort in numeric order.
func format6(_ value: Int) -> String {
    let digits = String(value)
    return String(repeating: "0", count: max(0, 6 - digits.count)) + digits
}

func milliseconds(_ duration: Duration) -> String {
    let ms = Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
    return String(Int(ms.rounded()))
}

func printError(_ text: String) {
    let bytes = Array((text + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}
