/// Checks that `bytes` are well-formed UTF-8 (RFC 3629): no overlong forms, no surrogates,
/// nothing above U+10FFFF. Written out rather than calling the standard library's generic
/// `String(validating:as:)`, which costs a generic-metadata lookup per string.
func isValidUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool {
    guard var p = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return true }
    let end = p + bytes.count
    while p < end {
        // ASCII runs, eight bytes at a time.
        while end - p >= 8 && UnsafeRawPointer(p).loadUnaligned(as: UInt64.self) & 0x8080_8080_8080_8080 == 0 {
            p += 8
        }
        guard p < end else { break }
        let lead = p.pointee
        if lead < 0x80 {
            p += 1
            continue
        }
        let length: Int
        var lower: UInt8 = 0x80, upper: UInt8 = 0xBF  // the range of the first continuation byte
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; lower = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; upper = 0x9F  // no surrogates
        case 0xF0: length = 4; lower = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; upper = 0x8F  // nothing above U+10FFFF
        default: return false
        }
        guard end - p >= length else { return false }
        guard p[1] >= lower && p[1] <= upper else { return false }
        for i in 2..<max(2, length) where p[i] & 0xC0 != 0x80 { return false }
        p += length
    }
    return true
}
