// The decoder's unkeyed (arrays) and single-value containers (CBORDecoder.swift has the decoder
// and its state, CBORDecoder+Maps.swift the keyed container).

// MARK: - Arrays

struct UnkeyedDecoding: UnkeyedDecodingContainer {
    let state: DecoderState
    let codingPath: [any CodingKey]
    let count: Int?
    private(set) var currentIndex = 0
    private var position: Int

    init(state: DecoderState, head: Head, codingPath: [any CodingKey]) {
        self.state = state
        self.codingPath = codingPath
        self.position = head.contentOffset
        // The whole input was checked before decoding began, so the count fits the input.
        self.count = head.isIndefinite ? nil : Int(head.argument)
    }

    var isAtEnd: Bool {
        if let count { return currentIndex >= count }
        return (try? state.reader.isBreak(at: position)) ?? true
    }

    private mutating func next() throws -> Int {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                Any.self,
                .init(
                    codingPath: codingPath + [IndexKey(currentIndex)], debugDescription: "the array has no more items"))
        }
        let offset = position
        // Items sit one level below the array, whose depth is the length of its coding path.
        position = try state.reader.skip(at: position, depth: codingPath.count + 1)
        currentIndex += 1
        return offset
    }

    private mutating func primitive<T>(_ body: (DecoderState, Int) throws -> T) throws -> T {
        let index = currentIndex
        let offset = try next()
        do {
            return try body(state, offset)
        } catch {
            throw state.adding(IndexKey(index), to: error)
        }
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, try state.isNil(at: position) else { return false }
        _ = try next()
        return true
    }
    mutating func decode(_ type: Bool.Type) throws -> Bool { try primitive { try $0.decodeBool(at: $1) } }
    mutating func decode(_ type: String.Type) throws -> String { try primitive { try $0.decodeString(at: $1) } }
    mutating func decode(_ type: Double.Type) throws -> Double { try primitive { try $0.decodeDouble(at: $1) } }
    mutating func decode(_ type: Float.Type) throws -> Float { try primitive { try $0.decodeFloat(at: $1) } }
    mutating func decode(_ type: Int.Type) throws -> Int { try primitive { try $0.decodeInteger(type, at: $1) } }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try primitive { try $0.decodeInteger(type, at: $1) } }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try primitive { try $0.decodeInteger(type, at: $1) } }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try primitive { try $0.decodeInteger(type, at: $1) } }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try primitive { try $0.decodeInteger(type, at: $1) } }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try primitive { try $0.decodeInteger(type, at: $1) } }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try primitive { try $0.decodeInteger(type, at: $1) } }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try primitive { try $0.decodeInteger(type, at: $1) } }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try primitive { try $0.decodeInteger(type, at: $1) } }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try primitive { try $0.decodeInteger(type, at: $1) } }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let index = currentIndex
        let offset = try next()
        return try state.decodeNested(type, at: offset, key: IndexKey(index))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type
    ) throws -> KeyedDecodingContainer<NestedKey> {
        let index = currentIndex
        let offset = try next()
        state.path.append(IndexKey(index))
        defer { state.path.removeLast() }
        let head = try state.reader.head(at: offset)
        guard head.major == 5 else { throw state.mismatch([String: Int].self, at: offset, expected: "a map") }
        return KeyedDecodingContainer(
            KeyedDecoding<NestedKey>(
                state: state, map: try state.indexMap(head, at: offset), codingPath: codingPath + [IndexKey(index)]))
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let index = currentIndex
        let offset = try next()
        state.path.append(IndexKey(index))
        defer { state.path.removeLast() }
        let head = try state.reader.head(at: offset)
        guard head.major == 4 else { throw state.mismatch([Int].self, at: offset, expected: "an array") }
        return UnkeyedDecoding(state: state, head: head, codingPath: codingPath + [IndexKey(index)])
    }

    mutating func superDecoder() throws -> any Decoder {
        let index = currentIndex
        let separate = DecoderState(reader: state.reader, userInfo: state.userInfoStorage)
        separate.offset = try next()
        separate.path = codingPath + [IndexKey(index)]
        return separate
    }
}

// MARK: - Single values

struct SingleValueDecoding: SingleValueDecodingContainer {
    let state: DecoderState
    let offset: Int
    let codingPath: [any CodingKey]

    func decodeNil() -> Bool { (try? state.isNil(at: offset)) ?? false }
    func decode(_ type: Bool.Type) throws -> Bool { try state.decodeBool(at: offset) }
    func decode(_ type: String.Type) throws -> String { try state.decodeString(at: offset) }
    func decode(_ type: Double.Type) throws -> Double { try state.decodeDouble(at: offset) }
    func decode(_ type: Float.Type) throws -> Float { try state.decodeFloat(at: offset) }
    func decode(_ type: Int.Type) throws -> Int { try state.decodeInteger(type, at: offset) }
    func decode(_ type: Int8.Type) throws -> Int8 { try state.decodeInteger(type, at: offset) }
    func decode(_ type: Int16.Type) throws -> Int16 { try state.decodeInteger(type, at: offset) }
    func decode(_ type: Int32.Type) throws -> Int32 { try state.decodeInteger(type, at: offset) }
    func decode(_ type: Int64.Type) throws -> Int64 { try state.decodeInteger(type, at: offset) }
    func decode(_ type: UInt.Type) throws -> UInt { try state.decodeInteger(type, at: offset) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try state.decodeInteger(type, at: offset) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try state.decodeInteger(type, at: offset) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try state.decodeInteger(type, at: offset) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try state.decodeInteger(type, at: offset) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try state.decodeValue(type, at: offset) }
}
