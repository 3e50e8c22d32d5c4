// The power-loss simulator: records one run of the crash workload from no store with
// tools/crash/recorder.c, rebuilds the disk images a power cut could leave at every call
// boundary (RecordedRun.swift), and checks each in a child process (ImageCheck.swift).
import Dispatch
public import Hoard
import LMDB
import Synchronization
import TestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a simulation found.
public struct PowerLossReport: Sendable, CustomStringConvertible {
    public var seed: UInt64
    public var durability: Hoard.Durability
    /// Calls recorded, and crash points (call boundaries) visited.
    public var calls = 0
    public var crashPoints = 0
    /// Images checked: each distinct (by the changes it is built from and by its bytes).
    public var images = 0
    /// Variants skipped because an identical image was built before.
    public var duplicates = 0
    /// Images whose store came back one transaction before the last that returned.
    public var lostLastCommit = 0
    /// Images of the all-applied variant (what a SIGKILL leaves), and how many of them the kill
    /// harness's rule judged differently.
    public var allApplied = 0
    public var killHarnessDisagreements = 0
    /// Images of a creation cut short (the first pages torn or missing) that the open made anew.
    public var recreatedCreations = 0
    /// Whether replaying the whole log gave the run's files byte for byte.
    public var replayMatches = false
    public var violationCount = 0
    /// The image (counted from 1) that showed the first violation.
    public var firstViolationImage: Int?
    /// The first few violations, each with its crash point and variant.
    public var violations: [String] = []

    public var description: String {
        let lost = images == 0 ? 0 : Double(lostLastCommit) * 100 / Double(images)
        return
            "images: \(images) (\(crashPoints) crash points of \(calls) calls, \(duplicates) duplicates skipped), violations: \(violationCount)\(firstViolationImage.map { " (the first at image \($0))" } ?? ""), last commit lost in \(lostLastCommit) (\(lost.formatted(1))%), all-applied images: \(allApplied) (kill-harness disagreements: \(killHarnessDisagreements)), unfinished creations made anew: \(recreatedCreations), replay byte for byte: \(replayMatches ? "yes" : "NO") (seed \(seed), \(durability.workloadName))"
    }
}

extension Double {
    fileprivate func formatted(_ digits: Int) -> String {
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }
        let value = (self * scale).rounded() / scale
        return "\(value)"
    }
}

/// Records a workload run and checks the images a power cut could leave.
public final class PowerLossSimulator {
    public let workload: String
    /// The recorder library (`cc -shared` of tools/crash/recorder.c).
    public let recorder: String
    public let seed: UInt64
    public var durability: Hoard.Durability = .durable
    /// The group-commit workload with this many writers; `nil`: the sequential workload.
    public var writers: Int?
    public var mode: WorkloadMode = .correct
    /// Operations of the sequential workload, or steps per writer of the group-commit one.
    public var operations = 30
    /// Random subsets (and as many torn ones) per point before a sync.
    public var subsets = 4
    /// The size of the pieces a torn write is cut into: 512 (a sector, LMDB's assumption) or less.
    public var tearSize = 512
    public var maxImages = Int.max
    public var stopAtFirstViolation = false
    /// Only the crash points of the store's creation: before its first commit returned.
    public var creationOnly = false
    /// Only the crash points where an LMDB meta page is being written (for torn meta pages).
    public var metaWritesOnly = false
    /// Also, before a sync, every pending write torn after each of its pieces (the first `k`
    /// written, the rest not): every way a write that goes on in order can stop, whatever the
    /// seed draws. Worth it where writes are few (a creation).
    public var tornPrefixes = false
    /// The crash points are visited in this many interleaved passes, so that the first images
    /// already cover the whole run.
    public var passes = 16

    public init(workload: String, recorder: String, seed: UInt64) {
        (self.workload, self.recorder, self.seed) = (workload, recorder, seed)
    }

    /// Runs the workload from no store under the recorder in `directory` (its store at
    /// `directory/root/store`, the log at `directory/log`) and reads the log.
    public func record(in directory: String) throws -> RecordedRun {
        let root = directory + "/root"
        guard mkdir(root, 0o700) == 0 else {
            throw TestSupportError("mkdir \(root): \(String(cString: strerror(errno)))")
        }
        let arguments =
            if let writers {
                [
                    root + "/store", "--concurrent", String(writers), "--count", String(operations), "--mode",
                    mode.rawValue,
                ]
            } else {
                [
                    root + "/store", "--seed", String(seed), "--start", "1", "--count", String(operations), "--mode",
                    mode.rawValue,
                ]
            }
        let result = try runProcess(
            workload, arguments + ["--durability", durability.workloadName],
            environment: ["LD_PRELOAD": recorder, "HOARD_RECORD_ROOT": root, "HOARD_RECORD_LOG": directory + "/log"])
        guard result.status == 0 else {
            throw TestSupportError("the recorded workload ended with status \(result.status): \(result.stderr)")
        }
        return RecordedRun(calls: try readRecordedCalls(directory + "/log"), root: root)
    }

