internal import CBOR

// Record format 3 keys a payload's top-level map by numbers: for each local key-set version,
// number n stands for the n-th of the version's top-level key names in UTF-8 byte order (a dotted
// name `meta.width` contributing `meta`). The registry records every version's key names, and a
// recorded version's names never change, so any reader of the registry numbers them the same way.

extension CBORKeyNumbering {
    /// The numbering of the payloads of a version with these key names (the registry's
    /// property-to-key-name map's values).
    static func payload(keyNames: some Sequence<String>) -> CBORKeyNumbering {
        let topLevel = Set(keyNames.map { name in String(name.prefix { $0 != "." }) })
        return CBORKeyNumbering(topLevel.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
    }
}

/// The numberings of one collection's versions, made once from its registry entry: for code that
/// reads or writes many records without the model's type (the `hoard` tool).
package struct PayloadKeys: Sendable {
    private let numberings: [Int: CBORKeyNumbering]

    package init(_ schema: CollectionSchema) {
        numberings = schema.versions.mapValues { CBORKeyNumbering.payload(keyNames: $0.values) }
    }

    /// The names the numbers of version `version`'s payloads stand for, by number, or `nil` when
    /// the registry does not record the version.
    package func names(_ version: Int) -> [String]? { numberings[version]?.names }

    /// `payload`, a record's payload under `header`, keyed by the key names of its version as
    /// text: the payload itself when its record keys by name (formats 1 and 2), else its top-level
    /// numbers replaced by names. For readers that show or check key names.
    ///
    /// - Throws: ``RecordDamage`` when the numbers do not fit the version's names, or the version
    ///   is not recorded.
    package func textKeyed(_ payload: UnsafeRawBufferPointer, header: RecordHeader) throws(RecordDamage) -> [UInt8] {
        guard header.hasNumberedKeys else { return Array(payload) }
        let numbering = try numbering(header.version)
        return try RecordDamage.rekeying { try numbering.named(payload) }
    }

    /// `payload`, keyed by the key names of version `version` as text, keyed by their numbers for
    /// a record of the current format.
    package func numbered(_ payload: UnsafeRawBufferPointer, version: Int) throws(RecordDamage) -> [UInt8] {
        let numbering = try numbering(version)
        return try RecordDamage.rekeying { try numbering.numbered(payload) }
    }

    private func numbering(_ version: Int) throws(RecordDamage) -> CBORKeyNumbering {
        guard let numbering = numberings[version] else {
            throw RecordDamage("key-set version \(version) is not recorded in the registry")
        }
        return numbering
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
    /// `payload`, keyed by the key names of local version `version` as text, keyed by their
    /// numbers as a record of format 3 holds it: for tests and tools that make records.
    ///
    /// - Throws: a description of a key the version does not name, or of bytes that are not a map.
    package func numberedPayload(_ payload: [UInt8], version: Int) throws -> [UInt8] {
        let numbering = CBORKeyNumbering.payload(keyNames: try keyNames(for: .local(version)).values)
        return try payload.withUnsafeBytes { try numbering.numbered($0) }
    }
}
