internal import CBOR

// Record format 3 keys a payload's top-level map by numbers. For each local key-set version:
// number 0 stands for the key name of the model's `id` property when it has one without a dot;
// the version's other top-level key names (a dotted name `meta.width` contributing `meta`) follow
// in UTF-8 byte order. The registry records every version's key names, and a recorded version's
// names never change, so any reader of the registry numbers them the same way.
//
// The ID's entry is left out of a payload when it holds what the record's key says (IDs of the
// kinds int, uint, string and uuid): the key is the one copy. A reader puts it back from the key.

extension CBORKeyNumbering {
    /// The numbering of the payloads of a version with these key names (the registry's map from
    /// property names to key names).
    static func payload(keyNames: [String: String]) -> CBORKeyNumbering {
        let id = idKeyName(keyNames)
        let topLevel = Set(keyNames.values.map { name in String(name.prefix { $0 != "." }) })
        let others = topLevel.subtracting(id.map { [$0] } ?? []).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        return CBORKeyNumbering((id.map { [$0] } ?? []) + others)
    }

    /// The key name of the `id` property when it leads the numbering (number 0): present and
    /// without a dot.
    static func idKeyName(_ keyNames: [String: String]) -> String? {
        guard let name = keyNames["id"], !name.contains(".") else { return nil }
        return name
    }
}

/// The ID's entry (number 0) of a numbered payload, which a record leaves out when the entry holds
/// what its key says.
enum PayloadID {
    /// Whether records of IDs of `kind` leave the ID's entry out: those whose payload value can be
    /// made from the key alone.
    static func elides(_ kind: KeyKind) -> Bool {
        switch kind {
        case .int, .uint, .string, .uuid: true
        case .custom: false
        }
    }

    /// Writes the ID's value as a payload holds it (the encoder's CBOR for it), made from its key
    /// bytes, at the start of `buffer` (at least `key.count + 9` bytes); its length, or `nil` when
    /// the key is not one of `kind`.
    static func value(
        ofKey key: UnsafeRawBufferPointer, kind: KeyKind, into buffer: UnsafeMutableRawBufferPointer
    ) -> Int? {
        switch kind {
        case .int where key.count == 8:
            let value = Int64(bitPattern: loadBigEndian(UInt64.self, at: 0, in: key) ^ (1 << 63))
            return value >= 0
                ? storeCBORHead(0, UInt64(value), into: buffer) : storeCBORHead(1, UInt64(-1 - value), into: buffer)
        case .uint where key.count == 8:
            return storeCBORHead(0, loadBigEndian(UInt64.self, at: 0, in: key), into: buffer)
        case .string where key.count >= 1 && key[0] == 0x01:
            let head = storeCBORHead(3, UInt64(key.count - 1), into: buffer)
            UnsafeMutableRawBufferPointer(rebasing: buffer[head...])
                .copyMemory(from: UnsafeRawBufferPointer(rebasing: key[1...]))
            return head + key.count - 1
        case .uuid where key.count == 16:
            // Tag 37 over the 16 bytes, as the encoder writes a UUID.
            (buffer[0], buffer[1], buffer[2]) = (0xD8, 37, 0x50)
            UnsafeMutableRawBufferPointer(rebasing: buffer[3...]).copyMemory(from: key)
            return 19
        default:
            return nil
        }
    }

    /// The bytes of scratch space ``stored(_:key:kind:into:)`` and ``restored(_:key:kind:into:)`` need.
    static func scratchSize(payload: Int, key: Int) -> Int { payload + 2 * key + 32 }

    /// Writes `payload` as a record stores it into `buffer` (``scratchSize(payload:key:)`` bytes):
    /// without the ID's entry when that holds what `key` says. Its length, or `nil` (nothing
    /// written) when the payload is stored as it is.
    static func stored(
        _ payload: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, kind: KeyKind,
        into buffer: UnsafeMutableRawBufferPointer
    ) -> Int? {
        let scratch = UnsafeMutableRawBufferPointer(rebasing: buffer[(payload.count + 10)...])
        guard let length = value(ofKey: key, kind: kind, into: scratch) else { return nil }
        return CBORKeyNumbering.removingFirstEntry(
            payload, ifValueIs: UnsafeRawBufferPointer(rebasing: scratch[..<length]), into: buffer)
    }

