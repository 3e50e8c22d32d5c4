// Maps read and written by field number: for a coder that knows a model's key names ahead of
// time (a storage engine's schema), without Codable's keyed containers. The keys are matched
// against the table once per map instead of by string on every lookup; values are read and
// written by the same code, with the same checks, as through `Decoder` and `Encoder`.

/// The coding key of a field, for coding paths and errors.
struct FieldKey: CodingKey {
    let stringValue: String
    var intValue: Int? { nil }
    init(_ name: String) { stringValue = name }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

// MARK: - Reading

extension CBORDecoder {
    /// Reads the map in `buffer` (exactly one data item) by the field numbers of `keys`.
    ///
    /// The whole item is checked first, as ``decode(_:from:)-(_,UnsafeRawBufferPointer)`` checks
    /// it (structure, depth, duplicate keys, trailing bytes); keys the table does not name are
    /// ignored, as a keyed container ignores them. `reader` is valid only inside `body`.
    ///
    /// - Throws: ``CBORDecodingError`` for malformed bytes, `DecodingError.typeMismatch` when
    ///   the item is not a map, and whatever `body` throws.
    package func decodeFields<R>(
        from buffer: UnsafeRawBufferPointer, keys: CBORKeyTable, _ body: (CBORFieldReader) throws -> R
    ) throws -> R {
        let state = DecoderState.take(reader: Reader(buffer, maxDepth: maxDepth), userInfo: userInfoBox)
        defer { DecoderState.recycle(state) }
        let head = try state.reader.head(at: 0)
        guard head.major == 5 else { throw state.mismatch([String: Int].self, at: 0, expected: "a map") }
        state.fieldValues.append(-1, count: keys.count)
        let end: Int
        if let quick = try state.matchFields(head, keys: keys) {
            end = quick
        } else {
            // A key the table does not name, or one written unusually: index the map as a keyed
            // container would (every check included) and match what can be matched.
            for field in 0..<keys.count { state.fieldValues[field] = -1 }
            let map = try state.indexMap(head, at: 0)
            end = state.topLevelEnd ?? buffer.count  // indexMap sets it for the item at offset 0
            for position in 0..<map.count {
                let entry = state.entries[map.base + position]
                let field: Int?
                if keys.numbering != nil {
                    // Numbered keys: a text key names no field (as a key the table lacks).
                    field = entry.keyLength < 0 && entry.intKey >= 0 ? keys.field(number: UInt64(entry.intKey)) : nil
                } else if entry.keyLength >= 0 && entry.keyOffset >= 0 {
                    field = keys.field(
                        matching: state.reader.bytes(from: entry.keyOffset, count: entry.keyLength), position: position)
                } else if entry.keyLength == 0, var name = state.chunkedKeys[map.base + position] {
                    field = name.withUTF8 { keys.field(matching: UnsafeRawBufferPointer($0), position: position) }
                } else {
                    field = nil  // an integer key: no field has one
                }
                // The map has no duplicate keys (indexMap refused them), so no field is set twice.
                if let field { state.fieldValues[field] = entry.valueOffset }
            }
        }
        guard end == buffer.count else {
            throw CBORDecodingError(.trailingBytes(count: buffer.count - end), at: end)
        }
        return try body(CBORFieldReader(state: state, generation: state.generation, keys: keys))
    }

