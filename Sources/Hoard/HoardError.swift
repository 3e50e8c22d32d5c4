/// What went wrong in a Hoard store, naming the collection, key and versions involved.
///
/// A failure of the storage underneath (a full map or disk, no reader slot, a file that cannot be
/// opened, a closed store) is ``storage(_:)``, with a ``StorageFailure/Kind`` to match and the C
/// code LMDB or the system gave. A caller catches this one type, and the errors its own closures
/// throw.
public enum HoardError: Error, CustomStringConvertible, @unchecked Sendable {
    // @unchecked: `underlying` keeps the coder's error, which Swift's Error does not require to be Sendable.

    /// The LMDB environment exists but is not a Hoard store (it holds other databases).
    case notAHoardStore(path: String, found: [String])
    /// The store was written by a newer Hoard format than this code reads.
    case newerFormat(path: String, found: Int, supported: Int)
    /// A record was written by a newer key-set version than the running code knows (a rollback).
    case newerRecord(collection: String, key: StoredKey, version: Int, current: Int)
    /// A record's bytes are damaged: header, checksum or payload.
    case corruptRecord(collection: String, key: StoredKey, reason: String)
    /// A shipped key set changed without a new version.
    case keySetChanged(type: String, collection: String, version: Int, differences: [String])
    /// A record's payload did not decode as the model.
    case decoding(collection: String, key: StoredKey, version: Int, underlying: any Error)
    /// The collection was recorded with IDs of another kind (e.g. `Int` then `String`).
    case keyKindChanged(type: String, collection: String, recorded: String, now: String)
    /// The registry entry of a collection in the meta database is damaged.
    case corruptRegistry(collection: String, reason: String)
    /// The model did not encode.
    case encoding(collection: String, key: StoredKey, underlying: any Error)
    /// The ID is not valid as a key (too long).
    case invalidID(collection: String, reason: String)
    /// A tag that cannot be stored: empty, or longer than 128 bytes of UTF-8. Nothing of the write was stored.
    case invalidTag(collection: String, tag: String, reason: String)
    /// A capacity that no collection can keep: zero or negative, or a byte capacity smaller than
    /// the smallest record.
    case invalidCapacity(collection: String, reason: String)
    /// A write that cannot end within the collection's capacity, because what it writes alone
    /// exceeds it (a record larger than the byte capacity, a synchronize or bulk put of more records
    /// than the capacity). Nothing of the write is stored.
    case overCapacity(collection: String, reason: String)
    /// A change bus's position that the store cannot take: from another log than the one the
    /// store follows, or not after the position it has applied (``Replication/apply(_:through:bus:expecting:includingOwn:)``).
    /// Nothing was changed.
    case busPosition(bus: String, reason: String)
    /// Change observation cannot go on: the change log holds an entry this code cannot read, or
    /// the watch of other processes could not be set up. Nothing stored was changed.
    case observation(reason: String)
    /// A read-through's fetch did not answer within the hard timeout (``FetchTimeouts/hard``), and
    /// no stale record could be served. The fetch runs on in the background or was cancelled, as
    /// ``FetchTimeouts/completesInBackground`` says; nothing stored was changed by the read.
    case fetchTimedOut(collection: String, key: StoredKey, after: Duration)
    /// The storage underneath failed: LMDB, or the file system below it. What the failing call
    /// would have written is not stored; earlier commits are intact.
    case storage(StorageFailure)
    /// A put with `insertOnly` found a record stored under the ID. Nothing of the put was stored
    /// (what a bulk put stored before it stays in its transaction).
    case alreadyStored(collection: String, key: StoredKey)

    /// The cases without their values, to match on (`catch let error as HoardError where error.kind == .newerRecord`).
    public enum Kind: Sendable, Hashable {
        /// The ``HoardError`` case of the same name.
        case notAHoardStore, newerFormat, newerRecord, corruptRecord, keySetChanged, decoding, keyKindChanged,
            corruptRegistry, encoding, invalidID, invalidTag, invalidCapacity, overCapacity, busPosition,
            observation, fetchTimedOut, storage, alreadyStored
    }

