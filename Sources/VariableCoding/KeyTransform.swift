/// A conversion applied to one property's value as it arrives through a remote key set: the
/// payload holds a `Raw`, the model gets the converted value, and storage keeps the converted
/// value (local key sets never transform).
///
/// ```swift
/// static let keySets = KeySets<Photo>(
///     local: [1: [\.url: "url"]],
///     remote: ["v1": [\.url: "image_url"]],
///     transforms: ["v1": [\.url: .schemeRelativeURL()]]   // "//cdn.example.com/a.jpg" -> https://…
/// )
/// ```
public struct KeyTransform: Sendable {
    /// Decodes the raw value at `key` and converts it.
    @usableFromInline let decode: @Sendable (KeyedDecodingContainer<VariableKey>, VariableKey) throws -> Any

    /// A transform from a decoded `Raw` to the property's type.
    ///
    /// The closure may throw to reject a value; the error is reported for the property.
    ///
    /// - Throws: nothing itself; what `convert` throws is thrown when the property is decoded.
    public static func from<Raw: Decodable & SendableMetatype, Value>(
        _ raw: Raw.Type, _ convert: @escaping @Sendable (Raw) throws -> Value
    ) -> KeyTransform {
        KeyTransform { container, key in try convert(try container.decode(Raw.self, forKey: key)) }
    }

    /// A URL that may arrive without a scheme (`"//host/path"`) gets `scheme` (`https` by default).
    public static func schemeRelativeURL(scheme: String = "https") -> KeyTransform {
        .from(String.self) { text -> URL in
            let fixed = text.hasPrefix("//") ? scheme + ":" + text : text
            guard let url = URL(string: fixed) else {
                throw TransformError(description: "'\(text)' is not a URL")
            }
            return url
        }
    }
}

/// A value a transform refused.
public struct TransformError: Error, CustomStringConvertible, Sendable {
    /// What was wrong with the value.
    public let description: String
    /// An error saying `description`.
    public init(description: String) { self.description = description }
}

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
