// HoardTesting: what an application's own tests need to test code that uses a Hoard store —
// a store in a temporary directory that is removed afterwards, a clock that moves only when told
// to, and a comparison of a collection's contents with the models a test expects. It works with
// any test framework (Swift Testing, XCTest): nothing here records a failure itself.
//
// ```swift
// import Hoard
// import HoardTesting
// import Testing
//
// @Test func expiredUsersAreGone() throws {
//     let clock = ManualClock()
//     try withTemporaryStore(options: .testing(clock: clock)) { store in
//         let users = try store.collection(User.self, timeToLive: .seconds(60))
//         try users.put([User(id: 1, name: "ada"), User(id: 2, name: "grace")])
//         #expect(try users.difference(from: [User(id: 1, name: "ada"), User(id: 2, name: "grace")]) == nil)
//         clock.advance(by: .seconds(61))
//         #expect(try users.scan().isEmpty)
//     }
// }
// ```
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
public import Foundation
public import Hoard
internal import Synchronization

// MARK: - A temporary store

extension Store.Options {
    /// Options for a store in a test: no flushes (a test checks logic, not the disk; an
    /// operating-system crash during a test loses nothing that matters) and, when given, a
    /// ``ManualClock``.
    public static func testing(clock: ManualClock? = nil) -> Store.Options {
        Store.Options(durability: .riskStoreOnOSCrash, clock: clock?.read, sleepUntil: clock?.sleepUntil)
    }
}

/// Opens a new store in a temporary directory, runs `body` with it, and removes the directory
/// afterwards (also when `body` throws).
///
/// - Throws: what `body` throws, or an error when the directory or the store cannot be made.
public func withTemporaryStore<R>(options: Store.Options = .testing(), _ body: (Store) throws -> R) throws -> R {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    return try body(try Store(path: directory.path + "/store", options: options))
}

/// The async variant of ``withTemporaryStore(options:_:)-1dbu1``.
///
/// - Throws: what `body` throws, or an error when the directory or the store cannot be made.
public func withTemporaryStore<R>(
    options: Store.Options = .testing(), _ body: (Store) async throws -> R
) async throws -> R {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    return try await body(try Store(path: directory.path + "/store", options: options))
}

/// Why ``withTemporaryStore(options:_:)-1dbu1`` could not make its directory.
public struct TemporaryStoreError: Error, CustomStringConvertible {
    /// The directory and the system's reason.
    public let description: String
}

/// A directory made with `mkdtemp` under `$TMPDIR` (or /tmp), mode 0700.
struct TemporaryDirectory {
    let path: String

    init() throws {
        let base = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array((base + "/hoard-testing-XXXXXX").utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buffer in buffer.baseAddress.flatMap { mkdtemp($0) } }
        guard let made else {
            throw TemporaryStoreError(
                description: "cannot make a temporary directory in \(base): \(String(cString: strerror(errno)))")
        }
        path = String(cString: made)
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}

// MARK: - A manual clock

/// A clock that stands still until told to move, for `Store.Options.testing(clock:)`: expiry
/// can then be tested without waiting. It starts 1,000 seconds after 1970.
public final class ManualClock: Sendable {
    private let state = Mutex(State())

    private struct State {
        var milliseconds: Int64 = 1_000_000
        /// Who waits for a moment (`sleep(until:)`), by a number of its own.
        var sleepers: [Int: (until: Int64, continuation: CheckedContinuation<Void, any Error>)] = [:]
        var nextSleeper = 0
    }

    /// A clock at 1,000 seconds after 1970.
    public init() {}

    /// Moves the clock on by `duration` (records keep times to the millisecond), and resumes
    /// those waiting for a moment it reached.
    public func advance(by duration: Duration) {
        let (seconds, attoseconds) = duration.components
        let woken = state.withLock { state in
            state.milliseconds += seconds * 1000 + attoseconds / 1_000_000_000_000_000
            let now = state.milliseconds
            let due = state.sleepers.filter { $0.value.until <= now }
            for key in due.keys { state.sleepers[key] = nil }
            return due.values.map(\.continuation)
        }
        for continuation in woken { continuation.resume() }
    }

    /// Returns once the clock has been moved to `moment` or past it.
    ///
    /// - Throws: `CancellationError` when the task is cancelled first.
    public func sleep(until moment: Date) async throws {
        let until = Int64((moment.timeIntervalSince1970 * 1000).rounded(.down))
        let number = state.withLock { state in
            defer { state.nextSleeper += 1 }
            return state.nextSleeper
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let now = state.withLock { state -> Bool in
                    if state.milliseconds >= until || Task.isCancelled { return true }
                    state.sleepers[number] = (until, continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let sleeper = state.withLock { $0.sleepers.removeValue(forKey: number) }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
        try Task.checkCancellation()
    }

    /// ``sleep(until:)`` as `Store.Options.sleepUntil` takes it.
    public var sleepUntil: @Sendable (Date) async throws -> Void { { [self] in try await sleep(until: $0) } }

    /// The time now, in milliseconds since 1970, as records store it (compare with `RecordHeader`'s times).
    public var nowMilliseconds: Int64 { state.withLock { $0.milliseconds } }

    /// The time now.
    public var now: Date { Date(timeIntervalSince1970: Double(nowMilliseconds) / 1000) }

    /// The clock as `Store.Options.clock` takes it.
    public var read: @Sendable () -> Date { { [self] in now } }
}

// MARK: - Contents

/// How a collection's contents differ from what a test expected, by ID.
public struct ContentsDifference<ID: Hashable & Sendable>: Sendable, Equatable, CustomStringConvertible {
    /// Expected but not stored (or expired).
    public var missing: [ID]
    /// Stored but not expected.
    public var unexpected: [ID]
    /// Stored with other content than expected.
    public var different: [ID]

    /// A difference of these IDs (to compare a result with in a test).
    public init(missing: [ID], unexpected: [ID], different: [ID]) {
        (self.missing, self.unexpected, self.different) = (missing, unexpected, different)
    }

    /// The three lists, for a test's failure message.
    public var description: String {
        "missing \(missing), unexpected \(unexpected), different \(different)"
    }
}

extension HoardCollection where Model: Equatable {
    /// How the live models of the collection differ from `expected`, or `nil` when they are the
    /// same (in any order): `#expect(try users.difference(from: expected) == nil)`.
    ///
    /// - Throws: what a scan of the collection throws (a damaged record, say).
    public func difference(from expected: some Sequence<Model>) throws -> ContentsDifference<Model.ID>? {
        var wanted: [Model.ID: Model] = [:]
        var order: [Model.ID] = []
        for model in expected where wanted.updateValue(model, forKey: model.id) == nil { order.append(model.id) }
        var difference = ContentsDifference<Model.ID>(missing: [], unexpected: [], different: [])
        var seen: Set<Model.ID> = []
        try forEach { model in
            seen.insert(model.id)
            if let want = wanted[model.id] {
                if want != model { difference.different.append(model.id) }
            } else {
                difference.unexpected.append(model.id)
            }
            return .next
        }
        difference.missing = order.filter { !seen.contains($0) }
        return difference.missing.isEmpty && difference.unexpected.isEmpty && difference.different.isEmpty
            ? nil : difference
    }
}