    /// ``decodeFields(from:keys:_:)-(UnsafeRawBufferPointer,_,_)`` over an array of bytes.
    package func decodeFields<R>(
        from bytes: [UInt8], keys: CBORKeyTable, _ body: (CBORFieldReader) throws -> R
    ) throws -> R {
        try bytes.withUnsafeBytes { try decodeFields(from: $0, keys: keys, body) }
    }
}

extension DecoderState {
    /// The common case in one pass: a definite map whose keys are all short definite text keys
    /// the table names. Notes each field's value offset and returns where the map ends, or `nil`
    /// (with some fields noted) as soon as an entry is not of that kind. It reads and checks what
    /// `indexMap` would, in the same order, so a malformed map gets the same error either way.
    func matchFields(_ head: Head, keys: CBORKeyTable) throws -> Int? {
        guard !head.isIndefinite else { return nil }
        let count = try reader.checkLength(head.argument, units: 2, from: head.contentOffset)
        let values = fieldValues.buffer(0..<keys.count)  // one bounds check for the loop
        var position = head.contentOffset
        let numbered = keys.numbering != nil
        for index in 0..<count {
            let initial = try reader.byte(at: position)
            let keyOffset: Int, keyLength: Int, found: Int?
            if numbered {
                // Numbers below 24 take one byte, up to 255 two (a model of more fields than that
                // takes the general path).
                if initial <= 0x17 {
                    (keyOffset, keyLength) = (position, 1)
                    found = keys.field(number: UInt64(initial))
                } else if initial == 0x18 {
                    let number = try reader.byte(at: position + 1)
                    guard number >= 24 else { return nil }  // not the shortest head: the general path
                    (keyOffset, keyLength) = (position, 2)
                    found = keys.field(number: UInt64(number))
                } else {
                    return nil
                }
            } else {
                guard initial >= 0x60 && initial <= 0x77 else { return nil }
                keyOffset = position + 1
                keyLength = try reader.checkLength(UInt64(initial & 0x1F), from: keyOffset)
                found = keys.field(matching: reader.bytes(from: keyOffset, count: keyLength), position: index)
            }
            guard let field = found else { return nil }
            // Two keys that name one field are the same key. (`field` is below `keys.count`,
            // which is how many values the caller made room for.)
            guard values[field] < 0 else { throw CBORDecodingError(.duplicateKey(keys.names[field]), at: 0) }
            let valueOffset = keyOffset + keyLength
            values[field] = valueOffset
            // Keys and values sit one level below the map.
            position = try reader.endOfFlatItem(at: valueOffset) ?? reader.skipQuickly(at: valueOffset, depth: 1)
        }
        return position
    }
}

/// The fields of one map being decoded, by the field numbers of a ``CBORKeyTable``; made by
/// ``CBORDecoder/decodeFields(from:keys:_:)-(UnsafeRawBufferPointer,_,_)`` and valid only inside its call.
///
/// Each method behaves as the same method of a keyed decoding container: a field the map does
/// not hold throws `DecodingError.keyNotFound`; values are checked and converted the same way.
package final class CBORFieldReader {
    let state: DecoderState
    let generation: Int
    let keys: CBORKeyTable

    init(state: DecoderState, generation: Int, keys: CBORKeyTable) {
        self.state = state
        self.generation = generation
        self.keys = keys
    }

    /// The key names, by field number.
    package var names: [String] { keys.names }

    /// Whether the map holds the field (with any value, `null` included).
    package func contains(field: Int) -> Bool {
        generation == state.generation && field >= 0 && field < keys.count && state.fieldValues[field] >= 0
    }

    @inline(__always)
    private func valueOffset(_ field: Int) throws -> Int {
        guard generation == state.generation else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: [], debugDescription: "a field reader was used after its decode call had ended"))
        }
        guard field >= 0, field < keys.count else {
            throw DecodingError.keyNotFound(
                FieldKey("#\(field)"),
                .init(
                    codingPath: [],
                    debugDescription: "field \(field) is not one of the key table's \(keys.count) fields"))
        }
        let offset = state.fieldValues[field]
        guard offset >= 0 else {
            throw DecodingError.keyNotFound(
                FieldKey(keys.names[field]),
                .init(codingPath: [], debugDescription: "no value for key '\(keys.names[field])' in the map"))
        }
        return offset
    }

    /// Runs a primitive decode; only when it fails is the field's key added to the error's path.
    @inline(__always)
    private func primitive<T>(_ field: Int, _ body: (Int) throws -> T) throws -> T {
        let offset = try valueOffset(field)
        do {
            return try body(offset)
        } catch {
            throw state.adding(FieldKey(keys.names[field]), to: error)
        }
    }

    package func decodeNil(field: Int) throws -> Bool { try state.isNil(at: try valueOffset(field)) }
    package func decode(_ type: Bool.Type, field: Int) throws -> Bool {
        try primitive(field) { try state.decodeBool(at: $0) }
    }
    package func decode(_ type: String.Type, field: Int) throws -> String {
        try primitive(field) { try state.decodeString(at: $0) }
    }
    package func decode(_ type: Double.Type, field: Int) throws -> Double {
        try primitive(field) { try state.decodeDouble(at: $0) }
    }
    package func decode(_ type: Float.Type, field: Int) throws -> Float {
        try primitive(field) { try state.decodeFloat(at: $0) }
    }
    package func decode(_ type: Int.Type, field: Int) throws -> Int {
        try primitive(field) { try state.decodeInteger(type, at: $0) }
    }
    package func decode(_ type: Int32.Type, field: Int) throws -> Int32 {
        try primitive(field) { try state.decodeInteger(type, at: $0) }
    }
    package func decode(_ type: Int64.Type, field: Int) throws -> Int64 {
        try primitive(field) { try state.decodeInteger(type, at: $0) }
    }
    package func decode(_ type: UInt64.Type, field: Int) throws -> UInt64 {
        try primitive(field) { try state.decodeInteger(type, at: $0) }
    }

    /// Any other value, through the decoder's `Decoder` (its coding path starts at the field).
    package func decode<T: Decodable>(_ type: T.Type, field: Int) throws -> T {
        let offset = try valueOffset(field)
        return try state.decodeNested(type, at: offset, key: FieldKey(keys.names[field]))
    }
}

// MARK: - Writing

