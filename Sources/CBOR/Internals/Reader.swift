/// The head of a CBOR data item: major type, additional information and argument.
struct Head {
    /// The major type, 0–7.
    var major: UInt8
    /// The additional information, 0–31.
    var info: UInt8
    /// The argument (the value, length or count); 0 for indefinite lengths.
    var argument: UInt64
    /// Where the item's content starts (just after the head).
    var contentOffset: Int

    var isIndefinite: Bool { info == 31 }
}

/// Checked reads over untrusted bytes. Every read is bounds-checked; every length is checked
/// against the remaining input before anything is allocated for it. This is the one place that
/// parses heads, shared by the typed decoder and by `CBORValue`.
struct Reader {
    let base: UnsafeRawPointer?
    let count: Int
    let maxDepth: Int

    init(_ buffer: UnsafeRawBufferPointer, maxDepth: Int) {
        base = buffer.baseAddress
        count = buffer.count
        self.maxDepth = maxDepth
    }

    @inline(__always)
    func byte(at offset: Int) throws(CBORDecodingError) -> UInt8 {
        guard offset < count, let base else { throw CBORDecodingError(.truncated, at: offset) }
        return base.load(fromByteOffset: offset, as: UInt8.self)
    }

    /// Reads the head at `offset`. A break byte (0xFF) is returned as major 7, info 31.
    @inline(__always)
    func head(at offset: Int) throws(CBORDecodingError) -> Head {
        let initial = try byte(at: offset)
        let major = initial >> 5
        let info = initial & 0x1F
        switch info {
        case 0..<24:
            return Head(major: major, info: info, argument: UInt64(info), contentOffset: offset + 1)
        case 24...27:
            let size = 1 << Int(info - 24)
            guard offset + size < count, let base else { throw CBORDecodingError(.truncated, at: offset) }
            var value: UInt64 = 0
            for i in 1...size {
                value = value << 8 | UInt64(base.load(fromByteOffset: offset + i, as: UInt8.self))
            }
            if major == 7 && info == 24 && value < 32 {
                throw CBORDecodingError(.invalidSimpleValue(UInt8(value)), at: offset)
            }
            return Head(major: major, info: info, argument: value, contentOffset: offset + 1 + size)
        case 31:
            guard major >= 2 else { throw CBORDecodingError(.indefiniteLengthNotAllowed(major: major), at: offset) }
            guard major != 6 else { throw CBORDecodingError(.indefiniteLengthNotAllowed(major: major), at: offset) }
            return Head(major: major, info: 31, argument: 0, contentOffset: offset + 1)
        default:
            throw CBORDecodingError(.reservedAdditionalInformation(info), at: offset)
        }
    }

    /// Whether the byte at `offset` is a break.
    @inline(__always)
    func isBreak(at offset: Int) throws(CBORDecodingError) -> Bool {
        try byte(at: offset) == 0xFF
    }

    /// Checks that a definite length fits in the input after `offset` (each unit at least one byte).
    @inline(__always)
    func checkLength(_ length: UInt64, units: UInt64 = 1, from offset: Int) throws(CBORDecodingError) -> Int {
        let remaining = UInt64(count - min(offset, count))
        guard length <= remaining / units else { throw CBORDecodingError(.lengthExceedsInput(length), at: offset) }
        return Int(length)
    }

    /// Where the item at `offset` ends when its first byte tells (an integer, a short text, a
    /// simple value) and it fits in the input; `nil` sends the caller to ``skipQuickly(at:depth:)``,
    /// which also reports what is wrong. The values of most model fields take this path.
    @inline(__always)
    func endOfFlatItem(at offset: Int) -> Int? {
        guard offset < count, let base else { return nil }
        let initial = base.load(fromByteOffset: offset, as: UInt8.self)
        let end: Int
        switch initial {
        case 0x00...0x17, 0x20...0x37, 0xF4...0xF7: end = offset + 1
        case 0x18, 0x38: end = offset + 2
        case 0x19, 0x39: end = offset + 3
        case 0x1A, 0x3A: end = offset + 5
        case 0x1B, 0x3B: end = offset + 9
        case 0x60...0x77: end = offset + 1 + Int(initial & 0x1F)
        default: return nil
        }
        return end <= count ? end : nil
    }

    /// ``skip(at:depth:)`` with the common flat items (integers, simple values, floats, definite
    /// strings) handled inline.
    @inline(__always)
    func skipQuickly(at offset: Int, depth: Int) throws(CBORDecodingError) -> Int {
        let head = try head(at: offset)
        switch head.major {
        case 0, 1:
            return head.contentOffset
        case 2 where !head.isIndefinite, 3 where !head.isIndefinite:
            return head.contentOffset + (try checkLength(head.argument, from: head.contentOffset))
        case 7 where !head.isIndefinite:
            return head.contentOffset
        default:
            return try skip(at: offset, depth: depth)
        }
    }

