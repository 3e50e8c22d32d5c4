import CBOR

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes JSON text as UTF-8 bytes into a buffer that is reused line after line: the one writer
/// behind every JSON the tool prints (`JSON.text`, `JSON.pretty`) and behind `dump` and `load`,
/// which render a million lines and must not build a tree of values or a `String` per field.
struct JSONWriter {
    var bytes: [UInt8] = []

    init(capacity: Int = 512) { bytes.reserveCapacity(capacity) }

    mutating func removeAll() { bytes.removeAll(keepingCapacity: true) }

    mutating func append(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    mutating func append(byte: UInt8) { bytes.append(byte) }

    mutating func append(_ number: Int64) {
        if number < 0 {
            bytes.append(UInt8(ascii: "-"))
            append(unsigned: number.magnitude)
        } else {
            append(unsigned: UInt64(number))
        }
    }

    mutating func append(unsigned number: UInt64) {
        if number < 10 { return bytes.append(UInt8(ascii: "0") + UInt8(number)) }
        // At most 20 digits, written backwards into a buffer on the stack.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { buffer in
            var rest = number
            var index = 20
            while rest > 0 {
                index -= 1
                buffer[index] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[index..<20]))
        }
    }

    /// `text` as a JSON string: quotes, backslashes and control characters escaped, the rest as UTF-8.
    mutating func append(quoted text: String) {
        bytes.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { utf8 in
            var start = 0
            for index in utf8.indices {
                let byte = utf8[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<index]))
                start = index + 1
                bytes.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(byte)
                case 0x0A: bytes.append(UInt8(ascii: "n"))
                case 0x0D: bytes.append(UInt8(ascii: "r"))
                case 0x09: bytes.append(UInt8(ascii: "t"))
                default:
                    append("u00")
                    bytes.append(Self.hexDigits[Int(byte >> 4)])
                    bytes.append(Self.hexDigits[Int(byte & 0xF)])
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }

    static let hexDigits = Array("0123456789abcdef".utf8)

    /// Lowercase hex, two digits a byte.
    mutating func append(hex source: some Collection<UInt8>) {
        for byte in source {
            bytes.append(Self.hexDigits[Int(byte >> 4)])
            bytes.append(Self.hexDigits[Int(byte & 0xF)])
        }
    }

    static let base64Digits = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Standard base64 (RFC 4648, with padding), as Foundation's `base64EncodedString()` writes it.
    mutating func append(base64 source: UnsafeRawBufferPointer) {
        let digits = Self.base64Digits
        var index = 0
        while index + 3 <= source.count {
            let chunk = UInt32(source[index]) << 16 | UInt32(source[index + 1]) << 8 | UInt32(source[index + 2])
            bytes.append(digits[Int(chunk >> 18)])
            bytes.append(digits[Int(chunk >> 12 & 0x3F)])
            bytes.append(digits[Int(chunk >> 6 & 0x3F)])
            bytes.append(digits[Int(chunk & 0x3F)])
            index += 3
        }
        switch source.count - index {
        case 1:
            let chunk = UInt32(source[index]) << 16
            bytes.append(digits[Int(chunk >> 18)])
            bytes.append(digits[Int(chunk >> 12 & 0x3F)])
            append("==")
        case 2:
            let chunk = UInt32(source[index]) << 16 | UInt32(source[index + 1]) << 8
            bytes.append(digits[Int(chunk >> 18)])
            bytes.append(digits[Int(chunk >> 12 & 0x3F)])
            bytes.append(digits[Int(chunk >> 6 & 0x3F)])
            bytes.append(UInt8(ascii: "="))
        default: break
        }
    }

    /// Milliseconds since 1970 as ISO 8601 in UTC, e.g. `2026-11-22T21:14:38.123Z` (proleptic
    /// Gregorian calendar; years before 1 or after 9999 are written with as many digits as they have).
    mutating func append(iso8601 milliseconds: Int64) {
        let (seconds, millis) = floorDivision(milliseconds, 1000)
        let (days, secondOfDay) = floorDivision(seconds, 86_400)
        let (year, month, day) = civilDate(daysSince1970: days)
        appendPadded(year, 4)
        bytes.append(UInt8(ascii: "-"))
        appendPadded(month, 2)
        bytes.append(UInt8(ascii: "-"))
        appendPadded(day, 2)
        bytes.append(UInt8(ascii: "T"))
        appendPadded(secondOfDay / 3600, 2)
        bytes.append(UInt8(ascii: ":"))
        appendPadded(secondOfDay / 60 % 60, 2)
        bytes.append(UInt8(ascii: ":"))
        appendPadded(secondOfDay % 60, 2)
        bytes.append(UInt8(ascii: "."))
        appendPadded(millis, 3)
        bytes.append(UInt8(ascii: "Z"))
    }

    private mutating func appendPadded(_ number: Int64, _ width: Int) {
        if number < 0 {
            bytes.append(UInt8(ascii: "-"))
            appendPadded(-number, width)
            return
        }
        var limit: Int64 = 10
        for _ in 1..<width {
            if number < limit { bytes.append(UInt8(ascii: "0")) }
            limit = limit > Int64.max / 10 ? Int64.max : limit * 10
        }
        append(unsigned: UInt64(number))
    }
}