extension CBOREncoder {
    /// Encodes one map whose entries `fields` writes by the field numbers of `keys`, and hands
    /// its bytes to `body` without copying them into an array (they are valid only inside `body`).
    ///
    /// The bytes are those of the same map written through `Encoder`: entries in the order they
    /// were written, or (``deterministic``) in the order of their encoded keys; a field written
    /// twice is refused. `writer` is valid only inside `fields`.
    package func encodeFields<R>(
        keys: CBORKeyTable, _ fields: (CBORFieldWriter) throws -> Void,
        reading body: (UnsafeRawBufferPointer) throws -> R
    ) throws -> R {
        try withState(prefix: nil) { state in
            // Values are written one after another as they come, and their ranges noted by field;
            // the map is then put together once, in the right order, with the keys the table has
            // ready: no key comparisons and no reordering of written entries.
            state.nextID += 1
            let token = state.nextID
            state.fieldsToken = token
            defer { state.fieldsToken = 0 }
            state.fieldRanges.removeAll(keepingUpTo: 1024)
            state.fieldRanges.append(FieldRange(start: -1, end: -1), count: keys.count)
            state.fieldOrder.removeAll(keepingUpTo: 1024)
            try fields(CBORFieldWriter(state: state, token: token, keys: keys))
            if state.failed, let failure = state.failure { throw failure }
            try keys.checkDistinct(state.fieldRanges, path: state.path)
            let map = state.scratch
            map.reset()
            map.head(5, UInt64(state.fieldOrder.count))
            func append(_ field: Int) {
                let range = state.fieldRanges[field]
                map.append(keys.encodedKey(field))
                map.append(
                    UnsafeRawBufferPointer(start: state.writer.base + range.start, count: range.end - range.start))
            }
            if deterministic {
                for field in keys.ordered where state.fieldRanges[field].start >= 0 { append(field) }
            } else {
                for position in 0..<state.fieldOrder.count { append(state.fieldOrder[position]) }
            }
            return try map.withBytes(body)
        }
    }

    /// Encodes one map whose entries `fields` writes by the field numbers of `keys`.
    package func encodeFields(keys: CBORKeyTable, _ fields: (CBORFieldWriter) throws -> Void) throws -> [UInt8] {
        try encodeFields(keys: keys, fields, reading: { Array($0) })
    }
}

/// Where one field's value lies in the encoder's buffer (`start == -1`: not written).
struct FieldRange {
    var start: Int
    var end: Int
}

/// The map being encoded, written by the field numbers of a ``CBORKeyTable``; made by
/// ``CBOREncoder/encodeFields(keys:_:)`` and valid only inside its call. Each method writes the
/// field's value, as a keyed encoding container's method of the same name does.
package final class CBORFieldWriter {
    let state: EncoderState
    /// `state.writer`, held here so that writing a value borrows it from this object instead of
    /// retaining it around every call (one atomic increment and decrement per field otherwise).
    let writer: Writer
    /// Which `encodeFields` call this writer belongs to.
    let token: Int
    let keys: CBORKeyTable

    init(state: EncoderState, token: Int, keys: CBORKeyTable) {
        self.state = state
        self.writer = state.writer
        self.token = token
        self.keys = keys
    }

    /// Checks the field and notes where its value starts.
    @inline(__always)
    private func begin(_ field: Int) throws {
        guard state.fieldsToken == token else {
            throw EncodingError.invalidValue(
                field,
                .init(codingPath: [], debugDescription: "CBOR: a field writer was used after its encode call had ended")
            )
        }
        guard field >= 0, field < keys.count else {
            throw EncodingError.invalidValue(
                field,
                .init(
                    codingPath: state.path,
                    debugDescription: "CBOR: field \(field) is not one of the key table's \(keys.count) fields"))
        }
        guard state.fieldRanges[field].start < 0 else {
            throw EncodingError.invalidValue(
                keys.names[field],
                .init(
                    codingPath: state.path,
                    debugDescription: "CBOR: the map would hold the key '\(keys.names[field])' twice"))
        }
        state.fieldRanges[field].start = writer.count
        state.fieldOrder.append(field)
    }

    /// Notes where the field's value ends.
    @inline(__always)
    private func end(_ field: Int) {
        state.fieldRanges[field].end = writer.count
    }

    package func encodeNil(field: Int) throws { try begin(field); writer.append(0xF6); end(field) }
    package func encode(_ value: Bool, field: Int) throws {
        try begin(field); writer.append(value ? 0xF5 : 0xF4); end(field)
    }
    package func encode(_ value: String, field: Int) throws { try begin(field); writer.text(value); end(field) }
    package func encode(_ value: Double, field: Int) throws { try begin(field); writer.double(value); end(field) }
    package func encode(_ value: Float, field: Int) throws {
        try begin(field); writer.double(Double(value)); end(field)
    }
    package func encode(_ value: Int, field: Int) throws { try begin(field); writer.int(Int64(value)); end(field) }
    package func encode(_ value: Int32, field: Int) throws { try begin(field); writer.int(Int64(value)); end(field) }
    package func encode(_ value: Int64, field: Int) throws { try begin(field); writer.int(value); end(field) }
    package func encode(_ value: UInt64, field: Int) throws { try begin(field); writer.head(0, value); end(field) }

    /// Any other value, through the encoder's `Encoder` (its coding path starts at the field).
    package func encode<T: Encodable>(_ value: T, field: Int) throws {
        try begin(field)
        try state.encodeNested(value, key: FieldKey(keys.names[field]))
        end(field)
    }
}