    /// Records a run in a temporary directory (in memory, under /dev/shm, when it has room) and
    /// checks its images, `parallel` at a time; `progress` sees the report now and then.
    public func run(parallel: Int = 2, progress: (PowerLossReport) -> Void = { _ in }) throws -> PowerLossReport {
        let directory = try makeWorkDirectory()
        defer { removeTree(directory) }
        let run = try record(in: directory)
        var report = PowerLossReport(seed: seed, durability: durability)
        report.calls = run.calls.count
        report.replayMatches = try replayMatches(run)

        var generator = SeededGenerator(seed: seed ^ 0x0B5E_55ED)
        var identities: Set<[Int]> = []
        var fingerprints: Set<Int> = []
        var batch: [Job] = []
        var built = 0
        func done() -> Bool { built >= maxImages || (stopAtFirstViolation && report.violationCount > 0) }
        func flush() throws {
            let results = Mutex<[Int: ProcessResult]>([:])
            let (jobs, workload) = (batch, self.workload)
            let failure = Mutex<(any Error)?>(nil)
            DispatchQueue.concurrentPerform(iterations: jobs.count) { index in
                do {
                    let result = try runProcess(workload, jobs[index].arguments, input: jobs[index].input)
                    results.withLock { $0[index] = result }
                } catch {
                    failure.withLock { $0 = error }
                }
            }
            if let error = failure.withLock({ $0 }) { throw error }
            for (index, job) in jobs.enumerated() {
                guard let result = results.withLock({ $0[index] }) else { continue }
                judge(result, job: job, report: &report)
                if report.images % 100 == 0 { progress(report) }
            }
            for job in jobs { removeTree(job.image) }
            batch = []
        }
        let order = (0..<passes).shuffled(using: &generator)
        passes: for residue in order {
            try run.forEachCrashState { state in
                if creationOnly && state.committed > 0 { return false }
                guard state.point % passes == residue, !metaWritesOnly || state.inFlight != nil else { return true }
                report.crashPoints += 1
                let variants = state.variants(
                    subsets: subsets, tearSize: tearSize, tornPrefixes: tornPrefixes, generator: &generator)
                for variant in variants {
                    guard identities.insert(state.identity(of: variant)).inserted else {
                        report.duplicates += 1
                        continue
                    }
                    let files = state.image(of: variant, root: run.root, tearSize: tearSize)
                    guard fingerprints.insert(files.fingerprint).inserted else {
                        report.duplicates += 1
                        continue
                    }
                    let image = directory + "/image\(batch.count)"
                    try files.write(into: image)
                    batch.append(job(image: image, state: state, variant: variant))
                    built += 1
                    if batch.count == parallel { try flush() }
                    if done() { return false }
                }
                return true
            }
            if done() { break passes }
        }
        try flush()
        return report
    }

    /// One image to check: where it is, how the checker runs, and what the judgement needs.
    private struct Job: Sendable {
        var image: String
        var arguments: [String]
        var input: [UInt8]
        var point: Int
        var pending: Int
        var committed: Int
        var variant: Variant
    }

    private func job(image: String, state: CrashState, variant: Variant) -> Job {
        let lowest = durability == .riskLastCommitOnOSCrash ? max(0, state.committed - 1) : state.committed
        let expectation = ImageExpectation(
            lowest: lowest, highest: max(state.committed, state.inFlight ?? 0),
            acknowledgements: state.acknowledgements)
        var arguments = [
            image + "/store", "--check-image", "--seed", String(seed), "--durability", durability.workloadName,
        ]
        if let writers { arguments += ["--concurrent", String(writers)] }
        return Job(
            image: image, arguments: arguments, input: Array(expectation.text.utf8), point: state.point,
            pending: state.pendingCount, committed: state.committed, variant: variant)
    }

