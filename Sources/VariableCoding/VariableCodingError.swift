/// A problem with a type's key sets, or with a value decoded through them.
///
/// Every case names the model type and the key set; decoding failures also name the property,
/// its key name in that key set and the coding path, and keep the coder's own error.
public enum VariableCodingError: Error, CustomStringConvertible, @unchecked Sendable {
    // @unchecked: `underlying` is the coder's error, which Swift's Error does not require to be Sendable.

    /// The key sets are declared wrongly (found at the type's first use).
    case invalidKeySets(type: String, keySet: String, problem: String)
    /// A key set that the type does not declare was asked for.
    case unknownKeySet(type: String, keySet: String, known: [String])
    /// The current local key set has no key for a property that `encode(to:)` writes.
    case propertyWithoutKey(type: String, keySet: String, property: String)
    /// Decoding one property failed.
    case decoding(
        type: String, keySet: String, property: String, key: String, codingPath: String, reason: String,
        underlying: (any Error)?)

    /// The error in one sentence, naming the type, key set and property.
    public var description: String {
        switch self {
        case .invalidKeySets(let type, let keySet, let problem):
            return "\(type): key set \(keySet) is invalid: \(problem)"
        case .unknownKeySet(let type, let keySet, let known):
            return "\(type) has no key set \(keySet) (it has \(known.joined(separator: ", ")))"
        case .propertyWithoutKey(let type, let keySet, let property):
            return
                "\(type): key set \(keySet) has no key for property '\(property)', which encode(to:) writes; add one (a new local version if \(keySet) has shipped)"
        case .decoding(let type, let keySet, let property, let key, let codingPath, let reason, _):
            let path = codingPath.isEmpty ? "" : " at \(codingPath)"
            return "\(type) (key set \(keySet)): property '\(property)' (key '\(key)')\(path): \(reason)"
        }
    }
}

/// "name" for `\User.name`, "meta.width" for `\Photo.meta.width`: a key path as the stable name
/// of a property, for registries and messages.
@usableFromInline
func propertyName(_ keyPath: AnyKeyPath) -> String {
    let text = "\(keyPath)"  // "\User.name" or "\Module.User.name"
    guard text.hasPrefix("\\") else { return text }
    // Drop the leading backslash and the type name: everything up to the first "." that follows
    // the last generic-free type component.
    let body = text.dropFirst()
    var depth = 0
    for (index, character) in zip(body.indices, body) {
        switch character {
        case "<": depth += 1
        case ">": depth -= 1
        case "." where depth == 0:
            let rest = body[body.index(after: index)...]
            // A qualified type name ("Module.User.name") has more dots; the property part starts
            // with a lowercase letter or an underscore in Swift's conventions, a type with uppercase.
            if let first = rest.first, first.isUppercase, rest.contains(".") { continue }
            return String(rest)
        default: break
        }
    }
    return String(body)
}

@usableFromInline
func typeName<T>(_ type: T.Type) -> String { String(describing: type) }
