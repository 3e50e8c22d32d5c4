// Models and helpers the Hoard test files share: the sample models (Note in three versions,
// Tag with string IDs), a store in a temporary directory, records written as an older app
// version wrote them, and expectations on HoardError by case.
internal import CBOR
internal import Foundation
@_spi(LMDB) public import Hoard
@_exported public import HoardTesting
internal import LMDB
internal import TestSupport
public import Testing
public import VariableCoding

/// A note as three app versions stored it: version 1 called the text BODY and had the stars as
/// text; version 2 renamed BODY to TEXT; version 3 made STARS a number and added PINNED.
public struct Note: VariablyCodable, Identifiable, Equatable, Sendable {
    public var id: Int64
    public var text: String
    public var stars: Int
    public var pinned: Bool

    public static let keySets = KeySets<Note>(
        local: [
            1: [\.id: "ID", \.text: "BODY", \.stars: "STARS"],
            2: [\.id: "ID", \.text: "TEXT", \.stars: "STARS"],
            3: [\.id: "ID", \.text: "TEXT", \.stars: "STARS", \.pinned: "PINNED"],
        ],
        remote: ["v1": [\.id: "id", \.text: "text", \.stars: "stars"]]
    )

    public init(id: Int64, text: String, stars: Int, pinned: Bool) {
        (self.id, self.text, self.stars, self.pinned) = (id, text, stars, pinned)
    }
    public init(from container: DecodingContainer<Note>) throws {
        id = try container.decodeValue(for: \.id)
        text = try container.decodeValue(for: \.text)
        if let version = container.localVersion, version < 3 {
            stars = Int(try container.decodeValue(String.self, forProperty: \.stars)) ?? 0
        } else {
            stars = try container.decodeValue(for: \.stars)
        }
        pinned = try container.decodeValue(for: \.pinned, default: false)
    }
    public func encode(to container: inout EncodingContainer<Note>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(text, for: \.text)
        if let version = container.localVersion, version < 3 {
            try container.encodeValue(String(stars), forProperty: \.stars)
        } else {
            try container.encodeValue(stars, for: \.stars)
        }
        try container.encodeValue(pinned, for: \.pinned)
    }
}

/// The same collection declared by other code whose version 1 differs from what was recorded.
public struct TamperedNote: VariablyCodable, Identifiable {
    public var id: Int64
    public var text: String
    public static let keySets = KeySets<TamperedNote>(local: [1: [\.id: "ID", \.text: "CONTENT"]])
    public init(from container: DecodingContainer<TamperedNote>) throws { id = 0; text = "" }
    public func encode(to container: inout EncodingContainer<TamperedNote>) throws {}
}

public struct Tag: VariablyCodable, Identifiable, Equatable, Sendable {
    public var id: String
    public var uses: Int
    public static let keySets = KeySets<Tag>(local: [1: [\.id: "id", \.uses: "uses"]])
    public init(id: String, uses: Int) { (self.id, self.uses) = (id, uses) }
    public init(from container: DecodingContainer<Tag>) throws {
        id = try container.decodeValue(for: \.id)
        uses = try container.decodeValue(for: \.uses)
    }
    public func encode(to container: inout EncodingContainer<Tag>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(uses, for: \.uses)
    }
}

/// Options for test stores: no flushes (the tests check logic, not fsync) and a clock that stands
/// still at 2023-11-14T22:13:20Z.
public let testOptions = Store.Options(
    durability: .riskStoreOnOSCrash, clock: { Date(timeIntervalSince1970: 1_700_000_000) })

public func withStore<R>(_ body: (Store, String) throws -> R) throws -> R {
    try withTemporaryDirectory { dir in
        let path = dir + "/store"
        return try body(try Store(path: path, options: testOptions), path)
    }
}

/// Writes a record the way an earlier app version did: its key set, its version in the header.
/// The payload of a stored record: its bytes after the header (of either record format), or
/// none when the header cannot be read.
public func payload(of record: [UInt8]) -> [UInt8] {
    record.withUnsafeBytes { bytes in (try? RecordHeader.parse(bytes)).map { Array($0.1) } ?? [] }
}

