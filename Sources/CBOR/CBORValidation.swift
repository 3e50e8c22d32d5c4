extension CBORValue {
    /// Checks that `buffer` holds exactly one well-formed data item — every length within the
    /// input, nesting within `maxDepth`, text strings valid UTF-8, no map with two equal keys, no
    /// trailing bytes — without building it, so that a tool can check millions of payloads
    /// quickly. It accepts exactly what ``init(decoding:maxDepth:)-(UnsafeRawBufferPointer,_)`` accepts.
    ///
    /// When the item is a definite-length map, `topLevelKey` is called with each of its keys in order: the UTF-8
    /// bytes of a definite text key, or `nil` for any other key.
    ///
    /// - Returns: the item's major type (5 for a map).
    /// - Throws: ``CBORDecodingError`` with the offset of the first problem, or what `topLevelKey` throws.
    @discardableResult
    public static func validate(
        _ buffer: UnsafeRawBufferPointer,
        maxDepth: Int = CBORDecoder.defaultMaxDepth,
        topLevelKey: (UnsafeRawBufferPointer?) throws -> Void = { _ in }
    ) throws -> UInt8 {
        try validate(buffer, maxDepth: maxDepth) { (key: CBORTopLevelKey) in
            if case .text(let bytes) = key { try topLevelKey(bytes) } else { try topLevelKey(nil) }
        }
    }

    /// ``validate(_:maxDepth:topLevelKey:)``, telling the top-level map's keys apart: a definite
    /// text key's UTF-8 bytes, an unsigned integer's value, or another kind of key.
    @discardableResult
    package static func validate(
        _ buffer: UnsafeRawBufferPointer, maxDepth: Int = CBORDecoder.defaultMaxDepth,
        topLevel: (CBORTopLevelKey) throws -> Void
    ) throws -> UInt8 {
        let reader = Reader(buffer, maxDepth: maxDepth)
        let head = try reader.head(at: 0)
        let end: Int
        if head.major == 5 && !head.isIndefinite {
            var position = head.contentOffset
            let entries = try reader.checkLength(head.argument, units: 2, from: position)
            end = try withUnsafeTemporaryAllocation(of: Int.self, capacity: entries) { keys in
                for entry in 0..<entries {
                    keys[entry] = position
                    let key = try reader.head(at: position)
                    if key.major == 3 && !key.isIndefinite {
                        let length = try reader.checkLength(key.argument, from: key.contentOffset)
                        let bytes = reader.bytes(from: key.contentOffset, count: length)
                        guard isValidUTF8(bytes) else { throw CBORDecodingError(.invalidUTF8, at: position) }
                        try topLevel(.text(bytes))
                        position = key.contentOffset + length
                    } else {
                        try topLevel(key.major == 0 ? .number(key.argument) : .other)
                        position = try reader.skip(at: position, depth: 1, validating: true)
                    }
                    position = try reader.skip(at: position, depth: 1, validating: true)
                }
                try reader.checkDistinctKeys(keys, ofMapAt: 0)
                return position
            }
        } else {
            end = try reader.skip(at: 0, validating: true)
        }
        guard end == buffer.count else { throw CBORDecodingError(.trailingBytes(count: buffer.count - end), at: end) }
        return head.major
    }
}

/// A key of a payload's top-level map, as ``CBORValue/validate(_:maxDepth:topLevel:)`` tells it.
package enum CBORTopLevelKey {
    /// A definite-length text key: its UTF-8 bytes.
    case text(UnsafeRawBufferPointer)
    /// An unsigned integer key.
    case number(UInt64)
    /// Any other key.
    case other
}
