// Helpers shared by the test targets: temporary directories, seeded randomness and real child
// processes. A regular target (not a test target) so that every test target can import it.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
public import LMDB
internal import Foundation

/// Errors of the helpers themselves, naming what failed.
public struct TestSupportError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

// MARK: - Temporary directories

/// Creates a fresh directory under the system's temporary directory, runs `body` with its path
/// and removes it afterwards.
public func withTemporaryDirectory<R>(_ body: (String) throws -> R) throws -> R {
    let path = try makeTemporaryDirectory()
    defer { removeTree(path) }
    return try body(path)
}

/// Async variant of ``withTemporaryDirectory(_:)``.
public func withTemporaryDirectory<R>(_ body: (String) async throws -> R) async throws -> R {
    let path = try makeTemporaryDirectory()
    defer { removeTree(path) }
    return try await body(path)
}

/// Opens a new environment in a temporary directory for the duration of `body`.
///
/// Tests default to ``Environment/Durability/riskStoreOnOSCrash``: they check logic, not fsync,
/// and an OS crash during a test loses nothing that matters.
public func withTemporaryEnvironment<R>(
    _ options: Environment.Options = Environment.Options(durability: .riskStoreOnOSCrash),
    _ body: (Environment, String) throws -> R
) throws -> R {
    try withTemporaryDirectory { dir in
        let path = dir + "/store"
        let env = try Environment(path: path, options: options)
        return try body(env, path)
    }
}

public func makeTemporaryDirectory() throws -> String {
    let base = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
    var template = Array((base + "/hoard-test-XXXXXX").utf8CString)
    guard let result = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
        throw TestSupportError("mkdtemp in \(base) failed: \(String(cString: strerror(errno)))")
    }
    return String(cString: result)
}

/// Removes a file or directory tree; missing entries are ignored.
public func removeTree(_ path: String) {
    var st = stat()
    guard lstat(path, &st) == 0 else { return }
    if (st.st_mode & S_IFMT) == S_IFDIR {
        chmod(path, 0o700)
        if let dir = opendir(path) {
            var names: [String] = []
            while let entry = readdir(dir) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
                }
                if name != "." && name != ".." { names.append(name) }
            }
            closedir(dir)
            for name in names { removeTree(path + "/" + name) }
        }
        rmdir(path)
    } else {
        unlink(path)
    }
}

/// The size of a file in bytes.
public func fileSize(_ path: String) throws -> Int {
    var st = stat()
    guard stat(path, &st) == 0 else { throw TestSupportError("stat \(path): \(String(cString: strerror(errno)))") }
    return Int(st.st_size)
}

/// The permission bits of a file or directory.
public func permissions(_ path: String) throws -> Int {
    var st = stat()
    guard stat(path, &st) == 0 else { throw TestSupportError("stat \(path): \(String(cString: strerror(errno)))") }
    return Int(st.st_mode & 0o7777)
}

