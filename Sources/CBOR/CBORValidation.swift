extension CBORValue {
    /// Checks that `buffer` holds exactly one well-formed data item — every length within the
    /// input, nesting within `maxDepth`, text strings valid UTF-8, no trailing bytes — without
    /// building it, so that a tool can check millions of payloads quickly.
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
        let reader = Reader(buffer, maxDepth: maxDepth)
        let head = try reader.head(at: 0)
        let end: Int
        if head.major == 5 && !head.isIndefinite {
            var position = head.contentOffset
            let entries = try reader.checkLength(head.argument, units: 2, from: position)
            for _ in 0..<entries {
                let key = try reader.head(at: position)
                if key.major == 3 && !key.isIndefinite {
                    let length = try reader.checkLength(key.argument, from: key.contentOffset)
                    let bytes = reader.bytes(from: key.contentOffset, count: length)
                    guard isValidUTF8(bytes) else { throw CBORDecodingError(.invalidUTF8, at: position) }
                    try topLevelKey(bytes)
                    position = key.contentOffset + length
                } else {
                    try topLevelKey(nil)
                    position = try reader.validate(at: position, depth: 1)
                }
                position = try reader.validate(at: position, depth: 1)
            }
            end = position
        } else {
            end = try reader.validate(at: 0, depth: 0)
        }
        guard end == buffer.count else { throw CBORDecodingError(.trailingBytes(count: buffer.count - end), at: end) }
        return head.major
    }
}

extension Reader {
    /// Like ``skip(at:depth:)``, and also checks that text strings are valid UTF-8.
    func validate(at offset: Int, depth: Int) throws -> Int {
        guard depth <= maxDepth else { throw CBORDecodingError(.tooDeep(limit: maxDepth), at: offset) }
        let head = try head(at: offset)
        switch head.major {
        case 3 where !head.isIndefinite:
            let length = try checkLength(head.argument, from: head.contentOffset)
            guard isValidUTF8(bytes(from: head.contentOffset, count: length)) else { throw CBORDecodingError(.invalidUTF8, at: offset) }
            return head.contentOffset + length
        case 3:
            var valid = true
            try withStringContent(head) { valid = isValidUTF8($0) }
            guard valid else { throw CBORDecodingError(.invalidUTF8, at: offset) }
            return try skip(at: offset, depth: depth)
        case 4, 5:
            let perEntry = head.major == 5 ? 2 : 1
            var position = head.contentOffset
            if head.isIndefinite {
                while try !isBreak(at: position) {
                    for _ in 0..<perEntry {
                        if try isBreak(at: position) { throw CBORDecodingError(.unexpectedBreak, at: position) }
                        position = try validate(at: position, depth: depth + 1)
                    }
                }
                return position + 1
            }
            let items = try checkLength(head.argument, units: UInt64(perEntry), from: position) * perEntry
            for _ in 0..<items { position = try validate(at: position, depth: depth + 1) }
            return position
        case 6:
            return try validate(at: head.contentOffset, depth: depth + 1)
        default:
            return try skip(at: offset, depth: depth)
        }
    }
}
