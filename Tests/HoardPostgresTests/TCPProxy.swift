#if Postgres
import Foundation
import Synchronization
import TestSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A TCP proxy on loopback between a replica and PostgreSQL that can stop forwarding, one way or
/// both: a network partition without touching the host's network. Bytes not forwarded stay in
/// the kernel's buffers (as they stay with a sender that retransmits into a partition) and go
/// through once forwarding resumes. New connections are accepted but nothing crosses while cut,
/// so connecting times out as it would across a partition.
///
/// One thread polls every socket; a direction that is cut is simply not read.
final class TCPProxy: Sendable {
    /// Which way bytes flow: from the replica to PostgreSQL, and back.
    struct Directions: OptionSet, Sendable {
        let rawValue: Int
        static let toServer = Directions(rawValue: 1)
        static let toClient = Directions(rawValue: 2)
        static let both: Directions = [.toServer, .toClient]
    }

    /// The port the replica connects to.
    let port: Int
    private let listener: Int32
    private let forwarding = Mutex<Directions>(.both)
    private let stopped = Atomic<Bool>(false)
    private let finished = Mutex<Bool>(false)

    /// A proxy to `127.0.0.1:target`, forwarding both ways.
    init(target: Int) throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard listener >= 0 else { throw TestSupportError("socket: \(String(cString: strerror(errno)))") }
        var yes: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = Self.loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) }
        }
        guard bound == 0, listen(listener, 64) == 0 else {
            close(listener)
            throw TestSupportError("bind/listen: \(String(cString: strerror(errno)))")
        }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        self.listener = listener
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in run(target: target) }
        thread.start()
    }

    /// Forwards only `directions` from now on (`[]`: a full partition).
    func forward(_ directions: Directions) { forwarding.withLock { $0 = directions } }

    /// Stops the proxy and closes every connection through it.
    func stop() {
        stopped.store(true, ordering: .relaxed)
        // The thread notices within one poll (10 ms) and closes everything.
        while !finished.withLock({ $0 }) { sched_yield() }
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return address
    }

    /// The proxy's thread: accepts, connects each client to the target, and copies bytes in the
    /// directions that flow. The poll's 10 ms timeout is how often it looks at `forwarding` and
    /// `stopped`, not a wait for anything to happen.
    private func run(target: Int) {
        var pairs: [(client: Int32, server: Int32)] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while !stopped.load(ordering: .relaxed) {
            let directions = forwarding.withLock { $0 }
            var fds = [pollfd(fd: listener, events: Int16(POLLIN), revents: 0)]
            for pair in pairs {
                fds.append(
                    pollfd(fd: pair.client, events: directions.contains(.toServer) ? Int16(POLLIN) : 0, revents: 0))
                fds.append(
                    pollfd(fd: pair.server, events: directions.contains(.toClient) ? Int16(POLLIN) : 0, revents: 0))
            }
            guard poll(&fds, nfds_t(fds.count), 10) > 0 else { continue }
            let polled = pairs.count  // a pair accepted below waits for the next poll
            if fds[0].revents & Int16(POLLIN) != 0 {
                let client = accept(listener, nil, nil)
                if client >= 0 {
                    let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                    var address = Self.loopback(port: target)
                    let connected = withUnsafePointer(to: &address) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                            connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                        }
                    }
                    if connected == 0 {
                        pairs.append((client, server))
                    } else {
                        close(client)
                        close(server)
                    }
                }
            }
            var closing: Set<Int> = []
            for (index, pair) in pairs.prefix(polled).enumerated() {
                let flows: [(from: Int32, to: Int32, slot: Int, direction: Directions)] = [
                    (pair.client, pair.server, 1 + 2 * index, .toServer),
                    (pair.server, pair.client, 2 + 2 * index, .toClient),
                ]
                // A direction that is cut is not read even when its socket reports a hang-up.
                for (from, to, slot, direction) in flows where directions.contains(direction) && fds[slot].revents != 0
                {
                    let count = read(from, &buffer, buffer.count)
                    if count <= 0 || !writeAll(to, buffer, count) { closing.insert(index) }
                }
            }
            for index in closing.sorted(by: >) {
                close(pairs[index].client)
                close(pairs[index].server)
                pairs.remove(at: index)
            }
        }
        for pair in pairs {
            close(pair.client)
            close(pair.server)
        }
        close(listener)
        finished.withLock { $0 = true }
    }

    private func writeAll(_ fd: Int32, _ buffer: [UInt8], _ count: Int) -> Bool {
        var written = 0
        while written < count {
            let result = buffer.withUnsafeBytes { write(fd, $0.baseAddress! + written, count - written) }
            if result <= 0 { return false }
            written += result
        }
        return true
    }
}
#endif
