#if canImport(Glibc)
public import Glibc
#elseif canImport(Darwin)
public import Darwin
#endif

/// Names a key set: where data goes or comes from, and in which version.
///
/// - `remote("v2")`: the key names of a server API version.
/// - `local(3)`: the key names of local storage version 3.
/// - `currentLocal`: the current local version of whatever type is being coded (each type has
///   its own); storage always encodes with it.
public enum KeySetID: Hashable, Sendable, CustomStringConvertible {
    /// The current local version of the type being coded.
    case currentLocal
    /// Local storage version `n`.
    case local(Int)
    /// The server API version of this name.
    case remote(String)

    /// `local(current)`, `local(3)` or `remote(v2)`.
    public var description: String {
        switch self {
        case .currentLocal: "local(current)"
        case .local(let version): "local(\(version))"
        case .remote(let name): "remote(\(name))"
        }
    }
}

extension CodingUserInfoKey {
    /// The `userInfo` key through which a coder says which ``KeySetID`` to use.
    ///
    /// ```swift
    /// let decoder = JSONDecoder()
    /// decoder.userInfo[.keySet] = KeySetID.remote("v2")
    /// ```
    public static let keySet = CodingUserInfoKey(rawValue: "hoardKeySet")!  // short: hashed on every model
}

/// The key set chosen for the coding under way when no `userInfo` says so: set by the
/// convenience methods (`decode(_:from:keySet:)`) for the duration of one call.
///
/// A thread-local slot, not a `@TaskLocal`: coding is synchronous and stays on its thread, and
/// reading a task-local costs a generic-metadata lookup in the concurrency runtime on every
/// model decoded or encoded (about a quarter of VariableCoding's overhead over plain Codable).
/// The slot holds a pointer to the caller's stack for the duration of `withKeySet`.
@usableFromInline
enum KeySetContext {
    @usableFromInline
    static let slot: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// What the slot points to while a choice is made.
    @usableFromInline
    struct Choice {
        @usableFromInline let keySet: KeySetID
        /// Whether a store is encoding a record (`withStorageKeySet`): then a local key set
        /// without a key for a property is an error, as the current one is, rather than
        /// leaving the property out.
        @usableFromInline let storage: Bool

        @inlinable
        init(keySet: KeySetID, storage: Bool) {
            self.keySet = keySet
            self.storage = storage
        }
    }

    @inlinable
    static var current: KeySetID? {
        pthread_getspecific(slot).map { $0.assumingMemoryBound(to: Choice.self).pointee.keySet }
    }

    @inlinable
    static var isStorage: Bool {
        pthread_getspecific(slot).map { $0.assumingMemoryBound(to: Choice.self).pointee.storage } ?? false
    }

    /// Runs `body` with `choice` in the slot, then puts back what was there.
    @inlinable
    static func with<R>(_ choice: Choice, _ body: () throws -> R) rethrows -> R {
        let outer = pthread_getspecific(slot)
        defer { pthread_setspecific(slot, outer) }
        return try withUnsafePointer(to: choice) { chosen in
            pthread_setspecific(slot, chosen)
            return try body()
        }
    }
}

/// The key set a coding asks for: the call's choice (`withKeySet`, the convenience methods), then
/// the coder's `userInfo`, then the current local version. The call's choice comes first because
/// it is the more specific one, and because reading `userInfo` costs some coders a dictionary
/// copy per value.
@usableFromInline
func requestedKeySet(_ userInfo: @autoclosure () -> [CodingUserInfoKey: Any]) -> KeySetID {
    if let chosen = KeySetContext.current { return chosen }
    let userInfo = userInfo()
    if !userInfo.isEmpty {
        // A coder's userInfo holds a handful of entries: comparing keys beats hashing one.
        let wanted = CodingUserInfoKey.keySet
        if userInfo.count <= 4 {
            for (key, value) in userInfo where key == wanted {
                if let id = value as? KeySetID { return id }
            }
        } else if let id = userInfo[wanted] as? KeySetID {
            return id
        }
    }
    return .currentLocal
}

/// Runs `body` as a store's encoding of a record of local version `version`: every
/// VariablyCodable value inside it uses `.local(version)` (nested types: the highest of their
/// versions not above it, which is what reading the record back will use), and a property such a
/// key set has no key for is an error instead of being left out, so that storage never drops data
/// silently. For the Hoard module of this package.
package func withStorageKeySet<R>(version: Int, _ body: () throws -> R) rethrows -> R {
    try KeySetContext.with(.init(keySet: .local(version), storage: true), body)
}

/// Runs `body` with `keySet` as the choice of every VariablyCodable value coded inside it, ahead
/// of what a coder's `userInfo` says. This is how the convenience methods pass a key set to a
/// coder without touching its (shared, mutable) `userInfo`.
///
/// - Throws: only what `body` throws.
public func withKeySet<R>(_ keySet: KeySetID, _ body: () throws -> R) rethrows -> R {
    try KeySetContext.with(.init(keySet: keySet, storage: false), body)
}