/// `value / divisor` rounded down, and the remainder (never negative for a positive divisor).
func floorDivision(_ value: Int64, _ divisor: Int64) -> (quotient: Int64, remainder: Int64) {
    let quotient = value / divisor
    let remainder = value % divisor
    return remainder < 0 ? (quotient - 1, remainder + divisor) : (quotient, remainder)
}

/// The year, month and day of a day counted from 1970-01-01 in the proleptic Gregorian calendar.
/// The calendar repeats every 400 years (146,097 days); counting eras from 0000-03-01 puts the
/// leap day at the end of each year, so a year's months follow from its day by one formula.
func civilDate(daysSince1970 days: Int64) -> (year: Int64, month: Int64, day: Int64) {
    let shifted = days + 719_468  // days from 0000-03-01 to 1970-01-01
    let (era, dayOfEra) = floorDivision(shifted, 146_097)
    let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
    let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
    let monthFromMarch = (5 * dayOfYear + 2) / 153
    let day = dayOfYear - (153 * monthFromMarch + 2) / 5 + 1
    let month = monthFromMarch < 10 ? monthFromMarch + 3 : monthFromMarch - 9
    let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
    return (year, month, day)
}

// MARK: - Values

extension JSONWriter {
    /// `value` on one line, or indented by two spaces a level for people (`pretty`).
    mutating func append(_ value: JSON, pretty: Bool = false, level: Int = 0) {
        switch value {
        case .null: append("null")
        case .bool(let flag): flag ? append("true") : append("false")
        case .int(let number): append(number)
        case .uint(let number): append(unsigned: number)
        case .double(let number): append(double: number)
        case .string(let text): append(quoted: text)
        case .array(let items):
            appendContainer(items.count, "[", "]", pretty: pretty, level: level) { writer, index in
                writer.append(items[index], pretty: pretty, level: level + 1)
            }
        case .object(let members):
            appendContainer(members.count, "{", "}", pretty: pretty, level: level) { writer, index in
                writer.append(quoted: members[index].0)
                pretty ? writer.append(": ") : writer.append(byte: UInt8(ascii: ":"))
                writer.append(members[index].1, pretty: pretty, level: level + 1)
            }
        case .cbor(let value): append(cbor: value, pretty: pretty, level: level)
        }
    }

