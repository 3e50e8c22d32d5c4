import ArgumentParser
@_spi(LMDB) import Hoard
import LMDB
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs the `hoard` command line and exits: the whole of the executable (tools/hoard/Main), which
/// is apart from this library so that the tests can import the tool's parts.
public func runHoardCommandLine() -> Never {
    HoardCommand.main()
    // main() ends the process on every path; this says so to the compiler.
    terminate(0)
}

/// The `hoard` command: its subcommands, and the one place where errors become exit statuses.
struct HoardCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hoard",
        abstract: "Look inside Hoard stores (LMDB directories of cached models), live ones included.",
        discussion: """
            Commands read the store without the app's Swift types: the store's registry names \
            every field of every key-set version. Reading is read-only and never blocks a \
            service that is writing to the store; the commands that write (load, migrate, \
            purge-expired, rm) say so.

            Exit status: 0 ok; 1 problems found (verify; damaged records that dump left out or \
            load skipped), an ID not found, or a damaged store; \
            2 wrong usage or an unknown collection; 3 the store cannot be opened or is not a \
            Hoard store.

            Start with: hoard demo, then hoard stat <path the demo prints>.
            """,
        version: "0.1.0",
        subcommands: [
            Stat.self, Schema.self, Get.self, Scan.self, Tags.self, Dump.self, Load.self, Verify.self,
            Migrate.self, PurgeExpired.self, Compact.self, Remove.self, Put.self, Watch.self, Demo.self,
        ]
    )

    static func main() {
        let arguments = Array(CommandLine.arguments.dropFirst())
        // A parent may have started us with signals blocked (threads of a dispatch pool block
        // them, and the mask is inherited across exec); Ctrl-C and SIGTERM must reach us.
        var interrupts = sigset_t()
        sigemptyset(&interrupts)
        sigaddset(&interrupts, SIGINT)
        sigaddset(&interrupts, SIGTERM)
        sigprocmask(SIG_UNBLOCK, &interrupts, nil)
        do {
            var command = try parseAsRoot(arguments)
            // LMDB keeps no page checksums: a damaged B-tree can make it fault. Commands that read
            // a store therefore run in a child process, and a crash there is reported, not suffered.
            if getenv(Isolation.variable) == nil, command is any StoreCommand,
                let status = Isolation.runInChild(arguments)
            {
                terminate(status)
            }
            installInterruptHandler()
            try command.run()
            Output.standard.flush()
            terminate(Skipped.any ? 1 : 0)
        } catch let error as CLIError {
            printError("hoard: \(error.message)")
            terminate(error.status)
        } catch let error as LMDBError where error.kind == .corrupted {
            printError("hoard: the store is structurally damaged: \(error)")
            terminate(1)
        } catch let error as HoardError where error.storageKind == .corrupted {
            printError("hoard: the store is structurally damaged: \(error)")
            terminate(1)
        } catch let error as HoardError {
            printError("hoard: \(error)")
            terminate(1)
        } catch let error as LMDBError {
            printError("hoard: \(error)")
            terminate(1)
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                print(fullMessage(for: error))  // --help, --version
                terminate(0)
            }
            if error is ExitCode { terminate(code.rawValue) }
            // Parse and validation errors: usage, exit status 2 (not ArgumentParser's 64).
            printError(fullMessage(for: error))
            terminate(2)
        }
    }
}

/// A command that opens a store: it runs in a child process of this executable (``Isolation``),
/// so that a fault on a damaged store ends the child, not the tool.
protocol StoreCommand: ParsableCommand {}

/// Running a store command in a child process of this executable.
enum Isolation {
    static let variable = "HOARD_CLI_CHILD"
    static let child = Atomic<Int32>(0)

    /// Runs this executable again with `arguments` and returns the exit status to use, or `nil`
    /// when the child cannot be started (the command then runs in this process, without the
    /// isolation, so that its own errors, such as a store it may not read, are still reported
    /// as they are).
    static func runInChild(_ arguments: [String]) -> Int32? {
        let executable = ownPath()
        setenv(variable, "1", 1)
        // A fault in the child is reported below in one line; the runtime's crash report would
        // only bury it.
        setenv("SWIFT_BACKTRACE", "enable=no", 1)
        // Ctrl-C reaches the whole process group; the child handles it and ends its transaction.
        // This process only waits (and passes on a SIGTERM sent to it alone).
        let forward: @convention(c) (Int32) -> Void = { signal in
            let pid = Isolation.child.load(ordering: .relaxed)
            if pid > 0 && signal == SIGTERM { kill(pid, SIGTERM) }
        }
        signal(SIGINT, forward)
        signal(SIGTERM, forward)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGINT)
        sigaddset(&defaults, SIGTERM)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable, nil, &attributes, argv, environ)
        guard rc == 0 else {
            printError(
                "hoard: cannot start a reader process (\(String(cString: strerror(rc)))); reading without crash isolation"
            )
            signal(SIGINT, SIG_DFL)
            signal(SIGTERM, SIG_DFL)
            return nil
        }
        child.store(pid, ordering: .relaxed)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            if errno != EINTR {
                printError("hoard: lost the reader process (\(String(cString: strerror(errno))))")
                return 1
            }
        }
        let signalled = status & 0x7F
        if signalled == 0 { return (status >> 8) & 0xFF }
        switch signalled {
        case SIGINT, SIGTERM:
            return 128 + signalled
        case SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE:
            printError(
                """
                hoard: the store is structurally damaged: reading it crashed the reader process \
                (signal \(signalled)). LMDB keeps no page checksums, so a damaged B-tree page shows \
                up like this; restore the store from a copy or delete it and let the cache refill
                """)
            return 1
        default:
            printError("hoard: the reader process ended on signal \(signalled)")
            return 128 + signalled
        }
    }

    static func ownPath() -> String {
        #if os(Linux)
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        if count > 0 { return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        #endif
        return CommandLine.arguments[0]
    }
}

/// Where the demo keeps its store unless told otherwise: the user's cache directory.
func defaultStorePath() -> String {
    if let cache = variable("XDG_CACHE_HOME"), !cache.isEmpty { return cache + "/hoard/demo.hoard" }
    if let home = variable("HOME"), !home.isEmpty { return home + "/.cache/hoard/demo.hoard" }
    return "/tmp/hoard-demo.hoard"
}

func variable(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }

/// Ends the process (a free function: inside a command type `exit` names ArgumentParser's method).
func terminate(_ status: Int32) -> Never {
    Output.standard.flush()
    exit(status)
}
