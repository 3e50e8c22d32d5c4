// Maps read front to back and written in one go by property number, for code generated per model
// type. Both sides do only the common case, and decline everything else:
//
// - the scanner reads a definite map of text keys that a table names, each at most once, with
//   values of the plain types (definite text strings, integers, floats, booleans, null), and
//   nothing after the map. It accepts a value only where the general decoder
//   (`decodeFields`, `decode`) would accept it and read the same value;
// - the emitter writes the bytes the general encoder writes for the same entries.
//
// A declined item goes to the general decoder or encoder, which also gives any error. So the
// scanner never needs an error of its own, and a malformed map costs no more than it did.
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

/// The key names of a model's properties, numbered by property: `names[p]` is the key of
/// property `p`, or `nil` when the key set has none for it.
package final class CBORPropertyTable: @unchecked Sendable {
    // @unchecked: immutable after init; the buffers are owned and never written again.

    /// The key names, by property number.
    package let names: [String?]
    /// A table of the names that exist, numbered by field.
    let keys: CBORKeyTable
    /// Per property: its field and encoded key.
    let properties: UnsafeMutableBufferPointer<PropertyKey>
    /// Per position in a deterministic map: the key expected there.
    let expected: UnsafeMutableBufferPointer<PropertyKey>
    /// The property of each field; fields are numbered in property order, so this is also the
    /// order of the properties with keys.
    let propertyOfField: UnsafeMutableBufferPointer<Int>
    /// The properties with keys, in the order of their encoded keys (a deterministic map's).
    let deterministicOrder: UnsafeMutableBufferPointer<Int>

    /// One property's key, with its first eight encoded bytes in a word, so that a short key is
    /// written with one store and compared with one load.
    struct PropertyKey {
        var property: Int
        /// `-1` when the property has no key.
        var field: Int
        /// The encoded key (head and UTF-8).
        var encoded: UnsafeRawBufferPointer
        /// Its first eight bytes (zeros after its end), in memory order.
        var word: UInt64
        /// The bits of `word` that hold the key; zero for a key longer than eight bytes, which
        /// then never matches by word (an encoded key has at least one byte, its head).
        var mask: UInt64
    }

    /// A table of `names`, or `nil` when generated code cannot use it: two properties with one
    /// key name, or more than 64 keys (the scanner tracks keys seen in one word).
    package init?(_ names: [String?]) {
        let present = names.indices.filter { names[$0] != nil }
        let keyNames = present.compactMap { names[$0] }
        guard keyNames.count <= 64, Set(keyNames).count == keyNames.count else { return nil }
        self.names = names
        let keys = CBORKeyTable(keyNames)
        self.keys = keys
        func key(_ property: Int, _ field: Int) -> PropertyKey {
            guard field >= 0 else {
                return PropertyKey(
                    property: property, field: -1, encoded: UnsafeRawBufferPointer(start: nil, count: 0), word: 0,
                    mask: 0)
            }
            let encoded = keys.encodedKey(field)
            var word: UInt64 = 0
            withUnsafeMutableBytes(of: &word) {
                $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: encoded.prefix(8)))
            }
            var mask: UInt64 = 0
            if encoded.count <= 8 {
                withUnsafeMutableBytes(of: &mask) { bytes in for i in 0..<encoded.count { bytes[i] = 0xFF } }
            } else {
                word = ~0  // with a zero mask: never equal
            }
            return PropertyKey(property: property, field: field, encoded: encoded, word: word, mask: mask)
        }
        var fieldOfProperty = [Int](repeating: -1, count: names.count)
        for (field, property) in present.enumerated() { fieldOfProperty[property] = field }
        properties = .allocate(capacity: names.count)
        for property in names.indices {
            properties.initializeElement(at: property, to: key(property, fieldOfProperty[property]))
        }
        expected = .allocate(capacity: present.count)
        for position in present.indices {
            let field = keys.ordered[position]
            expected.initializeElement(at: position, to: key(present[field], field))
        }
        propertyOfField = .allocate(capacity: present.count)
        _ = propertyOfField.initialize(from: present)
        deterministicOrder = .allocate(capacity: present.count)
        _ = deterministicOrder.initialize(from: keys.ordered.map { present[$0] })
    }

    deinit {
        deterministicOrder.deallocate()
        properties.deallocate()
        expected.deallocate()
        propertyOfField.deallocate()
    }
}

