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
    var log: UUID
    var previous: Int64
    var id: Int64
    var change: RemoteChange

    /// The notice of `payload`, or `nil` when it is not one (another kind of notification, or a
    /// payload that does not parse: the applier then reads the log). Parsed byte by byte: a
    /// replica parses every change of every other replica, and splitting the string by
    /// `Character` was the bus's largest cost on the way (measured).
    init?(payload: String) {
        var payload = payload
        guard
            let notice = payload.withUTF8({ bytes -> BusNotice? in
                // The six separators; the collection, last, may hold more.
                var bars: [Int] = []
                bars.reserveCapacity(6)
                for index in bytes.indices where bytes[index] == UInt8(ascii: "|") {
                    bars.append(index)
                    if bars.count == 6 { break }
                }
                guard bars.count == 6, bars[0] == 1, bytes[0] == UInt8(ascii: "d") else { return nil }
                func field(_ n: Int) -> UnsafeBufferPointer<UInt8> {
                    UnsafeBufferPointer(rebasing: bytes[(bars[n - 1] + 1)..<bars[n]])
                }
                guard let log = Self.uuid(field(1)), let previous = Self.number(field(2)),
                    let id = Self.number(field(3)), previous < id
                else { return nil }
                let originField = field(4)
                var origin: UUID?
                if !originField.isEmpty {
                    guard let parsed = Self.uuid(originField) else { return nil }
                    origin = parsed
                }
                var keys: [[UInt8]] = []
                let keysField = field(5)
                if !keysField.isEmpty {
                    for hex in keysField.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) {
                        guard let key = Self.bytes(hex: hex) else { return nil }
                        keys.append(key)
                    }
                }
                let collection = String(decoding: bytes[(bars[5] + 1)...], as: UTF8.self)
                return BusNotice(
                    log: log, previous: previous, id: id,
                    change: RemoteChange(origin: origin, collection: collection, keys: keys))
            })
        else { return nil }
        self = notice
    }

    private init(log: UUID, previous: Int64, id: Int64, change: RemoteChange) {
        (self.log, self.previous, self.id, self.change) = (log, previous, id, change)
    }

    /// A decimal number of up to 18 digits (PostgreSQL's sequences stay far below), no sign.
    private static func number(_ digits: UnsafeBufferPointer<UInt8>) -> Int64? {
        guard !digits.isEmpty, digits.count <= 18 else { return nil }
        var value: Int64 = 0
        for digit in digits {
            guard digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int64(digit - UInt8(ascii: "0"))
        }
        return value
    }

    /// A UUID as PostgreSQL writes one: 36 characters, lowercase hexadecimal in groups of 8, 4,
    /// 4, 4 and 12 separated by dashes.
    private static func uuid(_ text: UnsafeBufferPointer<UInt8>) -> UUID? {
        let dashes = [8, 13, 18, 23]
        guard text.count == 36, dashes.allSatisfy({ text[$0] == UInt8(ascii: "-") }),
            let b = bytes(hex: text.enumerated().lazy.filter { !dashes.contains($0.offset) }.map(\.element))
        else { return nil }
        return UUID(
            uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15])
        )
    }

    private static func nibble(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        default: nil
        }
    }

    /// The bytes of an even, non-empty number of lowercase hexadecimal digits. (Empty: a key array
    /// of one empty key and an empty array would read alike.)
    static func bytes(hex: some Collection<UInt8>) -> [UInt8]? {
        guard !hex.isEmpty, hex.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(hex.count / 2)
        var high: UInt8?
        for digit in hex {
            guard let value = nibble(digit) else { return nil }
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
    var log: UUID
    var sequence: Int64
    var recorded: Int64
}
#endif