    /// A CBOR value as JSON for people and scripts: maps with text keys become objects (other keys
    /// are written as their JSON text); byte strings become `{"$bytes": "<hex>"}`; tags 1 (time),
    /// 32 (URL) and 37 (UUID) become text; other tags `{"$tag": n, "value": …}`; `undefined` is `null`.
    mutating func append(cbor value: CBORValue, pretty: Bool = false, level: Int = 0) {
        switch value {
        case .unsigned(let number): append(unsigned: number)
        case .negative(let number):
            // The value is -1 - number; below Int64.min it is written as text.
            if number <= UInt64(Int64.max) {
                append(-1 - Int64(number))
            } else {
                bytes.append(UInt8(ascii: "\""))
                append("-")
                append(unsigned: number)
                append(" - 1\"")
            }
        case .bytes(let data):
            appendContainer(1, "{", "}", pretty: pretty, level: level) { writer, _ in
                writer.append(quoted: "$bytes")
                pretty ? writer.append(": ") : writer.append(byte: UInt8(ascii: ":"))
                writer.bytes.append(UInt8(ascii: "\""))
                writer.append(hex: data)
                writer.bytes.append(UInt8(ascii: "\""))
            }
        case .text(let text): append(quoted: text)
        case .array(let items):
            appendContainer(items.count, "[", "]", pretty: pretty, level: level) { writer, index in
                writer.append(cbor: items[index], pretty: pretty, level: level + 1)
            }
        case .map(let entries):
            appendContainer(entries.count, "{", "}", pretty: pretty, level: level) { writer, index in
                if case .text(let key) = entries[index].key {
                    writer.append(quoted: key)
                } else {
                    var keyText = JSONWriter(capacity: 16)
                    keyText.append(cbor: entries[index].key)
                    writer.append(quoted: String(decoding: keyText.bytes, as: UTF8.self))
                }
                pretty ? writer.append(": ") : writer.append(byte: UInt8(ascii: ":"))
                writer.append(cbor: entries[index].value, pretty: pretty, level: level + 1)
            }
        case .tagged(1, let inner) where Self.epochMilliseconds(inner) != nil:
            bytes.append(UInt8(ascii: "\""))
            append(iso8601: Self.epochMilliseconds(inner) ?? 0)
            bytes.append(UInt8(ascii: "\""))
        case .tagged(32, .text(let url)): append(quoted: url)
        case .tagged(37, .bytes(let uuid)) where uuid.count == 16:
            bytes.append(UInt8(ascii: "\""))
            for (index, byte) in uuid.enumerated() {
                if index == 4 || index == 6 || index == 8 || index == 10 { bytes.append(UInt8(ascii: "-")) }
                bytes.append(Self.upperHexDigits[Int(byte >> 4)])
                bytes.append(Self.upperHexDigits[Int(byte & 0xF)])
            }
            bytes.append(UInt8(ascii: "\""))
        case .tagged(let tag, let inner):
            appendContainer(2, "{", "}", pretty: pretty, level: level) { writer, index in
                writer.append(quoted: index == 0 ? "$tag" : "value")
                pretty ? writer.append(": ") : writer.append(byte: UInt8(ascii: ":"))
                if index == 0 {
                    writer.append(unsigned: tag)
                } else {
                    writer.append(cbor: inner, pretty: pretty, level: level + 1)
                }
            }
        case .bool(let flag): flag ? append("true") : append("false")
        case .null, .undefined: append("null")
        case .simple(let number): append(.object([("$simple", .int(Int64(number)))]), pretty: pretty, level: level)
        case .float(let number): append(double: number)
        }
    }

    static let upperHexDigits = Array("0123456789ABCDEF".utf8)

    /// A tag-1 time (seconds since 1970, integer or floating point) in milliseconds, or `nil`
    /// when it is of another type or out of range.
    static func epochMilliseconds(_ inner: CBORValue) -> Int64? {
        if let seconds = inner.int64 {
            let (milliseconds, overflow) = seconds.multipliedReportingOverflow(by: 1000)
            return overflow ? nil : milliseconds
        }
        if case .float(let seconds) = inner, seconds.isFinite, abs(seconds) < 9e15 {
            return Int64((seconds * 1000).rounded())
        }
        return nil
    }

    /// A number as JSON: integral values below 10^15 with one decimal (`3.0`), others in Swift's
    /// shortest round-trip form; NaN and infinities, which JSON lacks, as text.
    mutating func append(double number: Double) {
        guard number.isFinite else {
            bytes.append(UInt8(ascii: "\""))
            bytes.append(contentsOf: "\(number)".utf8)
            bytes.append(UInt8(ascii: "\""))
            return
        }
        if number == number.rounded() && abs(number) < 1e15 {
            if number.sign == .minus { bytes.append(UInt8(ascii: "-")) }
            append(unsigned: UInt64(abs(number)))
            append(".0")
        } else {
            bytes.append(contentsOf: "\(number)".utf8)
        }
    }

    /// `open`, the `count` items `item` writes separated by commas (each on its own line when
    /// `pretty`), and `close`; an empty container is `[]` or `{}`.
    private mutating func appendContainer(
        _ count: Int, _ open: Unicode.Scalar, _ close: Unicode.Scalar, pretty: Bool, level: Int,
        item: (inout JSONWriter, Int) -> Void
    ) {
        bytes.append(UInt8(ascii: open))
        for index in 0..<count {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            if pretty { newline(level + 1) }
            item(&self, index)
        }
        if pretty && count > 0 { newline(level) }
        bytes.append(UInt8(ascii: close))
    }

    private mutating func newline(_ level: Int) {
        bytes.append(0x0A)
        for _ in 0..<level { append("  ") }
    }
}
