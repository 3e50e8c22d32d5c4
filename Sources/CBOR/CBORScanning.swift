// Maps read front to back and written in one go by property number, for code generated per model
// type. Both sides do only the common case, and decline everything else:
//
// - the scanner reads a definite map of text keys (or numbers, with a numbering) that a table
//   names, each at most once, with values of the plain types (definite text strings, integers,
//   floats, booleans, null), and nothing after the map. It accepts a value only where the general
//   decoder (`decodeFields`, `decode`) would accept it and read the same value;
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
    package init?(_ names: [String?], numbering: CBORKeyNumbering? = nil) {
        let present = names.indices.filter { names[$0] != nil }
        let keyNames = present.compactMap { names[$0] }
        guard keyNames.count <= 64, Set(keyNames).count == keyNames.count else { return nil }
        // With a numbering, every name needs a number: one without would be written as no key.
        if let numbering, keyNames.contains(where: { numbering.number(of: $0) == nil }) { return nil }
        self.names = names
        let keys = CBORKeyTable(keyNames, numbering: numbering)
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
        guard let key = readHead() else { return decline() }
        if table.keys.numbering != nil {
            guard key.major == 0, let field = table.keys.field(number: key.argument) else { return decline() }
            return take(field: field, keyLength: 0)  // the head was the whole key
        }
        guard key.major == 3, key.argument <= UInt64(end - offset) else { return decline() }
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
