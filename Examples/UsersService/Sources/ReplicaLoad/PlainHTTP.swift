#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// A keep-alive HTTP/1.1 connection to a port on loopback, with blocking calls, for the readers.
///
/// The readers of `run` are most of this tool's requests, and they share two cores with the three
/// replicas, PostgreSQL and the upstream: through AsyncHTTPClient a read cost this process a lot
/// of CPU (its HTTP/1 pipeline and the event loop hand-offs), so the tool took a third of
/// the machine and the replicas could not be offered 10,000 reads a second. A read here is one
/// `send` and usually one `recv`, from a thread that waits for many connections at once
/// (``PacedReaders``): the service under test does the same work whichever client asks.
///
/// It speaks just what the service answers to a GET: a status line, headers, and a body framed by
/// `Content-Length`; anything else is an error that names what it got.
final class PlainConnection {
    private let port: Int
    private var socket: Int32 = -1
    /// Bytes received and not yet consumed.
    private var received: [UInt8] = []
    /// Where `read` puts what it receives, reused.
    private var chunk = [UInt8](repeating: 0, count: 16_384)
    /// The path of the request sent and not answered yet, and whether it went on a connection
    /// that had served requests before.
    private var asked: (path: String, reused: Bool)?

    init(port: Int) {
        self.port = port
    }

    deinit {
        disconnect()
    }

    /// The socket, to wait until an answer is readable (`poll`); -1 when not connected.
    var descriptor: Int32 { socket }

    /// Sends `GET path`, connecting first when not connected; on a connection the server closed
    /// while idle, connects again once.
    func send(_ path: String) throws(PlainHTTPError) {
        do {
            try sendOnce(path)
        } catch .closedBeforeAnswer {
            try sendOnce(path)
        }
    }

    private func sendOnce(_ path: String) throws(PlainHTTPError) {
        let reused = socket >= 0
        do {
            if socket < 0 { try connect() }
            try send(Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n".utf8))
            asked = (path, reused)
        } catch .closedBeforeAnswer where reused {
            disconnect()
            throw .closedBeforeAnswer
        } catch .closedBeforeAnswer {
            // A fresh connection closed at once: the server is going away, not idle.
            disconnect()
            throw .system("send to :\(port)", ECONNRESET)
        } catch {
            disconnect()
            throw error
        }
    }

    /// The status and the body of the answer to what `send` asked; waits for it. A connection the
    /// server closed while idle is opened again once, and the request sent again (nothing of the
    /// answer had arrived, and a GET can be repeated).
    func receive() throws(PlainHTTPError) -> (status: Int, body: [UInt8]) {
        guard let asked else { throw .malformed("an answer read with no request sent") }
        self.asked = nil
        do {
            return try readAnswer()
        } catch .closedBeforeAnswer where asked.reused {
            disconnect()
            try sendOnce(asked.path)
            self.asked = nil
            do {
                return try readAnswer()
            } catch {
                disconnect()
                throw error
            }
        } catch {
            disconnect()
            throw error
        }
    }

    /// Closes the connection, leaving an unanswered request behind (it took too long).
    func abandon() {
        asked = nil
        disconnect()
    }

    private func connect() throws(PlainHTTPError) {
        #if canImport(Glibc)
        let descriptor = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let descriptor = Darwin.socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { throw .system("socket", errno) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = in_addr_t(0x7f00_0001).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                #if canImport(Glibc)
                Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                #else
                Darwin.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                #endif
            }
        }
        guard connected == 0 else {
            let code = errno
            close(descriptor)
            throw .system("connect to :\(port)", code)
        }
        // A request is one small segment: without this, Nagle's algorithm holds it for the
        // previous answer's acknowledgement.
        var on: Int32 = 1
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
        // An answer that stops halfway fails the read after this long rather than hanging it.
        var limit = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        socket = descriptor
        received.removeAll(keepingCapacity: true)
    }

    private func disconnect() {
        if socket >= 0 { close(socket) }
        socket = -1
        received.removeAll(keepingCapacity: true)
    }

    private func send(_ bytes: [UInt8]) throws(PlainHTTPError) {
        var sent = 0
        while sent < bytes.count {
            let count = bytes.withUnsafeBytes { buffer in
                buffer.baseAddress.map { write(socket, $0 + sent, buffer.count - sent) } ?? 0
            }
            if count < 0 {
                if errno == EINTR { continue }
                throw errno == EPIPE || errno == ECONNRESET ? .closedBeforeAnswer : .system("send", errno)
            }
            sent += count
        }
    }

    /// Receives more bytes into `received`; false at the end of the stream.
    private func receiveMore() throws(PlainHTTPError) -> Bool {
        while true {
            let count = chunk.withUnsafeMutableBytes { buffer in
                buffer.baseAddress.map { read(socket, $0, buffer.count) } ?? 0
            }
            if count > 0 {
                received.append(contentsOf: chunk[..<count])
                return true
            }
            if count == 0 { return false }
            if errno == EINTR { continue }
            if errno == ECONNRESET { return false }
            throw .system("receive", errno)
        }
    }

    private func readAnswer() throws(PlainHTTPError) -> (status: Int, body: [UInt8]) {
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        var headEnd: Int?
        while true {
            headEnd = received.firstRange(of: separator)?.lowerBound
            if headEnd != nil { break }
            guard try receiveMore() else {
                throw received.isEmpty ? .closedBeforeAnswer : .malformed("the connection closed in the headers")
            }
        }
        guard let headEnd else { throw .malformed("no end of headers") }
        let lines = String(decoding: received[..<headEnd], as: UTF8.self).split(separator: "\r\n")
        // "HTTP/1.1 200 OK"
        guard let statusLine = lines.first, statusLine.hasPrefix("HTTP/1.1 "),
            let status = Int(statusLine.dropFirst(9).prefix(3))
        else { throw .malformed("status line \(lines.first.map(String.init) ?? "")") }
        var length: Int?
        var closes = false
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { throw .malformed("header \(line)") }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            switch name {
            case "content-length": length = Int(value)
            case "transfer-encoding": throw .malformed("transfer-encoding \(value): only Content-Length is read")
            case "connection": closes = value.lowercased() == "close"
            default: break
            }
        }
        guard let length else { throw .malformed("an answer without Content-Length") }
        let bodyStart = headEnd + separator.count
        while received.count < bodyStart + length {
            guard try receiveMore() else { throw .malformed("the connection closed in the body") }
        }
        let body = Array(received[bodyStart..<(bodyStart + length)])
        received.removeFirst(bodyStart + length)
        if closes { disconnect() }
        return (status, body)
    }
}

/// Why a plain request failed.
enum PlainHTTPError: Error, CustomStringConvertible {
    case system(String, Int32)
    case closedBeforeAnswer
    case malformed(String)

    var description: String {
        switch self {
        case .system(let call, let code): "\(call): \(String(cString: strerror(code)))"
        case .closedBeforeAnswer: "the connection closed before an answer"
        case .malformed(let what): "malformed answer: \(what)"
        }
    }
}
