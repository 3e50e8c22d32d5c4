import CBOR
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - JSON

/// A JSON value with ordered object members, written deterministically (one line, no spaces) by
/// ``JSONWriter``.
enum JSON: Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case uint(UInt64)
    case double(Double)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])
    /// A record's payload, written as ``JSONWriter/append(cbor:pretty:level:)`` maps CBOR to JSON.
    case cbor(CBORValue)

    static func == (lhs: JSON, rhs: JSON) -> Bool { lhs.text == rhs.text }

    /// One line of JSON.
    var text: String { render(pretty: false) }

    /// Indented JSON for people.
    var pretty: String { render(pretty: true) }

    private func render(pretty: Bool) -> String {
        let writer = JSONWriter()
        writer.append(self, pretty: pretty)
        return String(decoding: writer.bytes, as: UTF8.self)
    }
}

func hexString(_ bytes: some Collection<UInt8>) -> String {
    let writer = JSONWriter(capacity: bytes.count * 2)
    writer.append(hex: bytes)
    return String(decoding: writer.bytes, as: UTF8.self)
}

/// Milliseconds since 1970 as ISO 8601 in UTC, e.g. `2026-11-22T21:14:38.123Z`.
func iso8601(milliseconds: Int64) -> String {
    let writer = JSONWriter(capacity: 24)
    writer.append(iso8601: milliseconds)
    return String(decoding: writer.bytes, as: UTF8.self)
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

    func line(_ text: String) { line(text.utf8) }

    func line(_ bytes: some Collection<UInt8>) {
        buffer.append(contentsOf: bytes)
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

    let unit: String

    /// A progress line for `total` items (or bytes: `unit` names them after the counts).
    init(_ label: String, total: Int, unit: String = "") {
        self.label = label
        self.total = total
        self.unit = unit.isEmpty ? "" : " " + unit
        enabled = Terminal.stderrIsTerminal && total >= 100_000
    }

    mutating func update(_ done: Int) {
        guard enabled, done - lastShown >= total / 100 || done == total else { return }
        lastShown = done
        let percent = total == 0 ? 100 : done * 100 / total
        let bar = String(repeating: "#", count: percent / 4) + String(repeating: ".", count: 25 - percent / 4)
        FileHandle.standardError.write(Data("\r\(label) [\(bar)] \(done)/\(total)\(unit)".utf8))
    }

    func finish() {
        guard enabled else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
    }
}