    /// A directory for the recording and the images: in memory when /dev/shm is there with room
    /// (a container's may be 64 MiB; a long run's log and two images take more).
    private func makeWorkDirectory() throws -> String {
        var space = statvfs()
        guard statvfs("/dev/shm", &space) == 0, UInt64(space.f_bavail) * UInt64(space.f_frsize) >= 1 << 30 else {
            return try makeTemporaryDirectory()
        }
        var template = Array("/dev/shm/hoard-powerloss-XXXXXX".utf8CString)
        if let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) {
            return String(cString: made)
        }
        return try makeTemporaryDirectory()
    }

    /// Whether the last state with every change applied is the recorded run's files, byte for
    /// byte, and no file more.
    public func replayMatches(_ run: RecordedRun) throws -> Bool {
        var last: CrashState?
        run.forEachCrashState { state in
            last = state
            return true
        }
        guard let last else { return false }
        let replayed = last.image(of: last.allApplied, root: run.root, tearSize: tearSize)
        var files = 0
        for entry in replayed.entries {
            guard let bytes = entry.bytes else { continue }
            files += 1
            if try readFile(run.root + entry.path) != bytes { return false }
        }
        return files > 0 && files == regularFiles(under: run.root).filter { !$0.hasSuffix("/lock.mdb") }.count
    }

    private func judge(_ result: ProcessResult, job: Job, report: inout PowerLossReport) {
        report.images += 1
        let verdict = result.stdout.split(separator: "\n").last { $0.hasPrefix("ok ") || $0.hasPrefix("violation ") }
        let words = verdict?.split(separator: " ", maxSplits: 4) ?? []
        var violation: String?
        if result.status != 0 || words.count < 4 {
            violation = "the checker ended with status \(result.status): \(result.stderr.suffix(600))"
        } else {
            if let recovered = Int(words[1]), recovered < job.committed { report.lostLastCommit += 1 }
            if words[3].hasPrefix("recreated") { report.recreatedCreations += 1 }
            if words[0] == "violation" { violation = words.count > 4 ? String(words[4]) : "(no text)" }
            if job.variant.name == "all applied" {
                report.allApplied += 1
                if (words[0] == "ok") != words[2].hasPrefix("agrees") { report.killHarnessDisagreements += 1 }
            }
        }
        guard let violation else { return }
        report.violationCount += 1
        if report.firstViolationImage == nil { report.firstViolationImage = report.images }
        if report.violations.count < 5 {
            report.violations.append(
                "image \(report.images), crash point \(job.point) (\(job.pending) changes pending), \(job.variant): \(violation)"
            )
        }
    }
}

/// An image's files, relative to the recorded root, shallow paths first.
public struct ImageFiles: Sendable {
    /// A path below the root ("/store/data.mdb") and its bytes, `nil` for a directory.
    public var entries: [(path: String, bytes: [UInt8]?)]

    /// A hash of every path and byte.
    var fingerprint: Int {
        var hasher = Hasher()
        for entry in entries {
            hasher.combine(entry.path)
            if let bytes = entry.bytes {
                hasher.combine(bytes.count)
                bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
            } else {
                hasher.combine(-1)
            }
        }
        return hasher.finalize()
    }

    /// Writes the files under `directory` (created).
    func write(into directory: String) throws {
        guard mkdir(directory, 0o700) == 0 else {
            throw TestSupportError("mkdir \(directory): \(String(cString: strerror(errno)))")
        }
        for entry in entries {
            if let bytes = entry.bytes {
                try writeFile(directory + entry.path, bytes)
            } else if mkdir(directory + entry.path, 0o700) != 0 {
                throw TestSupportError("mkdir \(directory + entry.path): \(String(cString: strerror(errno)))")
            }
        }
    }
}

/// Compiles tools/crash/recorder.c into `directory` with the system's C compiler (or the Swift
/// toolchain's clang); returns the library's path.
public func buildRecorder(packageRoot: String, into directory: String) throws -> String {
    let library = directory + "/recorder.so"
    let path = getenv("PATH").map { String(cString: $0) } ?? ""
    let candidates =
        ["/usr/bin/cc", "/usr/bin/clang", "/usr/bin/gcc"] + path.split(separator: ":").map { $0 + "/clang" }
    guard let compiler = candidates.first(where: { access($0, X_OK) == 0 }) else {
        throw TestSupportError("no C compiler (cc, clang or gcc) to build tools/crash/recorder.c")
    }
    let result = try runProcess(
        compiler, ["-O2", "-shared", "-fPIC", "-o", library, packageRoot + "/tools/crash/recorder.c", "-ldl"])
    guard result.status == 0 else { throw TestSupportError("cc recorder.c: \(result.stderr)") }
    return library
}

/// The names in `directory` but `.` and `..`.
func directoryEntries(_ directory: String) -> [String] {
    guard let listing = opendir(directory) else { return [] }
    defer { closedir(listing) }
    var result: [String] = []
    while let entry = readdir(listing) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        if name != "." && name != ".." { result.append(name) }
    }
    return result
}

/// The regular files under `directory`, recursively.
func regularFiles(under directory: String) -> [String] {
    var result: [String] = []
    for name in directoryEntries(directory) {
        let path = directory + "/" + name
        var st = stat()
        guard lstat(path, &st) == 0 else { continue }
        if (st.st_mode & S_IFMT) == S_IFDIR {
            result += regularFiles(under: path)
        } else if (st.st_mode & S_IFMT) == S_IFREG {
            result.append(path)
        }
    }
    return result
}
