#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import UsersModel

/// Readers of random users on random replicas, each at its share of a rate, on a few threads.
///
/// Each thread keeps its share of the readers: it sends a reader's request when it is due, and
/// waits in `poll` for the answers in flight and for the next request due, so one wake-up serves
/// every answer ready at once. (With a thread a reader, each read cost a sleep and a wake-up of
/// its own, and the scheduler's work was a fifth of this tool's CPU.) A reader that falls behind
/// its pace sends its next request as soon as its answer came, until it has caught up.
///
/// A read is stale when the user's version is older than the highest one a write saw applied on
/// every replica before the read began (`AppliedVersions`).
struct PacedReaders: Sendable {
    var readers: Int
    var threads: Int
    var readsPerSecond: Int
    var users: Int
    var ports: [Int]
    var deadline: ContinuousClock.Instant
    var applied: AppliedVersions
    /// How long an answer may take before the read fails and its connection is closed.
    var timeout: Duration = .seconds(5)
    /// Whether a read that a replica does not answer (refused, reset, past the timeout) is asked of
    /// another replica not yet tried, as a load balancer would, instead of failing.
    var reroute = false

    /// Reads until the deadline, then waits for the answers in flight; adds what it saw to `tally`.
    func run(into tally: Tally) async {
        await onThreads(min(threads, readers)) { thread in
            tally.add(self.read(onThread: thread))
        }
    }

    private struct Reader {
        var next: ContinuousClock.Instant
        var connections: [Int: PlainConnection] = [:]
        var asked: Asked?
    }

    private struct Asked {
        var id: Int64
        var port: Int
        var floor: Int
        var began: ContinuousClock.Instant
        /// The replicas asked so far.
        var tried: Set<Int>
    }

