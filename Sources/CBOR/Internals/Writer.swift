/// Appends CBOR items to a byte buffer with the shortest heads and the shortest exact floats
/// (RFC 8949 §4.2.1 "preferred serialization"). Shared by the encoder and `CBORValue`.
struct Writer {
    var bytes: [UInt8] = []

    /// The length of the head for `argument`.
    @inline(__always)
    static func headLength(_ argument: UInt64) -> Int {
        switch argument {
        case 0..<24: 1
        case 24...0xFF: 2
        case 0x100...0xFFFF: 3
        case 0x1_0000...0xFFFF_FFFF: 5
        default: 9
        }
    }

    @inline(__always)
    mutating func head(_ major: UInt8, _ argument: UInt64) {
        let m = major << 5
        switch argument {
        case 0..<24:
            bytes.append(m | UInt8(argument))
        case 24...0xFF:
            bytes.append(m | 24)
            bytes.append(UInt8(argument))
        case 0x100...0xFFFF:
            bytes.append(m | 25)
            appendBigEndian(UInt16(argument))
        case 0x1_0000...0xFFFF_FFFF:
            bytes.append(m | 26)
            appendBigEndian(UInt32(argument))
        default:
            bytes.append(m | 27)
            appendBigEndian(argument)
        }
    }

    /// Writes the head for `argument` into `target` (which has exactly the head's length).
    static func writeHead(_ major: UInt8, _ argument: UInt64, into target: UnsafeMutableRawBufferPointer) {
        var scratch = Writer()
        scratch.head(major, argument)
        target.copyBytes(from: scratch.bytes)
    }

    @inline(__always)
    mutating func appendBigEndian<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    @inline(__always)
    mutating func int(_ value: Int64) {
        if value >= 0 {
            head(0, UInt64(value))
        } else {
            head(1, UInt64(bitPattern: -1 - value))
        }
    }

    @inline(__always)
    mutating func text(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            head(3, UInt64(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    @inline(__always)
    mutating func byteString(_ raw: UnsafeRawBufferPointer) {
        head(2, UInt64(raw.count))
        bytes.append(contentsOf: raw)
    }

    /// The shortest of half, single and double that holds `value` exactly; NaN as 0xf97e00.
    mutating func double(_ value: Double) {
        if let half = halfBits(exactly: value) {
            bytes.append(0xF9)
            appendBigEndian(half)
        } else if Double(Float(value)) == value {
            bytes.append(0xFA)
            appendBigEndian(Float(value).bitPattern)
        } else {
            bytes.append(0xFB)
            appendBigEndian(value.bitPattern)
        }
    }
}
