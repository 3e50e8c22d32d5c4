#if Postgres
internal import Foundation
internal import Hoard
internal import Synchronization

/// A change as its notification carries it: `d|LOG|PREVIOUS|ID|ORIGIN|KEYS|COLLECTION`, the keys in
/// hexadecimal separated by commas, the collection last (it may hold any character). `previous` is
/// the number of the append before this one (BusSchema's `hoard_publish`): a replica whose position
/// in the same log is `previous` has every change before this one, and applies this one without
/// reading the log.
struct BusNotice: Sendable, Equatable {
    var log: String
    var previous: Int64
    var id: Int64
    var change: RemoteChange

    /// The notice of `payload`, or `nil` when it is not one (another kind of notification, or a
    /// payload that does not parse: the applier then reads the log).
    init?(payload: String) {
        let fields = payload.split(separator: "|", maxSplits: 6, omittingEmptySubsequences: false)
        guard fields.count == 7, fields[0] == "d", let log = UUID(uuidString: String(fields[1])),
            let previous = Int64(fields[2]), let id = Int64(fields[3]), previous < id
        else { return nil }
        let origin: UUID?
        if fields[4].isEmpty {
            origin = nil
        } else {
            guard let parsed = UUID(uuidString: String(fields[4])) else { return nil }
            origin = parsed
        }
        var keys: [[UInt8]] = []
        if !fields[5].isEmpty {
            for hex in fields[5].split(separator: ",", omittingEmptySubsequences: false) {
                guard let key = Self.bytes(hex: hex) else { return nil }
                keys.append(key)
            }
        }
        self.log = log.uuidString
        self.previous = previous
        self.id = id
        change = RemoteChange(origin: origin, collection: String(fields[6]), keys: keys)
    }

    private static func bytes(hex: Substring) -> [UInt8]? {
        let digits = hex.utf8
        // Empty: a key array of one empty key and an empty array would read alike.
        guard !digits.isEmpty, digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var high: UInt8?
        for digit in digits {
            let value: UInt8
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): value = digit - UInt8(ascii: "a") + 10
            default: return nil
            }
            if let first = high {
                bytes.append(first << 4 | value)
                high = nil
            } else {
                high = value
            }
        }
        return bytes
    }
}

/// The notices the listening connection received and the applier has not taken yet, bounded: past
/// ``limit`` they are dropped and the applier reads the log instead, as it does when told to
/// (a notification without a change, a new connection, a heartbeat, a wait for replicas).
final class NoticeInbox: Sendable {
    struct Taken {
        var notices: [BusNotice]
        var readLog: Bool
    }
    private struct State {
        var notices: [BusNotice] = []
        var readLog = true
    }
    private let state = Mutex(State())
    let limit: Int

    init(limit: Int) { self.limit = limit }

    func add(_ notice: BusNotice) {
        state.withLock { state in
            if state.readLog { return }  // the log will be read: it holds this one
            if state.notices.count >= limit {
                state.notices = []
                state.readLog = true
            } else {
                state.notices.append(notice)
            }
        }
    }

    /// The applier reads the log at its next turn.
    func readLog() {
        state.withLock { state in
            state.notices = []
            state.readLog = true
        }
    }

    /// What the applier has to do, emptying the inbox.
    func take() -> Taken {
        state.withLock { state in
            defer { state = State(notices: [], readLog: false) }
            return Taken(notices: state.notices, readLog: state.readLog)
        }
    }
}

/// Where the applier is in the log, as it last learned it: the log's identity, the sequence number
/// it has applied through (its own changes included, which need no applying) and the one recorded
/// in the store (its own changes since then are not).
struct KnownPosition: Sendable {
    var log: String
    var sequence: Int64
    var recorded: Int64
}
#endif
