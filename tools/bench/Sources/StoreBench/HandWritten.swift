// A hand-written codec for `Member`'s current key set (version 3 in record format 3: keys A, C, E,
// F, I, N numbered 0 to 5): the least work any model layer could do over the same record format
// and LMDB wrapper. It knows
// this one model and version and nothing else (no migration, no errors worth reading), so it is
// not a way to use Hoard: it is a reference that shows how much of a budget the record format
// and LMDB leave to the model layer (see BENCHMARKS.md).
import BenchModels

struct HandWrittenError: Error {}

/// Reads a CBOR head at `offset`: the major type and the argument (definite lengths only).
@inline(__always)
private func head(_ bytes: UnsafeRawBufferPointer, _ offset: inout Int) throws -> (major: UInt8, argument: UInt64) {
    guard offset < bytes.count else { throw HandWrittenError() }
    let initial = bytes[offset]
    offset += 1
    let info = initial & 31
    let size: Int
    switch info {
    case 0..<24: return (initial >> 5, UInt64(info))
    case 24: size = 1
    case 25: size = 2
    case 26: size = 4
    case 27: size = 8
    default: throw HandWrittenError()
    }
    guard offset + size <= bytes.count else { throw HandWrittenError() }
    var argument: UInt64 = 0
    for i in 0..<size { argument = argument << 8 | UInt64(bytes[offset + i]) }
    offset += size
    return (initial >> 5, argument)
}

private func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
    var i = 0
    while bytes.count - i >= 8 {
        if bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self) & 0x8080_8080_8080_8080 != 0 { return false }
        i += 8
    }
    while i < bytes.count {
        if bytes[i] >= 0x80 { return false }
        i += 1
    }
    return true
}

/// Decodes a version-3 `Member` payload; every key exactly once, strings checked as UTF-8.
func handWrittenDecode(_ payload: UnsafeRawBufferPointer) throws -> Member {
    var offset = 0
    let map = try head(payload, &offset)
    guard map.major == 5, map.argument == 6 else { throw HandWrittenError() }
    var id: Int64 = 0, name = "", email = "", age = 0, city = "", followers = 0
    var seen: UInt8 = 0
    for _ in 0..<6 {
        let key = try head(payload, &offset)
        guard key.major == 0 else { throw HandWrittenError() }
        let value = try head(payload, &offset)
        func integer() throws -> Int64 {
            guard value.argument <= UInt64(Int64.max) else { throw HandWrittenError() }
            switch value.major {
            case 0: return Int64(value.argument)
            case 1: return -1 - Int64(value.argument)
            default: throw HandWrittenError()
            }
        }
        func text() throws -> String {
            guard value.major == 3, value.argument <= UInt64(payload.count - offset) else { throw HandWrittenError() }
            let bytes = UnsafeRawBufferPointer(rebasing: payload[offset..<(offset + Int(value.argument))])
            offset += Int(value.argument)
            // ASCII needs no further check; anything else goes through the standard library's
            // validation (slower: it looks up generic metadata on every call).
            if isASCII(bytes) { return String(decoding: bytes, as: UTF8.self) }
            guard let string = String(validating: bytes, as: UTF8.self) else { throw HandWrittenError() }
            return string
        }
        let bit: UInt8
        switch key.argument {
        case 0: age = Int(try integer()); bit = 1
        case 1: city = try text(); bit = 2
        case 2: email = try text(); bit = 4
        case 3: followers = Int(try integer()); bit = 8
        case 4: id = try integer(); bit = 16
        case 5: name = try text(); bit = 32
        default: throw HandWrittenError()
        }
        guard seen & bit == 0 else { throw HandWrittenError() }
        seen |= bit
    }
    return Member(id: id, name: name, email: email, age: age, city: city, followers: followers)
}

/// Encodes `member` as a version-3 payload into `out` (emptied first), keys in deterministic order.
func handWrittenEncode(_ member: Member, into out: inout [UInt8]) {
    out.removeAll(keepingCapacity: true)
    func head(_ major: UInt8, _ argument: UInt64) {
        let size: Int
        switch argument {
        case 0..<24: out.append(major << 5 | UInt8(argument)); return
        case 24..<0x100: out.append(major << 5 | 24); size = 1
        case 0x100..<0x1_0000: out.append(major << 5 | 25); size = 2
        case 0x1_0000..<0x1_0000_0000: out.append(major << 5 | 26); size = 4
        default: out.append(major << 5 | 27); size = 8
        }
        for i in (0..<size).reversed() { out.append(UInt8(truncatingIfNeeded: argument >> UInt64(8 * i))) }
    }
    func integer(_ value: Int64) { value >= 0 ? head(0, UInt64(value)) : head(1, UInt64(-1 - value)) }
    func text(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            head(3, UInt64(utf8.count))
            out.append(contentsOf: utf8)
        }
    }
    // The keys by number: A, C, E, F, I, N in UTF-8 order.
    head(5, 6)
    out.append(0); integer(Int64(member.age))
    out.append(1); text(member.city)
    out.append(2); text(member.email)
    out.append(3); integer(Int64(member.followers))
    out.append(4); integer(member.id)
    out.append(5); text(member.name)
}
