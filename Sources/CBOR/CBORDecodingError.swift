/// Bytes that are not well-formed CBOR, or that break a limit of the decoder.
///
/// Every such error names the byte offset where the problem was found and, when a typed decode
/// was under way, the coding path that led there. Type mismatches and missing keys in well-formed
/// input are reported as Swift's `DecodingError` instead, as every `Decoder` does, with the byte
/// offset in the debug description.
public struct CBORDecodingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What is wrong with the bytes.
    public enum Reason: Sendable, Equatable {
        /// The input ends inside an item.
        case truncated
        /// Additional information 28–30, which RFC 8949 reserves.
        case reservedAdditionalInformation(UInt8)
        /// The indefinite-length marker on a major type that has none (integers, tags).
        case indefiniteLengthNotAllowed(major: UInt8)
        /// A "break" (0xFF) outside an indefinite-length item.
        case unexpectedBreak
        /// A chunk of an indefinite-length string that is not a definite string of the same type.
        case invalidChunk
        /// A two-byte simple value below 32 (RFC 8949 §3.3: not well-formed).
        case invalidSimpleValue(UInt8)
        /// A length that cannot fit in the remaining input.
        case lengthExceedsInput(UInt64)
        /// Nesting deeper than ``CBORDecoder/maxDepth``.
        case tooDeep(limit: Int)
        /// A text string that is not valid UTF-8.
        case invalidUTF8
        /// Bytes after the end of the top-level item.
        case trailingBytes(count: Int)
        /// A map with the same key twice.
        case duplicateKey(String)
        /// A map key a keyed container cannot use (neither a text string nor an integer).
        case unsupportedKey
    }

    /// What is wrong.
    public let reason: Reason
    /// The byte offset in the input where it was found.
    public let offset: Int
    /// The coding path of the value being decoded, as text (empty outside a typed decode).
    public let codingPath: String

    public init(_ reason: Reason, at offset: Int, codingPath: String = "") {
        self.reason = reason
        self.offset = offset
        self.codingPath = codingPath
    }

    public var description: String {
        let path = codingPath.isEmpty ? "" : " (coding path \(codingPath))"
        return "CBOR: \(explanation) at byte offset \(offset)\(path)"
    }

    private var explanation: String {
        switch reason {
        case .truncated: "the input ends inside an item"
        case .reservedAdditionalInformation(let info): "reserved additional information \(info)"
        case .indefiniteLengthNotAllowed(let major): "indefinite length on major type \(major), which has none"
        case .unexpectedBreak: "a break byte (0xff) outside an indefinite-length item"
        case .invalidChunk: "a chunk of an indefinite-length string that is not a definite string of the same type"
        case .invalidSimpleValue(let value): "two-byte simple value \(value) (values below 32 take one byte)"
        case .lengthExceedsInput(let length): "a length of \(length) that exceeds the remaining input"
        case .tooDeep(let limit): "nesting deeper than \(limit) levels"
        case .invalidUTF8: "a text string that is not valid UTF-8"
        case .trailingBytes(let count): "\(count) bytes after the end of the top-level item"
        case .duplicateKey(let key): "duplicate map key \(key)"
        case .unsupportedKey: "a map key that is neither a text string nor an integer"
        }
    }
}
