// Every call into C and the operating system goes through this file and `check`, so that each
// has one error path and the `Int32`/`UInt32` conversions of LMDB's flags happen in one place.
internal import CLMDB

#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

/// Throws an `LMDBError` for a non-zero LMDB return code.
@inline(__always)
func check(_ rc: Int32, _ operation: StaticString, _ context: @autoclosure () -> String = "") throws(LMDBError) {
    if rc != 0 { throw LMDBError(code: rc, operation: "\(operation)", context: context()) }
}

/// Throws an `LMDBError` carrying `errno` when a system call returned -1.
@inline(__always)
func checkSystem(_ rc: Int32, _ operation: StaticString, _ context: @autoclosure () -> String) throws(LMDBError) {
    if rc == -1 { throw LMDBError(code: errno, operation: "\(operation)", context: context()) }
}

/// LMDB's flag macros import as `Int32`; its functions take `UInt32`.
@inline(__always)
func flags(_ values: Int32...) -> UInt32 {
    var result: UInt32 = 0
    for value in values { result |= UInt32(bitPattern: value) }
    return result
}

/// A number for the calling thread, used to tell which thread holds which transaction.
@inline(__always)
/// Closes a file descriptor (the system's `close`, which ``Environment/close()`` hides inside the environment's methods).
func closeFile(_ fd: Int32) { _ = close(fd) }

func currentThreadID() -> UInt {
    #if canImport(Darwin)
    return UInt(bitPattern: pthread_self())
    #else
    return UInt(pthread_self())
    #endif
}

/// The device and inode of a file: the identity of an environment, whatever path names it.
struct FileIdentity: Hashable, Sendable {
    let device: UInt64
    let inode: UInt64

    init(_ st: stat) {
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
    }

    init?(path: String) {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        self.init(st)
    }
}

enum FileSystem {
    /// `stat` that reports a missing file as `nil` and other failures as errors.
    static func status(_ path: String) throws(LMDBError) -> stat? {
        var st = stat()
        if stat(path, &st) == 0 { return st }
        if errno == ENOENT { return nil }
        throw LMDBError(code: errno, operation: "stat", context: path)
    }

    static func isDirectory(_ st: stat) -> Bool { (st.st_mode & S_IFMT) == S_IFDIR }

    static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let parent = String(path[..<slash])
        return parent.isEmpty ? "/" : parent
    }

    /// Creates `path` and any missing parents with `mode`, fsyncing each parent so that the new
    /// entries survive a power loss. Returns whether anything was created.
    @discardableResult
    static func makeDirectories(_ path: String, mode: mode_t) throws(LMDBError) -> Bool {
        if let st = try status(path) {
            guard isDirectory(st) else {
                throw LMDBError(
                    .notADirectory, operation: "open", context: "\(path) exists and is not a directory", code: ENOTDIR)
            }
            return false
        }
        let parent = parent(of: path)
        if parent != path { try makeDirectories(parent, mode: mode) }
        if mkdir(path, mode) != 0 && errno != EEXIST {
            throw LMDBError(code: errno, operation: "mkdir", context: path)
        }
        try syncDirectory(parent)
        return true
    }

    /// Creates an empty file with `mode` unless it exists; returns whether it was created.
    static func createFileIfMissing(_ path: String, mode: mode_t) throws(LMDBError) -> Bool {
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        if fd >= 0 {
            close(fd)
            return true
        }
        if errno == EEXIST { return false }
        throw LMDBError(code: errno, operation: "open", context: path)
    }

    /// Whether the data file at `path` is what a new environment's first write leaves when a
    /// power cut tears it: at most two pages, every 512-byte sector zero except the first of
    /// each page, which is zero or starts an LMDB meta page (flags `P_META`, the magic number),
    /// and not both meta pages whole (which LMDB opens). Anything else (a foreign file, a store's
    /// damaged meta page) is not touched.
    static func isUnfinishedCreation(_ path: String) -> Bool {
        let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
        guard let st = try? status(path), st.st_size > 0, Int(st.st_size) <= 2 * pageSize else { return false }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: Int(st.st_size))
        guard bytes.withUnsafeMutableBytes({ pread(fd, $0.baseAddress, $0.count, 0) }) == bytes.count else {
            return false
        }
        func integer(at offset: Int, size: Int) -> UInt32 {
            (0..<size).reduce(0) { $0 | UInt32(bytes[offset + $1]) << (8 * $1) }
        }
        var metaPages = 0
        for sector in stride(from: 0, to: bytes.count, by: 512) {
            let end = min(bytes.count, sector + 512)
            if bytes[sector..<end].allSatisfy({ $0 == 0 }) { continue }
            let startsMetaPage = sector % pageSize == 0 && end - sector >= 20
            guard startsMetaPage, integer(at: sector + 10, size: 2) & 0x08 != 0,
                integer(at: sector + 16, size: 4) == 0xBEEF_C0DE
            else { return false }
            metaPages += 1
        }
        return bytes.count < 2 * pageSize || metaPages < 2
    }

    /// Runs `body` holding the lock LMDB takes while it sets up an environment (an exclusive
    /// `fcntl` lock on the lock file's first byte), if no process holds the environment open;
    /// returns `false`, without running it, when one does.
    static func withSetupLock(_ lockPath: String, _ body: () throws(LMDBError) -> Void) throws(LMDBError) -> Bool {
        let fd = open(lockPath, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }  // which also releases the lock
        var lock = flock()
        lock.l_type = Int16(F_WRLCK)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = 0
        lock.l_len = 1
        guard fcntl(fd, F_SETLK, &lock) == 0 else { return false }
        try body()
        return true
    }

    /// Truncates the file at `path` to nothing and flushes that.
    static func truncateToEmpty(_ path: String) throws(LMDBError) {
        let fd = open(path, O_RDWR | O_CLOEXEC)
        try checkSystem(fd, "open", path)
        defer { close(fd) }
        try checkSystem(ftruncate(fd, 0), "ftruncate", path)
        try checkSystem(fsync(fd), "fsync", path)
    }

    /// fsyncs a directory so that entries created in it are durable.
    static func syncDirectory(_ path: String) throws(LMDBError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        try checkSystem(fd, "open", path)
        defer { close(fd) }
        try checkSystem(fsync(fd), "fsync", path)
    }

    /// Sets close-on-exec on every descriptor this process holds for the given files.
    ///
    /// liblmdb 0.9.24 opens its data and lock files without `O_CLOEXEC`, so a child process
    /// spawned by the service would otherwise inherit them — and with them LMDB's POSIX locks'
    /// file, which it could then keep open after the parent closes the store.
    static func setCloseOnExec(forFilesMatching identities: Set<FileIdentity>) {
        #if os(Linux)
        let fdDirectory = "/proc/self/fd"
        #else
        let fdDirectory = "/dev/fd"
        #endif
        guard let dir = opendir(fdDirectory) else { return }
        defer { closedir(dir) }
        let listing = dirfd(dir)
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            guard let fd = Int32(name), fd != listing else { continue }
            var st = stat()
            guard fstat(fd, &st) == 0, identities.contains(FileIdentity(st)) else { continue }
            let current = fcntl(fd, F_GETFD)
            if current >= 0 { _ = fcntl(fd, F_SETFD, current | FD_CLOEXEC) }
        }
    }
}