    /// The offset just after the well-formed item at `offset`, checking its whole structure; with
    /// `validating`, also that every text string is valid UTF-8 and no map has two equal keys
    /// (for ``CBORValue/validate``, which accepts what ``CBORValue`` does).
    func skip(at offset: Int, depth: Int = 0, validating: Bool = false) throws(CBORDecodingError) -> Int {
        guard depth <= maxDepth else { throw CBORDecodingError(.tooDeep(limit: maxDepth), at: offset) }
        let head = try head(at: offset)
        switch head.major {
        case 0, 1:
            return head.contentOffset
        case 2, 3:
            let checksText = validating && head.major == 3
            if head.isIndefinite {
                var position = head.contentOffset
                var text: [UInt8] = []  // the chunks joined, only when checking text
                while try !isBreak(at: position) {
                    let chunk = try self.head(at: position)
                    guard chunk.major == head.major, !chunk.isIndefinite else {
                        throw CBORDecodingError(.invalidChunk, at: position)
                    }
                    let length = try checkLength(chunk.argument, from: chunk.contentOffset)
                    if checksText { text.append(contentsOf: bytes(from: chunk.contentOffset, count: length)) }
                    position = chunk.contentOffset + length
                }
                if checksText, !text.withUnsafeBytes(isValidUTF8) { throw CBORDecodingError(.invalidUTF8, at: offset) }
                return position + 1
            }
            let length = try checkLength(head.argument, from: head.contentOffset)
            if checksText, !isValidUTF8(bytes(from: head.contentOffset, count: length)) {
                throw CBORDecodingError(.invalidUTF8, at: offset)
            }
            return head.contentOffset + length
        case 4, 5:
            let perEntry = head.major == 5 ? 2 : 1
            var position = head.contentOffset
            let checksKeys = validating && perEntry == 2
            if head.isIndefinite {
                var keys: [Int] = []  // where the keys start, when checking them
                while try !isBreak(at: position) {
                    for item in 0..<perEntry {
                        if try isBreak(at: position) { throw CBORDecodingError(.unexpectedBreak, at: position) }
                        if checksKeys && item == 0 { keys.append(position) }
                        position = try skip(at: position, depth: depth + 1, validating: validating)
                    }
                }
                if checksKeys {
                    try keys.withUnsafeMutableBufferPointer { (keys) throws(CBORDecodingError) in
                        try checkDistinctKeys(keys, ofMapAt: offset)
                    }
                }
                return position + 1
            }
            let items = try checkLength(head.argument, units: UInt64(perEntry), from: position) * perEntry
            guard checksKeys else {
                for _ in 0..<items { position = try skip(at: position, depth: depth + 1, validating: validating) }
                return position
            }
            return try withUnsafeTemporaryAllocation(of: Int.self, capacity: items / 2) {
                (keys) throws(CBORDecodingError) -> Int in
                for entry in 0..<items / 2 {
                    keys[entry] = position
                    position = try skip(at: position, depth: depth + 1, validating: true)
                    position = try skip(at: position, depth: depth + 1, validating: true)
                }
                try checkDistinctKeys(keys, ofMapAt: offset)
                return position
            }
        case 6:
            return try skip(at: head.contentOffset, depth: depth + 1, validating: validating)
        default:  // 7: simple values, floats, break
            if head.isIndefinite { throw CBORDecodingError(.unexpectedBreak, at: offset) }
            return head.contentOffset
        }
    }

    /// Refuses two equal keys among the keys at `offsets` (well-formed, their own maps already
    /// checked), compared as values, as ``CBORValue`` does. In a small map of definite text keys,
    /// or of unsigned integer keys (a numbered payload), keys are compared pairwise, with nothing
    /// allocated; any other map goes through ``CBORValue``.
    func checkDistinctKeys(_ offsets: UnsafeMutableBufferPointer<Int>, ofMapAt offset: Int) throws(CBORDecodingError) {
        if offsets.count <= 24 {
            let allText = try withUnsafeTemporaryAllocation(of: UnsafeRawBufferPointer.self, capacity: offsets.count) {
                (texts) throws(CBORDecodingError) -> Bool in
                for i in offsets.indices {
                    guard let key = try definiteText(at: offsets[i]) else { return false }
                    for j in 0..<i where texts[j].count == key.count && texts[j].elementsEqual(key) {
                        throw CBORDecodingError(.duplicateKey(String(decoding: key, as: UTF8.self)), at: offset)
                    }
                    texts.initializeElement(at: i, to: key)
                }
                return true
            }
            if allText { return }
        }
        if offsets.count <= 64 {
            // Keys that are all unsigned integers (numbered payloads): compared by value, which
            // is what CBORValue compares, whatever the width of their heads.
            let allNumbers = try withUnsafeTemporaryAllocation(of: UInt64.self, capacity: offsets.count) {
                (numbers) throws(CBORDecodingError) -> Bool in
                for i in offsets.indices {
                    let key = try head(at: offsets[i])
                    guard key.major == 0 else { return false }
                    for j in 0..<i where numbers[j] == key.argument {
                        throw CBORDecodingError(.duplicateKey(CBORValue.keyName(.unsigned(key.argument))), at: offset)
                    }
                    numbers.initializeElement(at: i, to: key.argument)
                }
                return true
            }
            if allNumbers { return }
        }
        var keys: [CBORValue] = []
        keys.reserveCapacity(offsets.count)
        for key in offsets {
            // Without checking the keys' own maps again: that was done as they were read, and
            // doing it at every level would cost time exponential in the depth of nested keys.
            do {
                keys.append(try CBORValue.parse(self, at: key, checkingKeys: false).value)
            } catch let error as CBORDecodingError {
                throw error
            } catch {
                throw CBORDecodingError(.truncated, at: key)  // unreachable: parse throws CBORDecodingError only
            }
        }
        if let repeated = CBORValue.firstRepeatedKey(keys) {
            throw CBORDecodingError(.duplicateKey(CBORValue.keyName(repeated)), at: offset)
        }
    }

