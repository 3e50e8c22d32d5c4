#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

// The keys of a map read and written by field number (CBORFields.swift): text names, or the
// numbers a CBORKeyNumbering gives them, encoded once per table.

/// Keys fixed in advance, numbered 0..<count (`names[n]` is field `n`): written as the names' text,
/// or with a ``CBORKeyNumbering`` as their numbers.
///
/// ```swift
/// let keys = CBORKeyTable(["ID", "NAME"])
/// let bytes = try CBOREncoder(deterministic: true).encodeFields(keys: keys) { map in
///     try map.encode(Int64(7), field: 0)
///     try map.encode("Ada", field: 1)
/// }
/// let name = try CBORDecoder().decodeFields(from: bytes, keys: keys) { map in try map.decode(String.self, field: 1) }
/// ```
///
/// The names should be distinct: of two equal names, decoding finds only the first, and
/// encoding both is refused as a duplicate key.
package final class CBORKeyTable: @unchecked Sendable {
    // @unchecked: immutable after init; `storage` is owned and never written again.

    /// The key names, by field number.
    package let names: [String]
    /// The number of fields.
    package let count: Int
    /// Every key encoded (head and UTF-8), back to back.
    private let storage: UnsafeMutableRawPointer
    private let spans: UnsafeMutableBufferPointer<KeyBytes>
    /// Field numbers in the order of their encoded keys, which is where a deterministic map has
    /// them: the field to try first for a map's n-th entry.
    let ordered: UnsafeMutableBufferPointer<Int>
    /// Whether two fields have the same name (then writing both is refused).
    private let hasEqualNames: Bool

    struct KeyBytes {
        /// The encoded key (head and UTF-8).
        var encoded: UnsafeRawBufferPointer
        /// Its UTF-8 content.
        var utf8: UnsafeRawBufferPointer
    }

    /// The numbering the keys are written in, or `nil` for text keys.
    package let numbering: CBORKeyNumbering?
    /// With a numbering, the field of each number (`-1`: none), numbers being below its count.
    private let fieldOfNumber: UnsafeMutableBufferPointer<Int>

    /// A table of `names`, field `n` being `names[n]`: keyed by the names as text, or with a
    /// `numbering` (which must number every name) by their numbers.
    package init(_ names: [String], numbering: CBORKeyNumbering? = nil) {
        self.names = names
        self.count = names.count
        self.numbering = numbering
        fieldOfNumber = .allocate(capacity: numbering?.names.count ?? 0)
        fieldOfNumber.initialize(repeating: -1)
        let writer = Writer()
        var bounds: [(start: Int, content: Int, end: Int)] = []
        for (field, name) in names.enumerated() {
            let start = writer.count
            if let numbering {
                // A name the numbering lacks gets a number no map holds: the key is never matched,
                // and writing it is refused (`checkDistinct`).
                let number = numbering.number(of: name)
                if let number, fieldOfNumber[number] < 0 { fieldOfNumber[number] = field }
                writer.head(0, UInt64(number ?? Int(UInt32.max)))
                bounds.append((start, start, writer.count))
            } else {
                writer.text(name)
                bounds.append((start, start + Writer.headLength(UInt64(name.utf8.count)), writer.count))
            }
        }
        let storage = UnsafeMutableRawPointer.allocate(byteCount: max(writer.count, 1), alignment: 8)
        writer.withBytes { if let bytes = $0.baseAddress { storage.copyMemory(from: bytes, byteCount: $0.count) } }
        self.storage = storage
        spans = .allocate(capacity: names.count)
        for (field, bound) in bounds.enumerated() {
            spans.initializeElement(
                at: field,
                to: KeyBytes(
                    encoded: UnsafeRawBufferPointer(start: storage + bound.start, count: bound.end - bound.start),
                    utf8: UnsafeRawBufferPointer(start: storage + bound.content, count: bound.end - bound.content)
                ))
        }
        ordered = .allocate(capacity: names.count)
        let spans = self.spans
        // Bytewise over the encoded keys, a key before its extensions: RFC 8949's deterministic order.
        let order = names.indices.sorted { a, b in
            let x = spans[a].encoded, y = spans[b].encoded
            for i in 0..<min(x.count, y.count) where x[i] != y[i] { return x[i] < y[i] }
            return x.count < y.count
        }
        _ = ordered.initialize(from: order)
        hasEqualNames = Set(names).count < names.count
        missesNumbers = numbering.map { numbering in names.contains { numbering.number(of: $0) == nil } } ?? false
    }

    /// Whether a name has no number in the table's numbering (then writing it is refused).
    private let missesNumbers: Bool

    /// Refuses a map in which two written fields have the same name, or a field whose name has no
    /// number.
    func checkDistinct(_ ranges: borrowing RawStack<FieldRange>, path: [any CodingKey]) throws {
        if missesNumbers, let numbering {
            for field in 0..<names.count where ranges[field].start >= 0 && numbering.number(of: names[field]) == nil {
                throw EncodingError.invalidValue(
                    names[field],
                    .init(codingPath: path, debugDescription: "CBOR: the key '\(names[field])' has no number"))
            }
        }
        guard hasEqualNames else { return }
        var written = Set<String>()
        for field in 0..<names.count where ranges[field].start >= 0 && !written.insert(names[field]).inserted {
            throw EncodingError.invalidValue(
                names[field],
                .init(codingPath: path, debugDescription: "CBOR: the map would hold the key '\(names[field])' twice"))
        }
    }

    deinit {
        storage.deallocate()
        spans.deallocate()
        ordered.deallocate()
        fieldOfNumber.deallocate()
    }

    /// The field whose key is `number`, in a numbered table.
    @inline(__always)
    func field(number: UInt64) -> Int? {
        guard number < UInt64(fieldOfNumber.count) else { return nil }
        let field = fieldOfNumber[Int(number)]
        return field >= 0 ? field : nil
    }

    @inline(__always)
    func encodedKey(_ field: Int) -> UnsafeRawBufferPointer { spans[field].encoded }

    /// The field whose key has the UTF-8 bytes `key`, trying the one expected at `position` first.
    @inline(__always)
    func field(matching key: UnsafeRawBufferPointer, position: Int) -> Int? {
        if position < ordered.count, Self.same(spans[ordered[position]].utf8, key) { return ordered[position] }
        for field in 0..<spans.count where Self.same(spans[field].utf8, key) { return field }
        return nil
    }

    @inline(__always)
    private static func same(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        let count = a.count
        guard count == b.count else { return false }
        // Empty keys compare equal without a read: their pointers may point just past the bytes.
        // A non-empty buffer has a base address.
        if count == 0 { return true }
        let x = a.baseAddress.unsafelyUnwrapped, y = b.baseAddress.unsafelyUnwrapped
        return x.load(as: UInt8.self) == y.load(as: UInt8.self) && (count == 1 || memcmp(x + 1, y + 1, count - 1) == 0)
    }
}
