/// A range of keys in LMDB's order: byte-wise, a shorter key before its extensions.
///
/// ```swift
/// KeyRange.all
/// KeyRange.prefix(Array("user:".utf8))
/// KeyRange(from: .inclusive(a), to: .exclusive(b))
/// ```
public struct KeyRange: Sendable, Hashable {
    /// One end of a range.
    public enum Bound: Sendable, Hashable {
        /// The range includes this key.
        case inclusive([UInt8])
        /// The range stops short of this key.
        case exclusive([UInt8])

        /// The key at this end.
        public var key: [UInt8] {
            switch self {
            case .inclusive(let key), .exclusive(let key): key
            }
        }
    }

    /// The lowest key, or `nil` for no lower end.
    public var lower: Bound?
    /// The highest key, or `nil` for no upper end.
    public var upper: Bound?

    /// The keys from `lower` to `upper`; a `nil` end is open.
    public init(from lower: Bound? = nil, to upper: Bound? = nil) {
        self.lower = lower
        self.upper = upper
    }

    /// Every key.
    public static let all = KeyRange()

    /// The keys that start with `prefix`; all keys for an empty prefix.
    public static func prefix(_ prefix: [UInt8]) -> KeyRange {
        guard !prefix.isEmpty else { return .all }
        return KeyRange(from: .inclusive(prefix), to: successor(ofPrefix: prefix).map { .exclusive($0) })
    }

    /// The smallest key greater than every key that starts with `prefix`, or `nil` when there is
    /// none (a prefix of only 0xFF bytes).
    static func successor(ofPrefix prefix: [UInt8]) -> [UInt8]? {
        var bytes = prefix
        while let last = bytes.last {
            if last < 0xFF {
                bytes[bytes.count - 1] = last + 1
                return bytes
            }
            bytes.removeLast()
        }
        return nil
    }

    /// Whether `key` is above the lower end.
    func isAboveLower(_ key: UnsafeRawBufferPointer) -> Bool {
        switch lower {
        case nil: true
        case .inclusive(let bound): compareKeys(key, bound) >= 0
        case .exclusive(let bound): compareKeys(key, bound) > 0
        }
    }

    /// Whether `key` is below the upper end.
    func isBelowUpper(_ key: UnsafeRawBufferPointer) -> Bool {
        switch upper {
        case nil: true
        case .inclusive(let bound): compareKeys(key, bound) <= 0
        case .exclusive(let bound): compareKeys(key, bound) < 0
        }
    }

    /// Whether the range holds `key`.
    public func contains(_ key: [UInt8]) -> Bool {
        key.withUnsafeBytes { contains($0) }
    }

    /// Whether the range holds `key` (for example a key LMDB handed out, without copying it).
    public func contains(_ key: UnsafeRawBufferPointer) -> Bool {
        isAboveLower(key) && isBelowUpper(key)
    }
}

/// LMDB's default key order: `memcmp` over the common length, then the shorter first.
func compareKeys(_ a: UnsafeRawBufferPointer, _ b: [UInt8]) -> Int {
    b.withUnsafeBytes { b in
        let common = min(a.count, b.count)
        for i in 0..<common where a[i] != b[i] {
            return a[i] < b[i] ? -1 : 1
        }
        return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
    }
}
