import CBOR
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - JSON

/// A JSON value with ordered object members, written deterministically (one line, no spaces).
enum JSON: Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case uint(UInt64)
    case double(Double)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    static func == (lhs: JSON, rhs: JSON) -> Bool { lhs.text == rhs.text }

    /// One line of JSON.
    var text: String {
        var out = ""
        write(to: &out, indent: nil, level: 0)
        return out
    }

    /// Indented JSON for people.
    var pretty: String {
        var out = ""
        write(to: &out, indent: "  ", level: 0)
        return out
    }

    private func write(to out: inout String, indent: String?, level: Int) {
        switch self {
        case .null: out += "null"
        case .bool(let flag): out += flag ? "true" : "false"
        case .int(let n): out += String(n)
        case .uint(let n): out += String(n)
        case .double(let d):
            if d.isFinite {
                out += d == d.rounded() && abs(d) < 1e15 ? String(format: "%.1f", d) : "\(d)"
            } else {
                out += "\"\(d)\""  // JSON has no NaN/Infinity: written as text
            }
        case .string(let s): JSON.quote(s, into: &out)
        case .array(let items):
            guard !items.isEmpty else { out += "[]"; return }
            out += "["
            for (index, item) in items.enumerated() {
                if index > 0 { out += "," }
                newline(&out, indent, level + 1)
                item.write(to: &out, indent: indent, level: level + 1)
            }
            newline(&out, indent, level)
            out += "]"
        case .object(let members):
            guard !members.isEmpty else { out += "{}"; return }
            out += "{"
            for (index, (key, value)) in members.enumerated() {
                if index > 0 { out += "," }
                newline(&out, indent, level + 1)
                JSON.quote(key, into: &out)
                out += indent == nil ? ":" : ": "
                value.write(to: &out, indent: indent, level: level + 1)
            }
            newline(&out, indent, level)
            out += "}"
        }
    }

    private func newline(_ out: inout String, _ indent: String?, _ level: Int) {
        guard let indent else { return }
        out += "\n" + String(repeating: indent, count: level)
    }

    static func quote(_ s: String, into out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                out +=
                    "\\u" + String(repeating: "0", count: 4 - String(scalar.value, radix: 16).count)
                    + String(scalar.value, radix: 16)
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}

extension JSON {
    /// A CBOR payload as JSON for people and scripts. Maps with text keys become objects; byte
    /// strings become `{"$bytes": "<hex>"}`; tags 1 (time), 32 (URL) and 37 (UUID) become text;
    /// other tags `{"$tag": n, "value": …}`; non-text map keys are written as their JSON text.
    init(_ value: CBORValue) {
        switch value {
        case .unsigned(let n): self = n <= UInt64(Int64.max) ? .int(Int64(n)) : .uint(n)
        case .negative(let n): self = n <= UInt64(Int64.max) ? .int(-1 - Int64(n)) : .string("-\(n) - 1")
        case .bytes(let bytes): self = .object([("$bytes", .string(bytes.map { hexByte($0) }.joined()))])
        case .text(let text): self = .string(text)
        case .array(let items): self = .array(items.map(JSON.init))
        case .map(let entries):
            self = .object(
                entries.map { entry in
                    if case .text(let key) = entry.key { return (key, JSON(entry.value)) }
                    return (JSON(entry.key).text, JSON(entry.value))
                })
        case .tagged(1, let inner):
            if let seconds = inner.int64 { self = .string(iso8601(milliseconds: seconds * 1000)); return }
            if case .float(let seconds) = inner, seconds.isFinite, abs(seconds) < 9e15 {
                self = .string(iso8601(milliseconds: Int64((seconds * 1000).rounded())))
                return
            }
            self = .object([("$tag", .int(1)), ("value", JSON(inner))])
        case .tagged(32, .text(let url)): self = .string(url)
        case .tagged(37, .bytes(let bytes)) where bytes.count == 16:
            let uuid = bytes.withUnsafeBytes { UUID(uuid: $0.loadUnaligned(as: uuid_t.self)) }
            self = .string(uuid.uuidString)
        case .tagged(let tag, let inner): self = .object([("$tag", .uint(tag)), ("value", JSON(inner))])
        case .bool(let flag): self = .bool(flag)
        case .null, .undefined: self = .null
        case .simple(let n): self = .object([("$simple", .int(Int64(n)))])
        case .float(let d): self = .double(d)
        }
    }
}

