#if Postgres
internal import Hoard
internal import Logging
internal import PostgresNIO
internal import Synchronization

// The bus's connection to PostgreSQL: the listening loop that keeps it (reconnecting, replacing a
// pool that failed, reporting an outage), the replica's registration and leaving, and the status.

extension PostgresBus {
    /// Holds a connection that LISTENs; every notification wakes the applier (or the waiters for
    /// replicas), with the change it carries (``NoticeInbox``), and every new connection wakes the
    /// applier too, to read the log: what was sent while nobody listened is there. postgres-nio's
    /// listen ends with an error when its connection closes; this loop then connects again, after
    /// a backoff that doubles up to its longest.
    func keepListening() async {
        var delay = configuration.backoff.first
        var everConnected = false
        // This store's identity (read once: it never changes), and the payload of its own changes
        // too large to carry.
        let identity = try? store.replication.identity()
        let own = identity.map { "c" + $0.uuidString.lowercased() }
        var outage = Outage()
        while !Task.isCancelled {
            let attempt = pools.generation
            let watchdog = outstanding.spawn("watching the connection") { [outage] in
                try await self.watchConnecting(outage)
            }
            var connected = false
            do {
                try await client.withConnection { connection in
                    watchdog.cancel()
                    connected = true
                    try await connection.listen(on: BusSchema.channel) { notifications in
                        // Bounded: a cancellation while these wait for a second connection must
                        // still let this closure end and give its connection back to the pool.
                        try await withTimeout(self.configuration.operationTimeout, "migrating", in: self.outstanding) {
                            try await BusSchema.migrate(
                                self.client, sharingFills: self.configuration.sharedFills != nil, logger: self.logger)
                            try await self.register()
                        }
                        self.connectionChanged(up: true, reconnect: everConnected)
                        everConnected = true
                        delay = self.configuration.backoff.first
                        // What was sent while nobody listened is in the log.
                        self.inbox.readLog()
                        self.changesSignal.signal()
                        self.appliedSignal.signal()
                        // The sequence does not end when the task is cancelled; closing the
                        // connection ends it (and the pool, which waits for its connections, can stop).
                        try await withTaskCancellationHandler {
                            // Its own changes do not wake a replica (it has nothing to do for
                            // them): its position passes them with the next change of another, a
                            // heartbeat, or a wait for replicas.
                            for try await notification in notifications {
                                let payload = notification.payload
                                if payload == "a" {
                                    self.appliedSignal.signal()
                                } else if payload.hasPrefix("w"), let milliseconds = Int64(payload.dropFirst()) {
                                    self.awaited(for: .milliseconds(milliseconds))
                                } else if payload.hasPrefix("f|") {
                                    self.fillEnded(payload)
                                } else if let notice = BusNotice(payload: payload) {
                                    self.inbox.add(notice)
                                    if notice.change.origin != identity { self.changesSignal.signal() }
                                } else {
                                    self.inbox.readLog()
                                    if payload != own { self.changesSignal.signal() }
                                }
                            }
                        } onCancel: {
                            let closing: EventLoopFuture<Void> = connection.close()
                            _ = closing
                        }
                    }
                }
                connectionChanged(up: false, error: "the listening connection ended")
                connectionLost.signal()
            } catch is CancellationError {
                watchdog.cancel()
                break
            } catch {
                watchdog.cancel()
                if Task.isCancelled { break }
                // The pool it waited on was replaced: the new one is tried at once.
                if pools.generation != attempt { continue }
                connectionChanged(up: false, error: "\(String(reflecting: error))")
                connectionLost.signal()
                logger.warning(
                    "PostgresBus: the listening connection failed; reads go on from the store",
                    metadata: ["error": "\(String(reflecting: error))", "retryIn": "\(delay)"])
            }
            // An outage begins when a connection that was up is lost.
            if connected { outage = Outage() }
            try? await Task.sleep(for: delay)
            delay = min(delay * 2, configuration.backoff.longest)
        }
        connectionChanged(up: false, error: nil)
    }

    /// Watches an attempt of the listening loop to get a connection: postgres-nio's pool retries
    /// one that fails and keeps the lease waiting. Every ``Configuration/backoff``'s longest wait,
    /// a pool that failed meanwhile is replaced (``Pools``), which ends the wait; once the outage
    /// has lasted the connect timeout, the bus reports it (once), with the cause the pool logged.
    func watchConnecting(_ outage: Outage) async throws {
        let timeout = configuration.postgres.options.connectTimeout
        while true {
            try await Task.sleep(for: configuration.backoff.longest)
            if pools.replaceIfFailed() {
                logger.debug("PostgresBus: replaced the connection pool, which failed to connect")
            }
            if outage.since.duration(to: .now) >= timeout, outage.report() {
                let cause = shared.state.withLock { $0.lastPoolError } ?? "no answer"
                connectionChanged(up: false, error: "no connection to PostgreSQL within \(timeout): \(cause)")
                logger.warning(
                    "PostgresBus: cannot connect to PostgreSQL; reads go on from the store",
                    metadata: ["error": "\(cause)"])
            }
        }
    }

    /// Marks this replica as not live (a stop, not a failure): its row stays, with its position.
    /// Tried again until it succeeds or the task is cancelled: a connection may fail under it.
    func leave() async throws {
        let identity = try store.replication.identity()
        while true {
            do {
                try await client.query(
                    "UPDATE hoard_replicas SET left_at = now() WHERE store_id = \(identity)", logger: logger)
                return
            } catch {
                try await Task.sleep(for: configuration.backoff.first)
            }
        }
    }

    /// A time without a listening connection, reported once.
    struct Outage: Sendable {
        let since = ContinuousClock.now
        private let reported = Reported()

        /// Returns `true` the first time only.
        func report() -> Bool {
            reported.flag.withLock { flag in
                defer { flag = true }
                return !flag
            }
        }

        private final class Reported: Sendable { let flag = Mutex(false) }
    }

    /// A replica waits for the others for `wait`: until then, record and report each position
    /// applied at once, this replica's own changes included (which it does not record otherwise:
    /// ``applyNotices(_:)``), for the last of them may be the one awaited. The notifications of the
    /// changes came before this one (PostgreSQL delivers them in commit order, and the wait began
    /// after its change was published), so the log is read only when they do not follow on.
    func awaited(for wait: Duration) {
        let until = ContinuousClock.now + wait
        shared.state.withLock { $0.awaitedUntil = max($0.awaitedUntil ?? until, until) }
        changesSignal.signal()
        reportSignal.signal()
    }

    func connectionChanged(up: Bool, reconnect: Bool = false, error: String? = nil) {
        shared.state.withLock { state in
            state.connected = up
            if up { state.lastError = nil } else if let error { state.lastError = error }
            if up && reconnect { state.reconnects += 1 }
        }
        metrics.connected.record(up ? 1 : 0)
        if up && reconnect { metrics.reconnects.increment() }
    }
}
#endif
