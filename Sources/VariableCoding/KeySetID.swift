/// Names a key set: where data goes or comes from, and in which version.
///
/// - `remote("v2")`: the key names of a server API version.
/// - `local(3)`: the key names of local storage version 3.
/// - `currentLocal`: the current local version of whatever type is being coded (each type has
///   its own); storage always encodes with it.
public enum KeySetID: Hashable, Sendable, CustomStringConvertible {
    case currentLocal
    case local(Int)
    case remote(String)

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
@usableFromInline
enum KeySetContext {
    @TaskLocal @usableFromInline static var current: KeySetID?
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

/// Runs `body` with `keySet` as the choice of every VariablyCodable value coded inside it, ahead
/// of what a coder's `userInfo` says. This is how the convenience methods pass a key set to a
/// coder without touching its (shared, mutable) `userInfo`.
public func withKeySet<R>(_ keySet: KeySetID, _ body: () throws -> R) rethrows -> R {
    try KeySetContext.$current.withValue(keySet, operation: body)
}
