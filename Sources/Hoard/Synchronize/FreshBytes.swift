/// The fresh side of a synchronize: keys and encoded payloads, each kind in one flat buffer, and
/// no IDs. Concrete on purpose: `HoardCollection`'s methods run as unspecialized generic code, in
/// which sorting tuples of the generic ID is slow, and a million small arrays cost more than the merge.
struct FreshBytes {
    var keys: [Range<Int>] = []
    var keyBytes: [UInt8] = []
    var payloads: [Range<Int>] = []
    var payloadBytes: [UInt8] = []

    /// How many entries `reserve` was told to expect.
    var expected = 0

    mutating func append(key: [UInt8], payload: UnsafeRawBufferPointer) {
        if keyBytes.isEmpty && expected > 1 {
            // Sized from the first entry, with room to spare: reserved pages that stay untouched
            // cost no memory, while growing step by step copies everything written so far.
            keyBytes.reserveCapacity(expected * (key.count + 8))
            payloadBytes.reserveCapacity(expected * (payload.count * 3 / 2 + 16))
        }
        let keyStart = keyBytes.count
        keyBytes.append(contentsOf: key)
        keys.append(keyStart..<keyBytes.count)
        let start = payloadBytes.count
        payloadBytes.append(contentsOf: payload)
        payloads.append(start..<payloadBytes.count)
    }

    func key(_ index: Int) -> ArraySlice<UInt8> { keyBytes[keys[index]] }
    func payload(_ index: Int) -> ArraySlice<UInt8> { payloadBytes[payloads[index]] }

    /// Room for `count` entries, so that the buffers do not grow (and copy) step by step.
    mutating func reserve(_ count: Int) {
        expected = count
        keys.reserveCapacity(count)
        payloads.reserveCapacity(count)
    }

    /// The same entries in key order: `self` when they are in order already, else a copy whose
    /// bytes lie in key order too, so that the merge reads both buffers front to back. Sorts by
    /// the first 8 key bytes as a number, comparing whole keys only on a tie.
    func sorted() -> FreshBytes {
        if keys.indices.dropFirst().allSatisfy({ !keyPrecedes(key($0), key($0 - 1)) }) { return self }
        var order: [(prefix: UInt64, key: Range<Int>, payload: Range<Int>)] = keys.indices.map {
            (keyPrefix(key($0)), keys[$0], payloads[$0])
        }
        order.sort { a, b in
            if a.prefix != b.prefix { return a.prefix < b.prefix }
            return keyPrecedes(keyBytes[a.key], keyBytes[b.key])
        }
        var result = FreshBytes()
        result.keys = Self.gather(order.lazy.map(\.key), count: order.count, from: keyBytes, into: &result.keyBytes)
        result.payloads = Self.gather(
            order.lazy.map(\.payload), count: order.count, from: payloadBytes, into: &result.payloadBytes)
        return result
    }

    /// Copies the byte `ranges` of `source` one after the other into `target` (empty); returns
    /// where each landed.
    private static func gather(
        _ ranges: some Sequence<Range<Int>>, count: Int, from source: [UInt8], into target: inout [UInt8]
    ) -> [Range<Int>] {
        [Range<Int>](unsafeUninitializedCapacity: count) { placed, placedCount in
            target = [UInt8](unsafeUninitializedCapacity: source.count) { bytes, bytesCount in
                source.withUnsafeBufferPointer { source in
                    var end = 0
                    for (i, range) in ranges.enumerated() {
                        // A non-empty range means both buffers have memory (a custom key may be empty).
                        if !range.isEmpty, let to = bytes.baseAddress, let from = source.baseAddress {
                            (to + end).initialize(from: from + range.lowerBound, count: range.count)
                        }
                        placed.initializeElement(at: i, to: end..<end + range.count)
                        end += range.count
                    }
                    bytesCount = end
                }
            }
            placedCount = count
        }
    }
}
