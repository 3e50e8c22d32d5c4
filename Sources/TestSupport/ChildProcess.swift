#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A real child process with pipes to its standard input and output, for tests that need a
/// second process: a second reader or writer of a store, a process to kill with SIGKILL.
///
/// Spawned with `posix_spawn` and no file-descriptor clean-up of its own, so that a descriptor the
/// parent forgot to mark close-on-exec really reaches the child (that is what some tests check).
/// Conversation is line based: ``send(_:)`` a command, ``readLine()`` the answer. Waiting is on
/// the pipe, never on a timer.
public final class ChildProcess {
    public let pid: Int32
    private let input: Int32
    private let output: Int32
    private var buffer: [UInt8] = []
    private var exited: Int32?

    /// Starts `executable` with `arguments`; its standard error goes to the parent's.
    public init(_ executable: String, _ arguments: [String]) throws {
        // Writing to a child that has died must be an error to report, not a SIGPIPE that ends the tests.
        signal(SIGPIPE, SIG_IGN)
        var toChild: [Int32] = [0, 0]
        var fromChild: [Int32] = [0, 0]
        guard pipe(&toChild) == 0, pipe(&fromChild) == 0 else {
            throw TestSupportError("pipe: \(String(cString: strerror(errno)))")
        }
        // No pipe end may leak into other children spawned meanwhile (tests run in parallel):
        // the child gets its ends as fresh, inheritable copies made by dup2 below.
        for fd in toChild + fromChild { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }

        let child: pid_t
        do {
            child = try spawn(executable, arguments) { actions in
                posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
                posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
                posix_spawn_file_actions_addclose(&actions, toChild[0])
                posix_spawn_file_actions_addclose(&actions, fromChild[1])
            }
        } catch {
            for fd in toChild + fromChild { close(fd) }
            throw error
        }
        close(toChild[0])
        close(fromChild[1])
        pid = child
        input = toChild[1]
        output = fromChild[0]
    }

    deinit {
        close(input)
        close(output)
        if exited == nil {
            _ = sendSignal(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
    }

    /// Sends one line to the child's standard input.
    public func send(_ line: String) throws {
        let bytes = Array((line + "\n").utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { write(input, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw TestSupportError("write to child \(pid): \(String(cString: strerror(errno)))") }
            offset += n
        }
    }

    /// Blocks until the child writes a whole line; `nil` at end of output (the child closed it or died).
    public func readLine() throws -> String? {
        while true {
            if let newline = buffer.firstIndex(of: 10) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let n = chunk.withUnsafeMutableBytes { read(output, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw TestSupportError("read from child \(pid): \(String(cString: strerror(errno)))") }
            if n == 0 {
                guard !buffer.isEmpty else { return nil }
                defer { buffer.removeAll() }
                return String(decoding: buffer, as: UTF8.self)
            }
            buffer.append(contentsOf: chunk[..<n])
        }
    }

    /// Sends a command and returns the child's one-line answer.
    public func ask(_ line: String) throws -> String {
        try send(line)
        guard let answer = try readLine() else {
            throw TestSupportError("child \(pid) ended without answering '\(line)'")
        }
        return answer
    }

    /// Whether a line (or end of output) can be read now without blocking.
    public func hasOutput() -> Bool {
        if buffer.contains(10) { return true }
        var descriptor = pollfd(fd: output, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 0) > 0
    }

    /// Sends `signal` (SIGKILL by default) to the child.
    public func kill(_ signal: Int32 = 9 /* SIGKILL */) {
        _ = sendSignal(pid, signal)
    }

    /// Waits for the child to end; returns its exit status, or 128 + the signal that killed it.
    @discardableResult
    public func wait() -> Int32 {
        if let exited { return exited }
        let code = waitForExit(pid)
        exited = code
        return code
    }
}

private func sendSignal(_ pid: Int32, _ signal: Int32) -> Int32 { kill(pid, signal) }

/// What a finished process printed and how it ended.
public struct ProcessResult: Sendable {
    /// The exit status, or 128 + the signal that ended it.
    public var status: Int32
    public var stdout: String
    public var stderr: String
}

/// Runs `executable` to its end with `input` on its standard input (empty when `nil`) and its
/// output captured in files (no pipe can fill up and stall it), plus `environment` additions.
public func runProcess(
    _ executable: String, _ arguments: [String], input: [UInt8] = [], environment: [String: String] = [:]
) throws -> ProcessResult {
    let directory = try makeTemporaryDirectory()
    defer { removeTree(directory) }
    let inPath = directory + "/stdin", outPath = directory + "/stdout", errPath = directory + "/stderr"
    try writeFile(inPath, input)

    let pid = try spawn(executable, arguments, environment: environment) { actions in
        posix_spawn_file_actions_addopen(&actions, 0, inPath, O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, errPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    }
    let code = waitForExit(pid)
    func read(_ path: String) throws -> String {
        String(decoding: try readFile(path), as: UTF8.self)
    }
    return ProcessResult(status: code, stdout: try read(outPath), stderr: try read(errPath))
}

#if canImport(Darwin)
typealias FileActions = posix_spawn_file_actions_t?
#else
typealias FileActions = posix_spawn_file_actions_t
#endif

/// Starts `executable` with the file actions `configure` adds, in this process's environment
/// plus `environment`; returns its process id.
func spawn(
    _ executable: String, _ arguments: [String], environment: [String: String] = [:],
    configure: (inout FileActions) -> Void
) throws -> pid_t {
    #if canImport(Darwin)
    var actions: FileActions = nil
    #else
    var actions = FileActions()
    #endif
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    configure(&actions)

    var variables: [String] = []
    var index = 0
    while let entry = environ[index] {
        let text = String(cString: entry)
        if let name = text.split(separator: "=", maxSplits: 1).first, environment[String(name)] == nil {
            variables.append(text)
        }
        index += 1
    }
    variables += environment.map { "\($0.key)=\($0.value)" }
    let argv = ([executable] + arguments).map { strdup($0) } + [nil]
    let envp = variables.map { strdup($0) } + [nil]
    defer {
        argv.forEach { free($0) }
        envp.forEach { free($0) }
    }
    var pid: pid_t = 0
    let rc = posix_spawn(&pid, executable, &actions, nil, argv, envp)
    guard rc == 0 else { throw TestSupportError("posix_spawn \(executable): \(String(cString: strerror(rc)))") }
    return pid
}

/// Waits for `pid` to end; its exit status, 128 + the signal that ended it, or -1 when it cannot
/// be waited for (no test expects -1, so that shows as a failure, not as success).
func waitForExit(_ pid: pid_t) -> Int32 {
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 {
        if errno != EINTR { return -1 }
    }
    return status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
}
