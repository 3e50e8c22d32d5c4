import CBOR

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes JSON text as UTF-8 bytes into a buffer that is reused line after line: the one writer
/// behind every JSON the tool prints (`JSON.text`, `JSON.pretty`) and behind `dump` and `load`,
/// which render a million lines and must not build a tree of values or a `String` per field.
///
/// A class over memory of its own rather than a struct over an array: a dump line is some thirty
/// small writes, and an array's append checks uniqueness and capacity generically on each.
final class JSONWriter {
    private var base: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    /// How many bytes are written.
    private(set) var count = 0

    init(capacity: Int = 512) {
        self.capacity = max(capacity, 16)
        base = .allocate(capacity: self.capacity)
    }

    deinit { base.deallocate() }

    /// The bytes written, valid until the next write.
    var bytes: UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(start: base, count: count) }

    /// Forgets what was written, keeping the memory.
    func removeAll() { count = 0 }

    /// Forgets what was written after the first `count` bytes.
    func truncate(to count: Int) { self.count = min(count, self.count) }

    /// Room for `more` bytes after what is written.
    @inline(__always)
    private func reserve(_ more: Int) {
        guard count + more > capacity else { return }
        var grown = capacity * 2
        while grown < count + more { grown *= 2 }
        let moved = UnsafeMutablePointer<UInt8>.allocate(capacity: grown)
        moved.update(from: base, count: count)
        base.deallocate()
        (base, capacity) = (moved, grown)
    }

    @inline(__always)
    private func write(_ byte: UInt8) {
        reserve(1)
        base[count] = byte
        count += 1
    }

    @inline(__always)
    private func write(_ source: UnsafeBufferPointer<UInt8>) {
        guard let start = source.baseAddress, !source.isEmpty else { return }
        reserve(source.count)
        (base + count).update(from: start, count: source.count)
        count += source.count
    }

    func append(_ text: StaticString) {
        text.withUTF8Buffer { write($0) }
    }

    /// `text` as it is (no quotes, no escapes).
    func append(text: String) {
        var text = text
        text.withUTF8 { write($0) }
    }

    func append(byte: UInt8) { write(byte) }

    func append(_ number: Int64) {
        if number < 0 {
            write(UInt8(ascii: "-"))
            append(unsigned: number.magnitude)
        } else {
            append(unsigned: UInt64(number))
        }
    }

    func append(unsigned number: UInt64) {
        var digits = 1
        var limit: UInt64 = 10
        while digits < 20 && number >= limit {
            digits += 1
            limit = limit &* 10
        }
        reserve(digits)
        // Written backwards, from the last digit.
        var rest = number
        var index = count + digits
        repeat {
            index -= 1
            base[index] = UInt8(ascii: "0") + UInt8(rest % 10)
            rest /= 10
        } while rest > 0
        count += digits
    }

    /// Each of `names` as a JSON string, quoted and escaped once, for
    /// ``append(validatedCBOR:names:)``.
    static func quotedNames(_ names: [String]) -> [[UInt8]] {
        names.map { name in
            let writer = JSONWriter(capacity: name.utf8.count + 8)
            writer.append(quoted: name)
            return Array(writer.bytes)
        }
    }

    /// `text` as a JSON string: quotes, backslashes and control characters escaped, the rest as UTF-8.
    func append(quoted text: String) {
        var text = text
        text.withUTF8 { append(quotedUTF8: $0) }
    }

    /// Valid UTF-8 as a JSON string, escaped as ``append(quoted:)`` escapes.
    func append(quotedUTF8 utf8: UnsafeBufferPointer<UInt8>) {
        write(UInt8(ascii: "\""))
        // Runs of bytes that need no escape are copied whole. (`while` loops, not `for … in`:
        // a debug build, which the tests run, pays for a generic iterator on every byte.)
        var start = 0
        var index = 0
        while index < utf8.count {
            // Eight bytes at a time while none of them needs an escape (the usual text).
            while index + 8 <= utf8.count,
                !Self.needsEscape(UnsafeRawPointer(utf8.baseAddress! + index).loadUnaligned(as: UInt64.self))
            {
                index += 8
            }
            guard index < utf8.count else { break }
            let byte = utf8[index]
            index += 1
            guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
            write(UnsafeBufferPointer(rebasing: utf8[start..<(index - 1)]))
            start = index
            write(UInt8(ascii: "\\"))
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): write(byte)
            case 0x0A: write(UInt8(ascii: "n"))
            case 0x0D: write(UInt8(ascii: "r"))
            case 0x09: write(UInt8(ascii: "t"))
            default:
                append("u00")
                write(Self.hexDigits[Int(byte >> 4)])
                write(Self.hexDigits[Int(byte & 0xF)])
            }
        }
        write(UnsafeBufferPointer(rebasing: utf8[start...]))
        write(UInt8(ascii: "\""))
    }

    static let hexDigits = Array("0123456789abcdef".utf8)

    /// Whether any of the eight bytes of `word` is below 0x20, a quote or a backslash. (A byte
    /// `b` is below 0x20 when `b - 0x20` borrows into its top bit while `b`'s top bit is clear;
    /// it equals `c` when `b ^ c` is zero, which the same test for "below 1" finds.)
    @inline(__always)
    static func needsEscape(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        func hasByteBelow(_ limit: UInt64, _ word: UInt64) -> Bool { (word &- ones &* limit) & ~word & highs != 0 }
        return hasByteBelow(0x20, word) || hasByteBelow(1, word ^ (ones &* 0x22))
            || hasByteBelow(1, word ^ (ones &* 0x5C))
    }

    /// Lowercase hex, two digits a byte.
    func append(hex source: some Collection<UInt8>) {
        for byte in source {
            write(Self.hexDigits[Int(byte >> 4)])
            write(Self.hexDigits[Int(byte & 0xF)])
        }
    }

    static let base64Digits = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Standard base64 (RFC 4648, with padding), as Foundation's `base64EncodedString()` writes it.
    func append(base64 source: UnsafeRawBufferPointer) {
        let length = (source.count + 2) / 3 * 4
        reserve(length)
        let out = base + count
        Self.base64Digits.withUnsafeBufferPointer { digits in
            var (input, output) = (0, 0)
            while input < source.count {
                // Three bytes make four digits; at the end, one or two bytes make two or three,
                // and '=' fills the four.
                let available = min(3, source.count - input)
                var chunk = UInt32(source[input]) << 16
                if available > 1 { chunk |= UInt32(source[input + 1]) << 8 }
                if available > 2 { chunk |= UInt32(source[input + 2]) }
                out[output] = digits[Int(chunk >> 18)]
                out[output + 1] = digits[Int(chunk >> 12 & 0x3F)]
                out[output + 2] = available > 1 ? digits[Int(chunk >> 6 & 0x3F)] : UInt8(ascii: "=")
                out[output + 3] = available > 2 ? digits[Int(chunk & 0x3F)] : UInt8(ascii: "=")
                (input, output) = (input + 3, output + 4)
            }
        }
        count += length
    }

    /// Milliseconds since 1970 as ISO 8601 in UTC, e.g. `2026-11-22T21:14:38.123Z` (proleptic
    /// Gregorian calendar; years before 1 or after 9999 are written with as many digits as they have).
    func append(iso8601 milliseconds: Int64) {
        let (seconds, millis) = floorDivision(milliseconds, 1000)
        let (days, secondOfDay) = floorDivision(seconds, 86_400)
        let (year, month, day) = civilDate(daysSince1970: days)
        appendPadded(year, 4)
        write(UInt8(ascii: "-"))
        appendPadded(month, 2)
        write(UInt8(ascii: "-"))
        appendPadded(day, 2)
        write(UInt8(ascii: "T"))
        appendPadded(secondOfDay / 3600, 2)
        write(UInt8(ascii: ":"))
        appendPadded(secondOfDay / 60 % 60, 2)
        write(UInt8(ascii: ":"))
        appendPadded(secondOfDay % 60, 2)
        write(UInt8(ascii: "."))
        appendPadded(millis, 3)
        write(UInt8(ascii: "Z"))
    }

    private func appendPadded(_ number: Int64, _ width: Int) {
        if number < 0 {
            write(UInt8(ascii: "-"))
            appendPadded(-number, width)
            return
        }
        var limit: Int64 = 10
        for _ in 1..<width {
            if number < limit { write(UInt8(ascii: "0")) }
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
    func append(_ value: JSON, pretty: Bool = false, level: Int = 0) {
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
    func append(cbor value: CBORValue, pretty: Bool = false, level: Int = 0) {
        switch value {
        case .unsigned(let number): append(unsigned: number)
        case .negative(let number):
            // The value is -1 - number; below Int64.min it is written as text.
            if number <= UInt64(Int64.max) {
                append(-1 - Int64(number))
            } else {
                write(UInt8(ascii: "\""))
                append("-")
                append(unsigned: number)
                append(" - 1\"")
            }
        case .bytes(let data):
            appendContainer(1, "{", "}", pretty: pretty, level: level) { writer, _ in
                writer.append(quoted: "$bytes")
                pretty ? writer.append(": ") : writer.append(byte: UInt8(ascii: ":"))
                writer.write(UInt8(ascii: "\""))
                writer.append(hex: data)
                writer.write(UInt8(ascii: "\""))
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
                    let keyText = JSONWriter(capacity: 16)
                    keyText.append(cbor: entries[index].key)
                    writer.append(quoted: String(decoding: keyText.bytes, as: UTF8.self))
                }
                pretty ? writer.append(": ") : writer.append(byte: UInt8(ascii: ":"))
                writer.append(cbor: entries[index].value, pretty: pretty, level: level + 1)
            }
        case .tagged(1, let inner) where Self.epochMilliseconds(inner) != nil:
            write(UInt8(ascii: "\""))
            append(iso8601: Self.epochMilliseconds(inner) ?? 0)
            write(UInt8(ascii: "\""))
        case .tagged(32, .text(let url)): append(quoted: url)
        case .tagged(37, .bytes(let uuid)) where uuid.count == 16:
            write(UInt8(ascii: "\""))
            for (index, byte) in uuid.enumerated() {
                if index == 4 || index == 6 || index == 8 || index == 10 { write(UInt8(ascii: "-")) }
                write(Self.upperHexDigits[Int(byte >> 4)])
                write(Self.upperHexDigits[Int(byte & 0xF)])
            }
            write(UInt8(ascii: "\""))
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

    /// A payload that `CBORValue.validate` accepted, written on one line straight from its bytes,
    /// exactly as ``append(cbor:pretty:level:)`` writes it decoded: the fast path of `dump`, which
    /// builds no `CBORValue`. It declines (returns `false`, having written nothing) when the
    /// payload holds an item whose JSON depends on more than the item itself — a tag, a map key
    /// that is not text — or an indefinite length; decode it and call `append(cbor:)` then. With
    /// `names` (each a JSON string, quoted: ``quotedNames(_:)``), the top-level map's keys are
    /// numbers that stand for them (record format 3).
    func append(validatedCBOR payload: UnsafeRawBufferPointer, names: [[UInt8]]? = nil) -> Bool {
        let mark = count
        guard appendItem(of: payload, at: 0, names: names) == payload.count else {
            count = mark
            return false
        }
        return true
    }

    /// Writes the item at `offset` and returns where the next one starts, or `nil` to decline.
    /// `names`: what the numbers keying the map at `offset` stand for, as JSON strings.
    private func appendItem(of payload: UnsafeRawBufferPointer, at offset: Int, names: [[UInt8]]? = nil) -> Int? {
        switch CBORValue.item(in: payload, at: offset) {
        case .scalar(let value, let end)?:
            append(cbor: value)
            return end
        case .text(let utf8, let end)?:
            append(quotedUTF8: utf8.assumingMemoryBound(to: UInt8.self))
            return end
        case .bytes(let data, let end)?:
            append(#"{"$bytes":""#)
            append(hex: data)
            append(#""}"#)
            return end
        case .array(let count, var position)?:
            write(UInt8(ascii: "["))
            var index = 0
            while index < count {
                if index > 0 { write(UInt8(ascii: ",")) }
                guard let end = appendItem(of: payload, at: position) else { return nil }
                position = end
                index += 1
            }
            write(UInt8(ascii: "]"))
            return position
        case .map(let count, var position)?:
            write(UInt8(ascii: "{"))
            var index = 0
            while index < count {
                if index > 0 { write(UInt8(ascii: ",")) }
                let keyEnd: Int
                switch CBORValue.item(in: payload, at: position) {
                case .text(let key, let end)? where names == nil:
                    append(quotedUTF8: key.assumingMemoryBound(to: UInt8.self))
                    keyEnd = end
                case .scalar(.unsigned(let number), let end)?:
                    guard let names, number < UInt64(names.count) else { return nil }
                    names[Int(number)].withUnsafeBufferPointer { write($0) }
                    keyEnd = end
                default:
                    return nil
                }
                write(UInt8(ascii: ":"))
                guard let end = appendItem(of: payload, at: keyEnd) else { return nil }
                position = end
                index += 1
            }
            write(UInt8(ascii: "}"))
            return position
        case .tag?, .indefinite?, nil:
            return nil
        }
    }

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
    func append(double number: Double) {
        guard number.isFinite else {
            write(UInt8(ascii: "\""))
            append(text: "\(number)")
            write(UInt8(ascii: "\""))
            return
        }
        if number == number.rounded() && abs(number) < 1e15 {
            if number.sign == .minus { write(UInt8(ascii: "-")) }
            append(unsigned: UInt64(abs(number)))
            append(".0")
        } else {
            append(text: "\(number)")
        }
    }

    /// `open`, the `count` items `item` writes separated by commas (each on its own line when
    /// `pretty`), and `close`; an empty container is `[]` or `{}`.
    private func appendContainer(
        _ count: Int, _ open: Unicode.Scalar, _ close: Unicode.Scalar, pretty: Bool, level: Int,
        item: (JSONWriter, Int) -> Void
    ) {
        write(UInt8(ascii: open))
        for index in 0..<count {
            if index > 0 { write(UInt8(ascii: ",")) }
            if pretty { newline(level + 1) }
            item(self, index)
        }
        if pretty && count > 0 { newline(level) }
        write(UInt8(ascii: close))
    }

    private func newline(_ level: Int) {
        write(0x0A)
        for _ in 0..<level { append("  ") }
    }
}
