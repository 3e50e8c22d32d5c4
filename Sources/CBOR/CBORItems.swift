// Reading a payload in place, one data item at a time, for tools that turn millions of payloads
// into another format (`hoard dump` writes them as JSON) without building a `CBORValue` tree for
// each. Only for bytes `CBORValue.validate` accepted: this reads, it does not check.

/// One data item of a validated payload, without its children.
package enum CBORItem {
    /// An item without content: an integer, a simple value, a float (as ``CBORValue``, whose
    /// cases for these hold no references), and where the next item starts.
    case scalar(CBORValue, end: Int)
    /// A definite-length byte string's bytes.
    case bytes(UnsafeRawBufferPointer, end: Int)
    /// A definite-length text string's UTF-8 bytes (valid: `validate` checked them).
    case text(UnsafeRawBufferPointer, end: Int)
    /// A definite-length array: `count` items follow from `first`.
    case array(count: Int, first: Int)
    /// A definite-length map: `count` key and value pairs follow from `first`.
    case map(count: Int, first: Int)
    /// A tag; its item starts at `inner`.
    case tag(UInt64, inner: Int)
    /// An indefinite-length string, array or map, which a reader in place does not take apart:
    /// decode the payload as a ``CBORValue`` instead.
    case indefinite
}

extension CBORValue {
    /// The item at `offset` of `buffer`, which ``validate(_:maxDepth:topLevelKey:)`` accepted;
    /// `nil` if the bytes there are not an item after all (they were not validated).
    package static func item(in buffer: UnsafeRawBufferPointer, at offset: Int) -> CBORItem? {
        let reader = Reader(buffer, maxDepth: CBORDecoder.defaultMaxDepth)
        guard let head = try? reader.head(at: offset) else { return nil }
        if head.isIndefinite { return .indefinite }
        let end = head.contentOffset
        switch head.major {
        case 0: return .scalar(.unsigned(head.argument), end: end)
        case 1: return .scalar(.negative(head.argument), end: end)
        case 2, 3:
            guard let length = try? reader.checkLength(head.argument, from: end) else { return nil }
            let content = reader.bytes(from: end, count: length)
            return head.major == 2 ? .bytes(content, end: end + length) : .text(content, end: end + length)
        case 4:
            guard let count = try? reader.checkLength(head.argument, from: end) else { return nil }
            return .array(count: count, first: end)
        case 5:
            guard let count = try? reader.checkLength(head.argument, units: 2, from: end) else { return nil }
            return .map(count: count, first: end)
        case 6: return .tag(head.argument, inner: end)
        default:
            // The simple values and floats as `CBORValue`'s parser reads them.
            guard let (value, _) = try? parse(reader, at: offset) else { return nil }
            return .scalar(value, end: end)
        }
    }
}