/// Writes `bytes` to `path`, creating or truncating it.
public func writeFile(_ path: String, _ bytes: [UInt8]) throws {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    guard fd >= 0 else { throw TestSupportError("open \(path): \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    guard written == bytes.count else { throw TestSupportError("write \(path) failed") }
}

/// The whole content of the file at `path`.
public func readFile(_ path: String) throws -> [UInt8] {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { throw TestSupportError("open \(path): \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    var result: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if count < 0 && errno == EINTR { continue }
        guard count >= 0 else { throw TestSupportError("read \(path): \(String(cString: strerror(errno)))") }
        if count == 0 { return result }
        result += chunk[..<count]
    }
}

/// Overwrites bytes of an existing file at `offset`.
public func patchFile(_ path: String, at offset: Int, with bytes: [UInt8]) throws {
    let fd = open(path, O_WRONLY)
    guard fd >= 0 else { throw TestSupportError("open \(path): \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    let written = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) }
    guard written == bytes.count else { throw TestSupportError("pwrite \(path) failed") }
}

// MARK: - Seeded randomness

/// SplitMix64: a small, fast, seedable generator, so a failing randomized test can be replayed.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    public private(set) var state: UInt64
    public let seed: UInt64

    public init(seed: UInt64) {
        self.seed = seed
        self.state = seed
    }

    /// A seed from the `HOARD_TEST_SEED` environment variable, or a fresh one.
    public static func seedFromEnvironment() -> UInt64 {
        if let text = getenv("HOARD_TEST_SEED"), let seed = UInt64(String(cString: text)) { return seed }
        return UInt64.random(in: 0...UInt64.max)
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

// MARK: - Built executables

/// The directory holding the products of this build (`.build/debug` or `.build/release`).
public func productsDirectory() throws -> String {
    #if os(Linux)
    var buffer = [CChar](repeating: 0, count: 4096)
    let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    guard count > 0 else { throw TestSupportError("readlink /proc/self/exe failed") }
    let exe = String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    #else
    var size: UInt32 = 4096
    var buffer = [CChar](repeating: 0, count: Int(size))
    guard _NSGetExecutablePath(&buffer, &size) == 0 else { throw TestSupportError("_NSGetExecutablePath failed") }
    let exe = String(cString: buffer)
    #endif
    // Linux: .build/debug/HoardPackageTests.xctest; Darwin: …/HoardPackageTests.xctest/Contents/MacOS/…
    var bundle = exe
    if let marker = exe.firstRange(of: ".xctest") { bundle = String(exe[..<marker.upperBound]) }
    guard let slash = bundle.lastIndex(of: "/") else {
        throw TestSupportError("cannot find the products directory from \(exe)")
    }
    return String(bundle[..<slash])
}

/// The path of a built executable product of this package.
public func builtExecutable(_ name: String) throws -> String {
    let path = try productsDirectory() + "/" + name
    guard access(path, X_OK) == 0 else {
        throw TestSupportError("\(path) is not built; the test target must depend on its target")
    }
    return path
}

// MARK: - File descriptors

/// How many of this process's file descriptors (below 1024) refer to any of `files`, matched by
/// device and inode.
public func countDescriptors(referringTo files: [String]) -> Int {
    var wanted: Set<[UInt64]> = []
    for file in files {
        var st = stat()
        if stat(file, &st) == 0 { wanted.insert([UInt64(st.st_dev), UInt64(st.st_ino)]) }
    }
    var count = 0
    for fd in 0..<Int32(1024) {
        var st = stat()
        if fstat(fd, &st) == 0 && wanted.contains([UInt64(st.st_dev), UInt64(st.st_ino)]) { count += 1 }
    }
    return count
}

/// Where `text`'s UTF-8 bytes first occur in `bytes` (to damage a known record inside a data file).
public func firstOffset(of text: String, in bytes: [UInt8]) -> Int? {
    let needle = Array(text.utf8)
    guard !needle.isEmpty, bytes.count >= needle.count else { return nil }
    return (0...(bytes.count - needle.count)).first { bytes[$0..<$0 + needle.count].elementsEqual(needle) }
}

// MARK: - Blocking work in async tests

/// Runs blocking `body` (child processes, waits on pipes) on a thread of its own and awaits it.
///
/// Swift Testing runs a synchronous test on a thread of the cooperative pool, which has one
/// thread per core; a test that blocks for a minute there starves the tests that need the pool
/// (one of them checks that waiting writers leave it free). Long blocking tests use this instead.
public func offPool<R: Sendable>(_ body: @escaping @Sendable () throws -> R) async throws -> R {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.stackSize = 8 << 20
        thread.start()
    }
}

/// ``offPool(_:)`` around ``withTemporaryDirectory(_:)``: how the process-spawning tests begin.
public func offPoolInTemporaryDirectory<R: Sendable>(_ body: @escaping @Sendable (String) throws -> R) async throws -> R
{
    try await offPool { try withTemporaryDirectory(body) }
}