    /// Which case this is.
    public var kind: Kind {
        switch self {
        case .notAHoardStore: .notAHoardStore
        case .newerFormat: .newerFormat
        case .newerRecord: .newerRecord
        case .corruptRecord: .corruptRecord
        case .keySetChanged: .keySetChanged
        case .decoding: .decoding
        case .keyKindChanged: .keyKindChanged
        case .corruptRegistry: .corruptRegistry
        case .encoding: .encoding
        case .invalidID: .invalidID
        case .invalidTag: .invalidTag
        case .invalidCapacity: .invalidCapacity
        case .overCapacity: .overCapacity
        case .busPosition: .busPosition
        case .observation: .observation
        case .fetchTimedOut: .fetchTimedOut
        case .storage: .storage
        case .alreadyStored: .alreadyStored
        }
    }

    /// The key of the record the error is about (a damaged, newer or undecodable record, a model
    /// that did not encode), or `nil` when it is not about one record.
    public var key: StoredKey? {
        switch self {
        case .newerRecord(_, let key, _, _), .corruptRecord(_, let key, _), .decoding(_, let key, _, _),
            .encoding(_, let key, _), .fetchTimedOut(_, let key, _), .alreadyStored(_, let key):
            key
        default: nil
        }
    }

    /// The error in one sentence: what happened, to which collection and key, and what was (not) changed.
    public var description: String {
        switch self {
        case .notAHoardStore(let path, let found):
            return
                "\(path) is an LMDB environment but not a Hoard store (it holds \(found.isEmpty ? "unnamed data" : found.joined(separator: ", "))); nothing was changed"
        case .newerFormat(let path, let found, let supported):
            return
                "\(path) was written by Hoard format \(found); this code reads format \(supported) and older. Nothing was changed"
        case .newerRecord(let collection, let key, let version, let current):
            return
                "\(collection)[\(key)] was written with key-set version \(version), newer than this code's current version \(current) (was the app rolled back?)"
        case .corruptRecord(let collection, let key, let reason):
            return "\(collection)[\(key)] is damaged: \(reason)"
        case .keySetChanged(let type, let collection, let version, let differences):
            return
                "\(type) (collection \(collection)): local key set \(version) differs from the one the store recorded (\(differences.joined(separator: "; "))); a shipped key set must not change — declare a new version"
        case .keyKindChanged(let type, let collection, let recorded, let now):
            return
                "\(type) (collection \(collection)): the store recorded \(recorded) IDs, the code uses \(now) IDs; the keys would be misread"
        case .corruptRegistry(let collection, let reason):
            return "the registry entry of collection \(collection) is damaged: \(reason)"
        case .decoding(let collection, let key, let version, let underlying):
            return "\(collection)[\(key)] (version \(version)) does not decode: \(underlying)"
        case .encoding(let collection, let key, let underlying):
            return "\(collection)[\(key)] does not encode: \(underlying)"
        case .invalidID(let collection, let reason):
            return "\(collection): invalid ID: \(reason)"
        case .invalidTag(let collection, let tag, let reason):
            return "\(collection): invalid tag \"\(tag)\": \(reason); nothing of the write was stored"
        case .invalidCapacity(let collection, let reason):
            return "\(collection): invalid capacity: \(reason)"
        case .overCapacity(let collection, let reason):
            return "\(collection): the write exceeds the collection's capacity: \(reason); nothing of it was stored"
        case .busPosition(let bus, let reason):
            return "change bus \(bus): \(reason); nothing was changed"
        case .observation(let reason):
            return "change observation: \(reason); nothing stored was changed"
        case .fetchTimedOut(let collection, let key, let after):
            return
                "\(collection)[\(key)]: the fetch did not answer within \(after) (the hard timeout); nothing stored was changed"
        case .storage(let failure):
            return failure.description
        case .alreadyStored(let collection, let key):
            return "\(collection)[\(key)] is stored already, and the put was insert-only; the put stored nothing"
        }
    }
}