func hexByte(_ byte: UInt8) -> String { (byte < 16 ? "0" : "") + String(byte, radix: 16) }
func hexString(_ bytes: some Sequence<UInt8>) -> String { bytes.map(hexByte).joined() }

/// Milliseconds since 1970 as ISO 8601 in UTC, e.g. `2026-11-22T21:14:38.123Z`.
func iso8601(milliseconds: Int64) -> String {
    var seconds = time_t(milliseconds.dividedRoundingDown(by: 1000))
    let millis = Int(milliseconds - Int64(seconds) * 1000)
    var parts = tm()
    guard gmtime_r(&seconds, &parts) != nil else { return "\(milliseconds) ms" }
    func pad(_ n: Int32, _ width: Int) -> String {
        let text = String(n)
        return String(repeating: "0", count: max(0, width - text.count)) + text
    }
    return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
        + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(millis), 3))Z"
}

extension Int64 {
    fileprivate func dividedRoundingDown(by divisor: Int64) -> Int64 {
        let q = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? q - 1 : q
    }
}

/// Bytes for people: `512 B`, `8.0 KiB`, `12.3 MiB`, `1.5 GiB`.
func byteSize(_ bytes: Int) -> String {
    if bytes < 1024 { return "\(bytes) B" }
    let units = ["KiB", "MiB", "GiB", "TiB"]
    var value = Double(bytes) / 1024
    var unit = 0
    while value >= 1024 && unit < units.count - 1 {
        value /= 1024
        unit += 1
    }
    return String(format: "%.1f %@", value, units[unit])
}

// MARK: - Terminal

/// Where output goes and how it looks: colour only on a terminal and never with NO_COLOR.
enum Terminal {
    static let stdoutIsTerminal = isatty(1) == 1
    static let stderrIsTerminal = isatty(2) == 1
    static let colour = stdoutIsTerminal && getenv("NO_COLOR") == nil

    static func bold(_ text: String) -> String { colour ? "\u{1B}[1m\(text)\u{1B}[0m" : text }
    static func red(_ text: String) -> String { colour ? "\u{1B}[31m\(text)\u{1B}[0m" : text }
    static func green(_ text: String) -> String { colour ? "\u{1B}[32m\(text)\u{1B}[0m" : text }
}

/// Writes to standard output through a buffer (printing a million lines one by one is slow).
final class Output {
    nonisolated(unsafe) static let standard = Output()
    private var buffer: [UInt8] = []

    func line(_ text: String) {
        buffer.append(contentsOf: text.utf8)
        buffer.append(0x0A)
        if buffer.count >= 1 << 16 { flush() }
    }

    func flush() {
        var offset = 0
        while offset < buffer.count {
            let written = buffer.withUnsafeBytes { write(1, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 {
                if errno == EINTR { continue }
                break  // a closed pipe (e.g. `| head`): nothing more to say
            }
            offset += written
        }
        buffer.removeAll(keepingCapacity: true)
    }
}

func say(_ text: String) { Output.standard.line(text) }

func printError(_ text: String) {
    Output.standard.flush()
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

/// A table with aligned columns; the header in bold on a terminal.
struct Table {
    var header: [String]
    var rows: [[String]] = []

    init(_ header: String...) { self.header = header }

    mutating func add(_ row: [String]) { rows.append(row) }

    func print() {
        var widths = header.map(\.count)
        for row in rows {
            for (index, cell) in row.enumerated() where index < widths.count {
                widths[index] = max(widths[index], cell.count)
            }
        }
        func render(_ cells: [String]) -> String {
            cells.enumerated().map { index, cell in
                index == cells.count - 1 ? cell : cell + String(repeating: " ", count: widths[index] - cell.count)
            }.joined(separator: "  ")
        }
        say(Terminal.bold(render(header)))
        for row in rows { say(render(row)) }
    }
}

/// A progress line on standard error for long operations, on a terminal only.
struct Progress {
    let label: String
    let total: Int
    let enabled: Bool
    private var lastShown = 0

    init(_ label: String, total: Int) {
        self.label = label
        self.total = total
        enabled = Terminal.stderrIsTerminal && total >= 100_000
    }

    mutating func update(_ done: Int) {
        guard enabled, done - lastShown >= total / 100 || done == total else { return }
        lastShown = done
        let percent = total == 0 ? 100 : done * 100 / total
        let bar = String(repeating: "#", count: percent / 4) + String(repeating: ".", count: 25 - percent / 4)
        FileHandle.standardError.write(Data("\r\(label) [\(bar)] \(done)/\(total)".utf8))
    }

    func finish() {
        guard enabled else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
    }
}