    /// Writes `payload`, as a record stores it, into `buffer` (``scratchSize(payload:key:)`` bytes)
    /// with the ID's entry put back from `key` when it was left out. Its length, or `nil` (nothing
    /// written) when the payload has its ID's entry.
    static func restored(
        _ payload: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, kind: KeyKind,
        into buffer: UnsafeMutableRawBufferPointer
    ) -> Int? {
        let scratch = UnsafeMutableRawBufferPointer(rebasing: buffer[(payload.count + key.count + 20)...])
        guard let length = value(ofKey: key, kind: kind, into: scratch) else { return nil }
        return CBORKeyNumbering.addingFirstEntry(
            payload, value: UnsafeRawBufferPointer(rebasing: scratch[..<length]), into: buffer)
    }

    /// `payload` as a record stores it, handed to `body` (``stored(_:key:kind:into:)``).
    @inline(__always)
    static func withStored<R>(
        _ payload: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, kind: KeyKind,
        _ body: (UnsafeRawBufferPointer) throws -> R
    ) rethrows -> R {
        try withScratch(scratchSize(payload: payload.count, key: key.count)) { buffer in
            guard let length = stored(payload, key: key, kind: kind, into: buffer) else { return try body(payload) }
            return try body(UnsafeRawBufferPointer(rebasing: buffer[..<length]))
        }
    }

    /// `payload` with its ID's entry, handed to `body` (``restored(_:key:kind:into:)``).
    @inline(__always)
    static func withRestored<R>(
        _ payload: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, kind: KeyKind,
        _ body: (UnsafeRawBufferPointer) throws -> R
    ) rethrows -> R {
        try withScratch(scratchSize(payload: payload.count, key: key.count)) { buffer in
            guard let length = restored(payload, key: key, kind: kind, into: buffer) else { return try body(payload) }
            return try body(UnsafeRawBufferPointer(rebasing: buffer[..<length]))
        }
    }

    /// `count` bytes of scratch memory for `body`: on the stack when few. (Not through
    /// `withUnsafeTemporaryAllocation`, which unspecialized generic code, as a collection's is,
    /// calls with a lookup of its result type's metadata every time.)
    @inline(__always)
    private static func withScratch<R>(
        _ count: Int, _ body: (UnsafeMutableRawBufferPointer) throws -> R
    ) rethrows -> R {
        guard count <= MemoryLayout<Scratch>.size else {
            var heap = [UInt8](repeating: 0, count: count)
            return try heap.withUnsafeMutableBytes(body)
        }
        var scratch = Scratch()
        return try withUnsafeMutableBytes(of: &scratch) {
            try body(UnsafeMutableRawBufferPointer(rebasing: $0[..<count]))
        }
    }

    /// 256 bytes on the stack.
    private struct Scratch {
        var words:
            (
                UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
                UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
                UInt64, UInt64, UInt64, UInt64, UInt64, UInt64
            ) = (
                0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
            )
    }
}

extension CollectionSchema {
    /// The numbering of version `version`'s payloads, or `nil` when the schema does not record it.
    func payloadNumbering(_ version: Int) -> CBORKeyNumbering? {
        versions[version].map { CBORKeyNumbering.payload(keyNames: $0) }
    }

    /// The names the numbers of version `version`'s payloads stand for, by number (record format
    /// 3), or `nil` when the schema does not record the version.
    package func payloadKeyNames(_ version: Int) -> [String]? { payloadNumbering(version)?.names }