/// The payload of `record`, a record of `collection` in `store`, keyed by the key names of its
/// version as text (as the Codable path writes them), whichever record format holds it.
public func namedPayload(of record: [UInt8], collection: String, in store: Store) throws -> [UInt8] {
    let schema = try #require(try store.schema(of: collection))
    return try record.withUnsafeBytes { bytes in
        let (header, payload) = try RecordHeader.parse(bytes)
        return try PayloadKeys(schema).textKeyed(payload, header: header)
    }
}

/// A record as code before record format 3 wrote it: `header` in format 2, over `payload`, keyed
/// by key names as text.
public func formatTwoRecord(_ header: RecordHeader, payload: [UInt8]) -> [UInt8] {
    var earlier = header
    earlier.recordFormat = 2
    return earlier.record(with: payload)
}

/// `payload` (keyed by the key names of `Model`'s local version `version`) as a record of format 3
/// holds it, keyed by numbers; `nil` when a key is not one of the version's.
public func numberedPayload<Model: VariablyCodable>(_ payload: [UInt8], version: Int, of model: Model.Type) -> [UInt8]?
{
    try? Model.keySets.numberedPayload(payload, version: version)
}

/// A record of `header` holding `payload` (keyed by the key names of `Model`'s version
/// `header.version`): with `numbered`, in format 3 with its keys numbered when every key is one of
/// the version's; else in format 2, as code before numbered keys wrote it.
public func makeRecord<Model: VariablyCodable>(
    _ header: RecordHeader, payload: [UInt8], of model: Model.Type, numbered: Bool
) -> [UInt8] {
    guard numbered, let numbered = numberedPayload(payload, version: header.version, of: model) else {
        return formatTwoRecord(header, payload: payload)
    }
    var current = header
    current.recordFormat = RecordHeader.format
    return current.record(with: numbered)
}

public func writeRecord(_ note: Note, version: Int, in store: Store, header: ((inout [UInt8]) -> Void)? = nil) throws {
    let payload = try CBOREncoder(deterministic: true, userInfo: [.keySet: KeySetID.local(version)]).encode(note)
    // An earlier version's code wrote names, not numbers.
    var record = formatTwoRecord(RecordHeader(version: version, writtenAt: 42, expiresAt: nil), payload: payload)
    header?(&record)
    let db = try store.environment.openDatabase("c:Note")
    try store.environment.write { txn in try txn.put(record, forKey: note.id.keyBytes, in: db) }
}

/// Expects `body` to throw a ``HoardError`` of `kind` whose message names every one of
/// `fragments` (the collection, key, versions or key names the error must mention).
public func expectHoardError(
    _ kind: HoardError.Kind, _ fragments: [String] = [], sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> Void
) {
    do {
        try body()
        Issue.record("no error; expected \(kind) mentioning \(fragments)", sourceLocation: sourceLocation)
    } catch let error as HoardError {
        #expect(error.kind == kind, "'\(error)' is not \(kind)", sourceLocation: sourceLocation)
        for fragment in fragments {
            #expect("\(error)".contains(fragment), "'\(error)' lacks '\(fragment)'", sourceLocation: sourceLocation)
        }
    } catch {
        Issue.record("expected a HoardError (\(kind)), got \(error)", sourceLocation: sourceLocation)
    }
}

/// What a model's field-by-number scan alone (generated by `@VariablyCoded`, or written out)
/// makes of `payload` written with local version `version`, through the table a collection
/// builds; `nil` when it declines.
public func scannedAlone<Model: VariablyDecodable>(
    _ type: Model.Type, _ payload: [UInt8], version: Int
) throws -> Model? {
    let layout = try #require(try Model.keySets.fieldLayout(for: .local(version)))
    let names = layout.keyNames
    let table = try #require(
        CBORPropertyTable(layout.fields(of: Model.scannedProperties).map { $0.map { names[$0] } }))
    // The scanner holds the table unowned: keep it alive until the scan is over.
    return withExtendedLifetime(table) {
        payload.withUnsafeBytes { bytes -> Model? in
            guard var scanner = CBORFieldScanner(bytes, table: table), let model = try? Model.scan(&scanner),
                scanner.isComplete
            else { return nil }
            return model
        }
    }
}
