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
    public static let keySet = CodingUserInfoKey(rawValue: "hoard.variableCoding.keySet")!
}

/// The key set chosen for the coding under way when no `userInfo` says so: set by the
/// convenience methods (`decode(_:from:keySet:)`) for the duration of one call.
enum KeySetContext {
    @TaskLocal static var current: KeySetID?
}

/// The key set a coder asks for: its `userInfo`, then the convenience call's choice, then the
/// current local version.
func requestedKeySet(_ userInfo: [CodingUserInfoKey: Any]) -> KeySetID {
    if let id = userInfo[.keySet] as? KeySetID { return id }
    return KeySetContext.current ?? .currentLocal
}

/// Runs `body` with `keySet` as the choice of every VariablyCodable value coded inside it whose
/// coder's `userInfo` names none. This is how the convenience methods pass a key set to a coder
/// without touching its (shared, mutable) `userInfo`.
public func withKeySet<R>(_ keySet: KeySetID, _ body: () throws -> R) rethrows -> R {
    try KeySetContext.$current.withValue(keySet, operation: body)
}
