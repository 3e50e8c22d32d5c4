/// A raw-value enum whose cases may have other raw values in some key sets (case aliases), and
/// that decides what an unknown raw value becomes instead of failing the whole record.
///
/// ```swift
/// enum Status: String, VariableEnum {
///     case active, suspended, unknown
///     static let aliases: [KeySetID: [Status: String]] = [.remote("v1"): [.active: "ACTIVE", .suspended: "BLOCKED"]]
///     static let unknownCase: Status? = .unknown
/// }
/// ```
///
/// Decoding with a key set accepts that key set's aliases and the canonical raw values; a raw
/// value it does not know becomes ``unknownCase``, or an error when that is `nil`. To keep an
/// unknown raw value instead, implement `init?(rawValue:)` yourself with a case that holds it.
/// Encoding writes the key set's alias where there is one, else the canonical raw value. Aliases
/// of local versions apply to exactly that version.
public protocol VariableEnum: RawRepresentable, Codable, Hashable where RawValue: Codable & Hashable {
    /// Raw values that differ from the canonical one, per key set.
    static var aliases: [KeySetID: [Self: RawValue]] { get }
    /// What a raw value no key set knows becomes; `nil` makes it a decoding error.
    static var unknownCase: Self? { get }
}

extension VariableEnum {
    public static var aliases: [KeySetID: [Self: RawValue]] { [:] }
    public static var unknownCase: Self? { nil }

    /// Decodes the case whose raw value (or alias in the coder's key set) was stored.
    ///
    /// - Throws: `DecodingError.dataCorrupted` for a raw value no case has, when there is no
    ///   ``unknownCase``; what the coder throws.
    public init(from decoder: any Decoder) throws {
        let keySet = requestedKeySet(decoder.userInfo)
        let raw = try decoder.singleValueContainer().decode(RawValue.self)
        if let aliases = Self.aliases[keySet], let match = aliases.first(where: { $0.value == raw }) {
            self = match.key
        } else if let value = Self(rawValue: raw) {
            self = value
        } else if let fallback = Self.unknownCase {
            self = fallback
        } else {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: decoder.codingPath,
                    debugDescription:
                        "'\(raw)' is not a raw value of \(Self.self) in key set \(keySet), and \(Self.self) has no unknownCase"
                ))
        }
    }

    /// Encodes the case's raw value, or its alias in the coder's key set.
    ///
    /// - Throws: what the coder throws.
    public func encode(to encoder: any Encoder) throws {
        let keySet = requestedKeySet(encoder.userInfo)
        var container = encoder.singleValueContainer()
        try container.encode(Self.aliases[keySet]?[self] ?? rawValue)
    }
}
