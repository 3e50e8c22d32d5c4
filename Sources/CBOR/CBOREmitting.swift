#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

// The writing side of the generated code's fast path (CBORScanning.swift has the reading side and
// what both decline): a map written in one go by property number, in the bytes the general
// encoder writes for the same entries.

/// Writes one map by the property numbers of a ``CBORPropertyTable``; made by a
/// ``CBOREmitSession``. Writing a property twice, one without a key, or a number of entries
/// other than announced makes the emitter decline.
package struct CBORFieldEmitter: ~Copyable {
    private let writer: Writer
    // Unowned: the session keeps the table alive for the emitter's whole life, which cannot
    // outlast the call (the emitter cannot be copied, and only a session makes one). A strong
    // reference would cost two atomic operations per record. (Not the writer: its methods are
    // called, and calls through an unowned reference retain it each time.)
    private unowned(unsafe) let table: CBORPropertyTable
    /// The properties with keys, in the order the encoder writes them (the table's memory:
    /// valid while the table is, which the emitter holds).
    package let propertyOrder: UnsafeBufferPointer<Int>
    private var announced = -1
    private var written = 0
    private var seen: UInt64 = 0
    private var declined = false

    init(writer: Writer, table: CBORPropertyTable, deterministic: Bool) {
        self.writer = writer
        self.table = table
        self.propertyOrder = UnsafeBufferPointer(deterministic ? table.deterministicOrder : table.propertyOfField)
    }

    var isComplete: Bool { !declined && written == announced }

    package func hasKey(_ property: Int) -> Bool {
        property >= 0 && property < table.properties.count && table.properties[property].field >= 0
    }

    package mutating func beginMap(count: Int) {
        // Once, and before any entry: a head written after entries could still match their number.
        guard announced < 0, written == 0, count >= 0 else { declined = true; return }
        announced = count
        writer.head(5, UInt64(count))
    }

    /// Writes the property's key; `false` (and declined) when it cannot be written.
    @inline(__always)
    private mutating func key(_ property: Int) -> Bool {
        // (No check of `declined` or of the map's head here: either one wrong leaves the emitter
        // incomplete, and its bytes are then dropped.)
        let properties = table.properties
        guard UInt(bitPattern: property) < UInt(properties.count) else { declined = true; return false }
        let key = properties.baseAddress.unsafelyUnwrapped[property]
        let bit: UInt64 = 1 &<< UInt64(truncatingIfNeeded: key.field)
        guard key.field >= 0, seen & bit == 0 else { declined = true; return false }
        seen |= bit
        written += 1
        if key.encoded.count <= 8 {
            writer.append(word: key.word, count: key.encoded.count)
        } else {
            writer.append(key.encoded)
        }
        return true
    }

    package mutating func emit(_ value: Bool, property: Int) { if key(property) { writer.append(value ? 0xF5 : 0xF4) } }
    package mutating func emit(_ value: String, property: Int) { if key(property) { writer.text(value) } }
    package mutating func emit(_ value: Double, property: Int) { if key(property) { writer.double(value) } }
    package mutating func emit(_ value: Float, property: Int) { if key(property) { writer.double(Double(value)) } }
    package mutating func emit(_ value: Int, property: Int) { if key(property) { writer.int(Int64(value)) } }
    package mutating func emit(_ value: Int32, property: Int) { if key(property) { writer.int(Int64(value)) } }
    package mutating func emit(_ value: Int64, property: Int) { if key(property) { writer.int(value) } }
    package mutating func emit(_ value: UInt64, property: Int) { if key(property) { writer.head(0, value) } }
}

extension CBOREncoder {
    /// Writes one map through `fill` by the property numbers of `table`, and hands its bytes to
    /// `body` (valid only inside it). When `fill` returns `false` or leaves the map other than it
    /// announced, nothing is handed to `body`: `otherwise` runs instead (to encode the ordinary
    /// way) and its result is returned.
    ///
    /// The bytes are those the general encoder writes for the same entries: keys in the order of
    /// their encoding when ``deterministic``, else in property order.
    package func emitFields<R>(
        table: CBORPropertyTable, _ fill: (inout CBORFieldEmitter) -> Bool,
        reading body: (UnsafeRawBufferPointer) throws -> R, otherwise: () throws -> R
    ) throws -> R {
        // (No optional result: a generic caller would look up the metadata of `R?` on every call.)
        try withFieldEmitting(table: table) { session in
            guard let bytes = session.emit(fill) else { return try otherwise() }
            return try body(bytes)
        }
    }

    /// Runs `body` with a session that writes maps by the property numbers of `table`, one
    /// after another into one buffer: for many records in a row, the buffer is found and
    /// prepared once rather than per record.
    package func withFieldEmitting<R>(
        table: CBORPropertyTable, _ body: (inout CBOREmitSession) throws -> R
    ) rethrows -> R {
        try ThreadWriter.with { writer in
            var session = CBOREmitSession(writer: writer, table: table, deterministic: deterministic)
            return try body(&session)
        }
    }
}

/// Writes maps, one at a time, through ``CBORFieldEmitter``s that share one buffer; made by
/// ``CBOREncoder/withFieldEmitting(table:_:)`` and valid only inside it.
package struct CBOREmitSession: ~Copyable {
    private let writer: Writer
    // Unowned for the emitter's reason: `withFieldEmitting` keeps the table alive for the
    // session's whole life, which cannot outlast the call.
    private unowned(unsafe) let table: CBORPropertyTable
    private let deterministic: Bool

    fileprivate init(writer: Writer, table: CBORPropertyTable, deterministic: Bool) {
        self.writer = writer
        self.table = table
        self.deterministic = deterministic
    }

    /// Writes one map through `fill`, and returns its bytes: valid until the next `emit` or the
    /// end of the session. `nil` when `fill` returns `false` or leaves the map other than it
    /// announced; the caller then encodes the ordinary way.
    package mutating func emit(_ fill: (inout CBORFieldEmitter) -> Bool) -> UnsafeRawBufferPointer? {
        writer.reset()
        var emitter = CBORFieldEmitter(writer: writer, table: table, deterministic: deterministic)
        guard fill(&emitter), emitter.isComplete else { return nil }
        return writer.withBytes { $0 }
    }
}

/// A writer per thread for ``CBOREncoder/withFieldEmitting(table:_:)``: records are
/// emitted without the encoder's shared state, whose lock costs four atomic operations a call.
enum ThreadWriter {
    static let slot: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { raw in
            #if canImport(Darwin)
            Unmanaged<Writer>.fromOpaque(raw).release()
            #else
            if let raw { Unmanaged<Writer>.fromOpaque(raw).release() }
            #endif
        }
        return key
    }()

    /// Runs `body` with this thread's writer, empty; with a writer of its own when the thread's is
    /// in use (`body` of an outer call emitting again).
    static func with<R>(_ body: (Writer) throws -> R) rethrows -> R {
        let writer: Writer
        if let raw = pthread_getspecific(slot) {
            writer = Unmanaged<Writer>.fromOpaque(raw).takeUnretainedValue()
        } else {
            writer = Writer()
            pthread_setspecific(slot, Unmanaged.passRetained(writer).toOpaque())
        }
        guard !writer.isLent else { return try body(Writer()) }
        writer.reset()
        writer.isLent = true
        defer {
            writer.isLent = false
            // A writer that grew for a large record does not keep its memory.
            if writer.capacity > 1 << 16 { writer.shrink() }
        }
        return try body(writer)
    }
}