// MARK: - Reading

/// Reads one map front to back, by the property numbers of a ``CBORPropertyTable``. Every method
/// returns `nil` (or `false`) where the general decoder might read something else or refuse, and
/// the scanner then stays declined. What was read counts only if ``isComplete`` at the end.
///
/// ```swift
/// let table = CBORPropertyTable(["name", "age"])!   // property 0: "name", property 1: "age"
/// var name: String?, age: Int?
/// if var scanner = CBORFieldScanner(payload, table: table) {
///     while let property = scanner.nextProperty() {
///         if property == 0 { name = scanner.string() } else { age = scanner.int() }
///     }
///     if scanner.isComplete { /* use name and age */ }
/// }
/// // otherwise: decode the ordinary way
/// ```
package struct CBORFieldScanner {
    private let base: UnsafeRawPointer
    private let end: Int
    private var offset: Int
    /// Entries not yet read.
    private var remaining: Int
    private var position = 0
    /// Fields read so far, one bit each.
    private var seen: UInt64 = 0
    private var declined = false
    /// Unowned, as the bytes are: held strongly, it would cost two atomic operations per record.
    private unowned(unsafe) let table: CBORPropertyTable

    /// `nil` when `bytes` do not start with a definite map that could hold only `table`'s keys.
    /// The bytes and the table must stay valid while the scanner is used.
    package init?(_ bytes: UnsafeRawBufferPointer, table: CBORPropertyTable) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return nil }
        self.base = base
        self.end = bytes.count
        self.table = table
        self.offset = 0
        self.remaining = 0
        guard let head = readHead(), head.major == 5, head.argument <= UInt64(table.keys.count) else { return nil }
        remaining = Int(head.argument)
    }

    /// The major type and argument of the definite head at `offset`, moving past it.
    @inline(__always)
    private mutating func readHead() -> (major: UInt8, info: UInt8, argument: UInt64)? {
        guard offset < end else { return nil }
        let initial = base.load(fromByteOffset: offset, as: UInt8.self)
        let info = initial & 0x1F
        if info < 24 {
            offset += 1
            return (initial >> 5, info, UInt64(info))
        }
        guard info <= 27 else { return nil }  // indefinite lengths and reserved values
        let size = 1 &<< Int(info &- 24)
        guard size < end &- offset else { return nil }
        let argument: UInt64 =
            switch size {
            case 1: UInt64(base.load(fromByteOffset: offset &+ 1, as: UInt8.self))
            case 2: UInt64(UInt16(bigEndian: base.loadUnaligned(fromByteOffset: offset &+ 1, as: UInt16.self)))
            case 4: UInt64(UInt32(bigEndian: base.loadUnaligned(fromByteOffset: offset &+ 1, as: UInt32.self)))
            default: UInt64(bigEndian: base.loadUnaligned(fromByteOffset: offset &+ 1, as: UInt64.self))
            }
        offset &+= 1 &+ size
        return (initial >> 5, info, argument)
    }

    @inline(__always)
    private mutating func decline<T>() -> T? {
        declined = true
        return nil
    }

    /// The property of the next entry's key, `nil` after the last entry or when declining.
    package mutating func nextProperty() -> Int? {
        guard remaining > 0 && !declined else { return nil }
        // A deterministic map holds the keys in the table's order: the key expected at this
        // position, if short, is compared with one load. (The general case is a function of its
        // own, so that this one stays small.)
        #if _endian(little)
        if position < table.expected.count && end &- offset >= 8 {
            let expected = table.expected.baseAddress.unsafelyUnwrapped + position
            let bit: UInt64 = 1 &<< UInt64(truncatingIfNeeded: expected.pointee.field)
            if base.loadUnaligned(fromByteOffset: offset, as: UInt64.self) & expected.pointee.mask
                == expected.pointee.word && seen & bit == 0
            {
                seen |= bit
                offset &+= expected.pointee.encoded.count
                remaining &-= 1
                position &+= 1
                return expected.pointee.property
            }
        }
        #endif
        return nextPropertyInGeneral()
    }

    @inline(never)
    private mutating func nextPropertyInGeneral() -> Int? {
        guard let key = readHead(), key.major == 3, key.argument <= UInt64(end - offset) else { return decline() }
        let bytes = UnsafeRawBufferPointer(start: base + offset, count: Int(key.argument))
        guard let field = table.keys.field(matching: bytes, position: position) else { return decline() }
        return take(field: field, keyLength: bytes.count)
    }

    /// Moves past a key of `field`, `keyLength` bytes from `offset`, and returns its property.
    @inline(__always)
    private mutating func take(field: Int, keyLength: Int) -> Int? {
        let bit: UInt64 = 1 &<< UInt64(field)  // field < 64: the table has at most 64 keys
        guard seen & bit == 0 else { return decline() }  // the general decoder refuses the duplicate
        seen |= bit
        offset += keyLength
        remaining -= 1
        position += 1
        return table.propertyOfField[field]
    }

    /// Whether every entry was read and the bytes end with the map.
    package var isComplete: Bool { !declined && remaining == 0 && offset == end }

    /// Consumes `null` (or `undefined`, which the general decoder also reads as nil).
    package mutating func skipNull() -> Bool {
        guard !declined, offset < end else { return false }
        let byte = base.load(fromByteOffset: offset, as: UInt8.self)
        guard byte == 0xF6 || byte == 0xF7 else { return false }
        offset += 1
        return true
    }

    package mutating func bool() -> Bool? {
        guard !declined, offset < end else { return decline() }
        switch base.load(fromByteOffset: offset, as: UInt8.self) {
        case 0xF4: offset += 1; return false
        case 0xF5: offset += 1; return true
        default: return decline()
        }
    }

    package mutating func string() -> String? {
        guard !declined, let head = readHead(), head.major == 3, head.argument <= UInt64(end - offset) else {
            return decline()
        }
        let bytes = UnsafeRawBufferPointer(start: base + offset, count: Int(head.argument))
        // ASCII, the common case, needs no further check; the check is cheaper here than a call.
        var ascii = true
        var i = 0
        while i &+ 8 <= bytes.count {
            if bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self) & 0x8080_8080_8080_8080 != 0 {
                ascii = false; break
            }
            i &+= 8
        }
        while ascii && i < bytes.count {
            if bytes[i] >= 0x80 { ascii = false }
            i &+= 1
        }
        guard ascii || isValidUTF8(bytes) else { return decline() }
        offset += bytes.count
        return String(decoding: bytes.assumingMemoryBound(to: UInt8.self), as: UTF8.self)
    }

    package mutating func double() -> Double? {
        guard !declined, let head = readHead(),
            let value = exactDouble(major: head.major, info: head.info, argument: head.argument)
        else {
            return decline()
        }
        return value
    }

    package mutating func float() -> Float? {
        guard let value = double() else { return nil }
        if let float = Float(exactly: value) { return float }
        return value.isNaN ? .nan : decline()
    }

    package mutating func int() -> Int? { integer(Int.self) }
    package mutating func int32() -> Int32? { integer(Int32.self) }
    package mutating func int64() -> Int64? { integer(Int64.self) }
    package mutating func uint64() -> UInt64? { integer(UInt64.self) }

    /// As the general decoder's `decodeInteger`: a CBOR integer that fits `T` exactly.
    @inline(__always)
    private mutating func integer<T: FixedWidthInteger>(_ type: T.Type) -> T? {
        guard !declined, let head = readHead() else { return decline() }
        switch head.major {
        case 0:
            if let value = T(exactly: head.argument) { return value }
        case 1:
            // -1 - n without overflow; only signed types hold negatives.
            if T.isSigned, head.argument < UInt64(T.max) { return -1 - T(head.argument) }
            if T.isSigned, head.argument == UInt64(T.max) { return T.min }
        default:
            break
        }
        return decline()
    }
}

// MARK: - Writing

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
