// Maps whose keys are numbers standing for names: a storage format can write a small unsigned
// integer where a text key would spell the name in every record, when the names are fixed and
// known to every reader (a schema). The numbering turns the top-level map of a payload from one
// keying into the other; key tables built with it (`CBORKeyTable`, `CBORPropertyTable`) read and
// write numbered maps directly.

/// Names numbered 0..<count: `names[n]` is key `n`.
///
/// ```swift
/// let numbering = CBORKeyNumbering(["EMAIL", "NAME"])
/// let numbered = try numbering.numbered(textKeyedMap)   // {"NAME": "Ada"} becomes {1: "Ada"}
/// let named = try numbering.named(numbered)              // and back
/// ```
package final class CBORKeyNumbering: Sendable {
    /// The names, by number.
    package let names: [String]
    private let numberOfName: [String: Int]
    /// Each name as an encoded text key, by number.
    private let encodedNames: [[UInt8]]
    /// Each number's place among the encoded names in bytewise order (a deterministic map's).
    private let rankOfNumber: [Int]

    /// A numbering of `names`, which must be distinct (a repeated name keeps its first number).
    package init(_ names: [String]) {
        self.names = names
        var numbers: [String: Int] = [:]
        for (number, name) in names.enumerated() where numbers[name] == nil { numbers[name] = number }
        numberOfName = numbers
        let encoded = names.map { name in
            let writer = Writer()
            writer.text(name)
            return writer.toArray()
        }
        encodedNames = encoded
        var rank = [Int](repeating: 0, count: names.count)
        for (place, number) in names.indices.sorted(by: { encoded[$0].lexicographicallyPrecedes(encoded[$1]) })
            .enumerated()
        {
            rank[number] = place
        }
        rankOfNumber = rank
    }

    /// The number of `name`, if it is one of the names.
    package func number(of name: String) -> Int? { numberOfName[name] }

    /// The map in `payload` (exactly one definite-length map whose keys are text strings, each one
    /// of the names) with each key replaced by its number, entries in increasing order of number.
    /// Values are copied as they are.
    ///
    /// - Throws: ``CBORKeyingError`` naming the key or the problem; ``CBORDecodingError`` for
    ///   bytes that are not well-formed.
    package func numbered(_ payload: UnsafeRawBufferPointer) throws -> [UInt8] {
        try rekeyed(payload) { reader, offset, head in
            guard head.major == 3, !head.isIndefinite else {
                throw CBORKeyingError("a key at byte offset \(offset) is not a text string")
            }
            let length = try reader.checkLength(head.argument, from: head.contentOffset)
            let name = String(decoding: reader.bytes(from: head.contentOffset, count: length), as: UTF8.self)
            guard let number = numberOfName[name] else {
                throw CBORKeyingError("the key '\(name)' is not one of the \(names.count) names \(names)")
            }
            return (number, number, head.contentOffset + length)
        } write: { writer, number in
            writer.head(0, UInt64(number))
        }
    }

    /// The numbered map in `payload` (exactly one definite-length map whose keys are unsigned
    /// integers below the names' count) with each number replaced by its name, entries in the
    /// bytewise order of their encoded keys (RFC 8949's deterministic order).
    ///
    /// - Throws: ``CBORKeyingError`` naming the key or the problem; ``CBORDecodingError`` for
    ///   bytes that are not well-formed.
    package func named(_ payload: UnsafeRawBufferPointer) throws -> [UInt8] {
        try rekeyed(payload) { reader, offset, head in
            guard head.major == 0 else {
                throw CBORKeyingError("a key at byte offset \(offset) is not an unsigned integer")
            }
            guard head.argument < UInt64(names.count) else {
                throw CBORKeyingError("the key \(head.argument) is not below the \(names.count) names \(names)")
            }
            let number = Int(head.argument)
            return (number, rankOfNumber[number], head.contentOffset)
        } write: { writer, number in
            encodedNames[number].withUnsafeBytes { writer.append($0) }
        }
    }

    /// The map in `payload` with its keys read by `key` (giving the key's number, its place in
    /// the output and where the key ends) and written by `write`.
    private func rekeyed(
        _ payload: UnsafeRawBufferPointer,
        key: (Reader, Int, Head) throws -> (number: Int, place: Int, end: Int),
        write: (Writer, Int) -> Void
    ) throws -> [UInt8] {
        let reader = Reader(payload, maxDepth: CBORDecoder.defaultMaxDepth)
        let head = try reader.head(at: 0)
        guard head.major == 5, !head.isIndefinite else {
            throw CBORKeyingError("the payload is not a definite-length map (major type \(head.major))")
        }
        let count = try reader.checkLength(head.argument, units: 2, from: head.contentOffset)
        var entries: [(place: Int, number: Int, value: Range<Int>)] = []
        entries.reserveCapacity(count)
        var seen = Set<Int>()
        var position = head.contentOffset
        for _ in 0..<count {
            let (number, place, keyEnd) = try key(reader, position, try reader.head(at: position))
            guard seen.insert(number).inserted else {
                throw CBORKeyingError("the map holds the key '\(names[number])' twice")
            }
            position = try reader.skip(at: keyEnd, depth: 1)
            entries.append((place, number, keyEnd..<position))
        }
        guard position == payload.count else {
            throw CBORDecodingError(.trailingBytes(count: payload.count - position), at: position)
        }
        entries.sort { $0.place < $1.place }
        let writer = Writer(capacity: payload.count + 16)
        writer.head(5, UInt64(count))
        for entry in entries {
            write(writer, entry.number)
            writer.append(UnsafeRawBufferPointer(rebasing: payload[entry.value]))
        }
        return writer.toArray()
    }
}

/// A map whose keys do not fit a ``CBORKeyNumbering``: a key that is not one of its names or
/// numbers, a key twice, or an item that is not a definite-length map.
package struct CBORKeyingError: Error, CustomStringConvertible, Sendable {
    /// What is wrong.
    package let description: String
    init(_ description: String) { self.description = description }
}
