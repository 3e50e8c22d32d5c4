// crash-workload: the process the crash harness kills. Opens the store, then runs operations
// START, START+1, … of the seeded sequence (tools/crash/Harness/Operations.swift) until killed or
// COUNT are done, writing "ack N" on stdout right after operation N returns (in early-ack mode:
// before it runs). Each line is one write(2), so the driver knows exactly what was acknowledged.
//
//   CrashWorkload PATH --seed S --start N [--count C] [--durability durable|cache|nosync] [--mode correct|split|early-ack]
//                 [--grow-limit BYTES]
//   CrashWorkload PATH --migrate-stepwise BATCH
//   CrashWorkload PATH --concurrent WRITERS [--durability durable|cache|nosync] [--mode early-ack] [--count STEPS]
//   CrashWorkload PATH --check-image --seed S [--concurrent WRITERS] [--durability …]  < expectation
//
// --migrate-stepwise runs `migrate(batchSize: BATCH)` on collection Item, writing "batch SCANNED"
// after each committed batch and then waiting for a line on stdin, so that a test can kill it
// exactly between two batches.
//
// --check-image checks a power-loss image (tools/crash/Harness/ImageCheck.swift) and prints the verdict.
//
// --grow-limit lets the data file grow by at most BYTES (RLIMIT_FSIZE, with SIGXFSZ ignored so
// that writes fail with EFBIG instead of killing the process): a full disk, for the fault tests.
import CrashHarness
@_spi(LMDB) import Hoard
import LMDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

func emit(_ line: String, to fd: Int32 = 1) {
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
}

let arguments = CommandLine.arguments
if arguments.count >= 2, arguments.contains("--check-image") {
    // The power-loss simulator's checker (tools/crash/Harness/ImageCheck.swift): the expectation
    // on standard input, the verdict as the last line of standard output.
    var text = ""
    while let line = readLine() { text += line + "\n" }
    guard let expectation = ImageExpectation(text: text), let seed = commandLineValue("seed").flatMap(UInt64.init)
    else {
        emit("crash-workload: --check-image needs --seed and the expectation on standard input", to: 2)
        exit(2)
    }
    do {
        let verdict = try await checkImage(
            path: arguments[1], seed: seed, writers: commandLineValue("concurrent").flatMap(Int.init),
            durability: Hoard.Durability(workloadName: commandLineValue("durability")), expectation: expectation)
        emit(verdict.line)
        exit(0)
    } catch {
        emit("crash-workload: checking \(arguments[1]): \(error)", to: 2)
        exit(1)
    }
}
if arguments.count >= 2, let batch = commandLineValue("migrate-stepwise").flatMap(Int.init) {
    do {
        let store = try openWorkloadStore(arguments[1], durability: .durable)
        let progress = try store.collection(Item.self).migrate(batchSize: batch) { progress in
            emit("batch \(progress.scanned)")
            return readLine() != nil
        }
        emit("finished \(progress.scanned)")
        exit(0)
    } catch {
        emit("crash-workload: \(error)", to: 2)
        exit(1)
    }
}
if arguments.count >= 2, let writers = commandLineValue("concurrent").flatMap(Int.init) {
    // Group commit: WRITERS tasks of async writes (tools/crash/Harness/Concurrent.swift).
    do {
        try await runConcurrentWorkload(
            path: arguments[1], writers: writers,
            durability: Hoard.Durability(workloadName: commandLineValue("durability")),
            steps: commandLineValue("count").flatMap(Int.init) ?? 1_000_000,
            earlyAck: commandLineValue("mode") == "early-ack"
        )
        exit(0)
    } catch {
        emit("crash-workload: \(error)", to: 2)
        exit(1)
    }
}
guard arguments.count >= 2, let seed = commandLineValue("seed").flatMap(UInt64.init),
    let start = commandLineValue("start").flatMap(Int.init),
    let mode = WorkloadMode(rawValue: commandLineValue("mode") ?? "correct")
else {
    emit(
        "usage: CrashWorkload PATH --seed S --start N [--count C] [--durability durable|cache|nosync] [--mode correct|split|early-ack]",
        to: 2)
    exit(2)
}
let count = commandLineValue("count").flatMap(Int.init) ?? .max
let durability = Hoard.Durability(workloadName: commandLineValue("durability"))

if let limit = commandLineValue("grow-limit").flatMap(Int.init) {
    var info = stat()
    let size = stat(arguments[1] + "/data.mdb", &info) == 0 ? Int(info.st_size) : 0
    var cap = rlimit(rlim_cur: rlim_t(size + limit), rlim_max: rlim_t(size + limit))
    signal(SIGXFSZ, SIG_IGN)
    #if os(Linux)
    let resource = __rlimit_resource_t(RLIMIT_FSIZE.rawValue)
    #else
    let resource = RLIMIT_FSIZE
    #endif
    guard setrlimit(resource, &cap) == 0 else {
        emit("crash-workload: setrlimit: \(String(cString: strerror(errno)))", to: 2)
        exit(2)
    }
}

do {
    let store = try openWorkloadStore(arguments[1], durability: durability)
    var index = start
    while index - start < count {
        let operation = Operation.at(index, seed: seed)
        if mode == .earlyAck { emit("ack \(index)") }
        try execute(operation, index: index, store: store, mode: mode)
        if mode != .earlyAck { emit("ack \(index)") }
        index += 1
    }
} catch {
    emit("crash-workload: \(error)", to: 2)
    exit(1)
}