    /// The bytes of the definite text string at `offset`, or `nil` for any other item.
    @inline(__always)
    private func definiteText(at offset: Int) throws(CBORDecodingError) -> UnsafeRawBufferPointer? {
        let head = try head(at: offset)
        guard head.major == 3, !head.isIndefinite else { return nil }
        return bytes(from: head.contentOffset, count: try checkLength(head.argument, from: head.contentOffset))
    }

    /// The bytes of a definite string item's content.
    @inline(__always)
    func bytes(from offset: Int, count length: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: base.map { $0 + offset }, count: length)
    }

    /// The content of a (definite or indefinite) byte or text string at `head`, copied when chunked.
    func withStringContent<R>(_ head: Head, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        if !head.isIndefinite {
            let length = try checkLength(head.argument, from: head.contentOffset)
            return try body(bytes(from: head.contentOffset, count: length))
        }
        var joined: [UInt8] = []
        var position = head.contentOffset
        while try !isBreak(at: position) {
            let chunk = try self.head(at: position)
            guard chunk.major == head.major, !chunk.isIndefinite else {
                throw CBORDecodingError(.invalidChunk, at: position)
            }
            let length = try checkLength(chunk.argument, from: chunk.contentOffset)
            joined.append(contentsOf: bytes(from: chunk.contentOffset, count: length))
            position = chunk.contentOffset + length
        }
        return try joined.withUnsafeBytes(body)
    }

    /// A text string's content as a `String`, rejecting invalid UTF-8.
    func string(_ head: Head, at offset: Int) throws -> String {
        try withStringContent(head) { raw throws(CBORDecodingError) in
            guard isValidUTF8(raw) else { throw CBORDecodingError(.invalidUTF8, at: offset) }
            return String(decoding: raw, as: UTF8.self)
        }
    }
}

// MARK: - Half-precision floats

/// Converts IEEE 754 half-precision bits to a `Double`, exactly.
/// The `Double` a head stands for, as every reader of numbers takes it: a float of any width, or
/// an integer that a `Double` holds exactly; `nil` for anything else.
@inline(__always)
func exactDouble(major: UInt8, info: UInt8, argument: UInt64) -> Double? {
    switch (major, info) {
    case (7, 25): doubleFromHalf(UInt16(argument))
    case (7, 26): Double(Float(bitPattern: UInt32(argument)))
    case (7, 27): Double(bitPattern: argument)
    case (0, _) where argument <= 1 << 53: Double(argument)
    case (1, _) where argument < 1 << 53: -1 - Double(argument)
    default: nil
    }
}

func doubleFromHalf(_ bits: UInt16) -> Double {
    let sign: Double = bits & 0x8000 != 0 ? -1 : 1
    let exponent = Int((bits >> 10) & 0x1F)
    let mantissa = Double(bits & 0x3FF)
    switch exponent {
    case 0: return sign * mantissa * 0x1p-24
    case 31: return mantissa == 0 ? sign * .infinity : .nan
    default: return sign * (1 + mantissa / 1024) * Double(sign: .plus, exponent: exponent - 15, significand: 1)
    }
}

/// The half-precision bits of `value` when it converts exactly, else `nil`.
func halfBits(exactly value: Double) -> UInt16? {
    if value.isNaN { return 0x7E00 }
    let sign: UInt16 = value.sign == .minus ? 0x8000 : 0
    if value.isInfinite { return sign | 0x7C00 }
    if value == 0 { return sign }
    let magnitude = abs(value)
    // Normal halves: 2^-14 ... 65504, with 10 mantissa bits.
    if magnitude >= 0x1p-14 && magnitude <= 65504 {
        let exponent = magnitude.exponent  // unbiased
        let scaled = magnitude.significand * 1024  // 1024 ... 2047.x
        guard scaled == scaled.rounded(.towardZero) else { return nil }
        return sign | UInt16(exponent + 15) << 10 | (UInt16(scaled) - 1024)
    }
    // Subnormal halves: multiples of 2^-24 below 2^-14.
    if magnitude < 0x1p-14 {
        let units = magnitude * 0x1p24
        guard units == units.rounded(.towardZero), units >= 1 else { return nil }
        return sign | UInt16(units)
    }
    return nil
}