    /// `payload`, a record's payload under `header` and `key` (IDs of `keyKind`), keyed by the key
    /// names of its version as text, with the ID's entry a record of format 3 may leave out put
    /// back: the payload itself when its record keys by name (formats 1 and 2). For readers that
    /// show or check key names (the `hoard` tool).
    ///
    /// - Throws: ``RecordDamage`` when the numbers do not fit the version's names, or the version
    ///   is not recorded.
    package func textKeyed(
        _ payload: UnsafeRawBufferPointer, header: RecordHeader, key: UnsafeRawBufferPointer, keyKind: KeyKind
    ) throws(RecordDamage) -> [UInt8] {
        guard header.hasNumberedKeys else { return Array(payload) }
        guard let keyNames = versions[header.version] else {
            throw RecordDamage("key-set version \(header.version) is not recorded in the registry")
        }
        let numbering = CBORKeyNumbering.payload(keyNames: keyNames)
        return try RecordDamage.rekeying {
            guard CBORKeyNumbering.idKeyName(keyNames) != nil, PayloadID.elides(keyKind) else {
                return try numbering.named(payload)
            }
            return try PayloadID.withRestored(payload, key: key, kind: keyKind) { try numbering.named($0) }
        }
    }

    /// `payload`, a record's payload under `header` and `key` (IDs of `keyKind`), with the ID's
    /// entry a record of format 3 may leave out put back, keyed as the record keys it; handed to
    /// `body`. For readers that turn millions of payloads into another form (`hoard dump`).
    package func withID<R>(
        _ payload: UnsafeRawBufferPointer, header: RecordHeader, key: UnsafeRawBufferPointer, keyKind: KeyKind,
        _ body: (UnsafeRawBufferPointer) throws -> R
    ) rethrows -> R {
        guard header.hasNumberedKeys, let keyNames = versions[header.version],
            CBORKeyNumbering.idKeyName(keyNames) != nil, PayloadID.elides(keyKind)
        else { return try body(payload) }
        return try PayloadID.withRestored(payload, key: key, kind: keyKind, body)
    }

    /// `payload`, keyed by the key names of version `version` as text, as a record of the current
    /// format under `key` (IDs of `keyKind`) stores it: keyed by their numbers, without the ID's
    /// entry when that holds what the key says. For writers of records without a model type
    /// (`hoard put`, `hoard migrate`), so that they store the bytes the model's code would.
    package func storedPayload(
        _ payload: UnsafeRawBufferPointer, version: Int, key: UnsafeRawBufferPointer, keyKind: KeyKind
    ) throws(RecordDamage) -> [UInt8] {
        guard let keyNames = versions[version] else {
            throw RecordDamage("key-set version \(version) is not recorded in the registry")
        }
        let numbered = try RecordDamage.rekeying { try CBORKeyNumbering.payload(keyNames: keyNames).numbered(payload) }
        guard CBORKeyNumbering.idKeyName(keyNames) != nil, PayloadID.elides(keyKind) else { return numbered }
        return numbered.withUnsafeBytes { numbered in
            PayloadID.withStored(numbered, key: key, kind: keyKind) { Array($0) }
        }
    }
}

extension RecordDamage {
    /// Runs a rekeying, its errors as damage.
    static func rekeying<R>(_ body: () throws -> R) throws(RecordDamage) -> R {
        do { return try body() } catch let error as CBORKeyingError {
            throw RecordDamage("the payload's keys do not fit its version: \(error)")
        } catch {
            throw RecordDamage("the payload is not valid CBOR: \(error)")
        }
    }
}

extension KeySets {
    /// `payload`, keyed by the key names of local version `version` as text, as a record of format
    /// 3 under `key` (IDs of `keyKind`) stores it: keyed by their numbers, without the ID's entry
    /// when that holds what the key says. For tests and tools that make records.
    ///
    /// - Throws: a description of a key the version does not name, or of bytes that are not a map.
    package func storedPayload(
        _ payload: [UInt8], version: Int, key: UnsafeRawBufferPointer, keyKind: KeyKind
    ) throws -> [UInt8] {
        let keyNames = try keyNames(for: .local(version))
        let numbered = try payload.withUnsafeBytes { try CBORKeyNumbering.payload(keyNames: keyNames).numbered($0) }
        guard CBORKeyNumbering.idKeyName(keyNames) != nil, PayloadID.elides(keyKind) else { return numbered }
        return numbered.withUnsafeBytes { PayloadID.withStored($0, key: key, kind: keyKind) { Array($0) } }
    }
}