    private func read(onThread thread: Int) -> Tally.Part {
        let interval = Duration.seconds(Double(readers) / Double(readsPerSecond))
        let start = ContinuousClock.now
        // Readers thread, thread + threads, …: their first requests spread over one interval.
        var mine = stride(from: thread, to: readers, by: min(threads, readers)).map {
            Reader(next: start + interval * (Double($0) / Double(readers)))
        }
        let decoder = JSONDecoder()
        var seen = Tally.Part()
        var waiting: [pollfd] = []
        var waitingReader: [Int] = []
        /// Asks reader `index`'s read of `id` of `port`; when that fails, of the next replica not
        /// yet tried if rerouting, else the read fails. Each attempt takes its own floor and start:
        /// the read checked is the one that was answered.
        /// The replica to ask next after `error`, when rerouting and one is left untried (a
        /// reroute); otherwise the read failed: `nil`.
        func rerouted(after error: any Error, tried: Set<Int>) -> Int? {
            guard reroute, let next = ports.first(where: { !tried.contains($0) }) else {
                seen.fail(error)
                return nil
            }
            seen.rerouted += 1
            return next
        }
        func ask(_ index: Int, _ id: Int64, _ first: Int, failure: (any Error)? = nil, tried: Set<Int> = []) {
            var (port, tried) = (first, tried)
            if let failure {
                guard let next = rerouted(after: failure, tried: tried) else { return }
                port = next
            }
            while true {
                tried.insert(port)
                let connection = mine[index].connections[port] ?? PlainConnection(port: port)
                mine[index].connections[port] = connection
                let floor = applied.floor(id)
                do {
                    let began = ContinuousClock.now
                    try connection.send("/users/\(id)")
                    mine[index].asked = Asked(id: id, port: port, floor: floor, began: began, tried: tried)
                    return
                } catch {
                    connection.abandon()
                    mine[index].connections[port] = nil
                    guard let next = rerouted(after: error, tried: tried) else { return }
                    port = next
                }
            }
        }
        while true {
            let now = ContinuousClock.now
            for index in mine.indices where mine[index].asked == nil && mine[index].next <= now && now < deadline {
                mine[index].next += interval
                ask(index, Int64.random(in: 1...Int64(users)), ports.randomElement() ?? 0)
            }
            waiting.removeAll(keepingCapacity: true)
            waitingReader.removeAll(keepingCapacity: true)
            var nextDue: ContinuousClock.Instant?
            for (index, reader) in mine.enumerated() {
                if let asked = reader.asked, let connection = reader.connections[asked.port] {
                    if now - asked.began > timeout {
                        connection.abandon()
                        mine[index].connections[asked.port] = nil
                        mine[index].asked = nil
                        ask(
                            index, asked.id, asked.port,
                            failure: Unexpected(
                                description: "GET /users/\(asked.id) on :\(asked.port): no answer in \(timeout)"),
                            tried: asked.tried)
                        if let again = mine[index].asked, let connection = mine[index].connections[again.port] {
                            waiting.append(pollfd(fd: connection.descriptor, events: Int16(POLLIN), revents: 0))
                            waitingReader.append(index)
                        }
                        continue
                    }
                    waiting.append(pollfd(fd: connection.descriptor, events: Int16(POLLIN), revents: 0))
                    waitingReader.append(index)
                } else if now < deadline {
                    nextDue = min(nextDue ?? reader.next, reader.next)
                }
            }
            if waiting.isEmpty && nextDue == nil { break }
            // Until the next request is due (rounded up to the millisecond `poll` counts in), or
            // for at most a tenth of a second while only answers are awaited.
            let milliseconds = nextDue.map { max(0, Int32(((($0 - now).seconds) * 1_000).rounded(.up))) } ?? 100
            let ready = poll(&waiting, nfds_t(waiting.count), milliseconds)
            guard ready > 0 else {
                if ready < 0 && errno != EINTR {
                    seen.fail(PlainHTTPError.system("poll", errno))
                    break
                }
                continue
            }
            for (slot, descriptor) in waiting.enumerated() where descriptor.revents != 0 {
                let index = waitingReader[slot]
                guard let asked = mine[index].asked, let connection = mine[index].connections[asked.port] else {
                    continue
                }
                mine[index].asked = nil
                let status: Int
                let body: [UInt8]
                do {
                    (status, body) = try connection.receive()
                } catch {
                    // No answer: the replica closed the connection (killed, say).
                    connection.abandon()
                    mine[index].connections[asked.port] = nil
                    ask(index, asked.id, asked.port, failure: error, tried: asked.tried)
                    continue
                }
                do {
                    guard status == 200 else {
                        throw Unexpected(description: "GET /users/\(asked.id) on :\(asked.port): \(status)")
                    }
                    let user = try decoder.decode(User.self, from: Data(body), keySet: .api)
                    let latency = ContinuousClock.now - asked.began
                    if user.version < asked.floor {
                        let began = Date(timeIntervalSinceNow: -latency.seconds).ISO8601Format(
                            .iso8601.time(includingFractionalSeconds: true))
                        // At once too, for the fault script to look at PostgreSQL while it is so.
                        FileHandle.standardError.write(
                            Data("STALE \(asked.id) \(asked.port) \(user.version) \(asked.floor) \(began)\n".utf8))
                        seen.addStale(
                            latency,
                            "user \(asked.id) on :\(asked.port), version \(user.version) below \(asked.floor), "
                                + "asked at \(began) UTC, answered in \(Int(latency.seconds * 1_000)) ms")
                    } else {
                        seen.add(latency, stale: false, checked: asked.floor > 0)
                    }
                } catch {
                    seen.fail(error)
                }
            }
        }
        return seen
    }
}

/// Runs `body(index)` for each index below `count`, each on a thread of its own (one that blocks in
/// `poll` must not be one of the few threads of Swift's cooperative pool), and returns once all did.
private func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) async {
    let group = DispatchGroup()
    for index in 0..<count {
        group.enter()
        Thread {
            body(index)
            group.leave()
        }.start()
    }
    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
        group.notify(queue: .global()) { done.resume() }
    }
}
