internal import LMDB

extension Store {
    /// What records the changes of the collection of `state` in `txn`, or `nil` when nobody would
    /// read them (no subscriber in this process, no change log): one atomic load.
    @inline(__always)
    func changeRecorder(for state: CollectionState, in txn: borrowing LMDB.WriteTransaction) -> ChangeRecorder? {
        guard state.observerCount.load(ordering: .acquiring) > 0 || observation.logsChanges else { return nil }
        return ChangeRecorder(state: state, observation: observation, in: txn)
    }

    /// What records the changes of collection `name` in `txn`, or `nil` when nobody would read
    /// them. For writers that know the collection by name (a replica's invalidations).
    func changeRecorder(forCollection name: String, in txn: borrowing LMDB.WriteTransaction) -> ChangeRecorder? {
        let state = observation.logsChanges ? state(of: name) : existingState(of: name)
        guard let state else { return nil }
        return changeRecorder(for: state, in: txn)
    }
}

/// Records a write transaction's changes to one collection in its ``ChangeJournal``: every change
/// when the store keeps a change log or a subscriber wants them all, otherwise only the observed
/// keys' (``ObservedKeys``), so that a write of a key nobody observes allocates nothing.
struct ChangeRecorder {
    // Unmanaged: a recorder lives within one write transaction, which the collection's state,
    // the store's observation and the transaction's journal all outlive; no reference counting.
    private let state: Unmanaged<CollectionState>
    private let observation: Unmanaged<Observation>
    /// The journal, when every change is kept.
    private let journal: Unmanaged<ChangeJournal>?
    /// The bits of the keys observed (``ObservedKeys/bitmapWords`` words), when only those are
    /// kept: the collection state's, which outlives the recorder.
    private let bitmap: UnsafePointer<UInt64>

    // Borrowed: an initializer takes its arguments owned by default, which cost a write a
    // retain and a release of each.
    init(state: borrowing CollectionState, observation: borrowing Observation, in txn: borrowing LMDB.WriteTransaction)
    {
        self.state = Unmanaged.passUnretained(state)
        self.observation = Unmanaged.passUnretained(observation)
        state.refreshWritersKeys()
        bitmap = UnsafePointer(state.writersKeysBitmap)
        journal =
            observation.logsChanges || state.writersWantEverything
            ? Unmanaged.passUnretained(observation.journal(of: txn)) : nil
    }

    /// Records that the record under `key` changed, if it is kept. Inlined into the write sites
    /// down to the key's bit, the few instructions a key nobody observes costs.
    @inline(__always)
    func record(key: UnsafeRawBufferPointer, _ kind: RecordedKind, in txn: borrowing LMDB.WriteTransaction) {
        if let journal {
            state._withUnsafeGuaranteedRef { state in
                journal._withUnsafeGuaranteedRef { $0.record(state, key: key, kind) }
            }
        } else if kind == .cleared || ObservedKeys.isSet(ObservedKeys.bitIndex(key), in: bitmap) {
            recordIfObserved(key: key, kind, in: txn)
        }
    }

    private func recordIfObserved(
        key: UnsafeRawBufferPointer, _ kind: RecordedKind, in txn: borrowing LMDB.WriteTransaction
    ) {
        state._withUnsafeGuaranteedRef { state in
            guard kind == .cleared || state.writersKeys?.contains(key) != false else { return }
            observation._withUnsafeGuaranteedRef { $0.journal(of: txn) }.record(state, key: key, kind)
        }
    }

    func record(key: [UInt8], _ kind: RecordedKind, in txn: borrowing LMDB.WriteTransaction) {
        key.withUnsafeBytes { record(key: $0, kind, in: txn) }
    }

    /// The recorder for a write of about `count` records: this one, or `nil` once it recorded
    /// that which records changed is not known, so that each `observe(id)` subscriber reads its
    /// record again (yielding only if its bytes changed). Only when just the observed keys are
    /// kept, and the write is so large that checking each key costs more than those reads (each
    /// on its subscriber's thread), as GRDB's `ValueObservation` does for every write.
    func forWrite(of count: Int, in txn: borrowing LMDB.WriteTransaction) -> ChangeRecorder? {
        guard journal == nil else { return self }
        let observed = state._withUnsafeGuaranteedRef { $0.writersKeys?.count } ?? 0
        guard count >= Swift.max(Self.fewestRecordsUnrecorded, 128 * observed) else { return self }
        state._withUnsafeGuaranteedRef { state in
            observation._withUnsafeGuaranteedRef { $0.journal(of: txn) }.recordUnknown(state)
        }
        return nil
    }

    /// The fewest records a write leaves unrecorded (``forWrite(of:in:)``).
    static let fewestRecordsUnrecorded = 1_024
}

/// The keys a collection's ``HoardCollection/observe(_:)`` subscribers watch, as a writer looks a
/// written key up: first in a bitmap with one bit set for each observed key (a few instructions
/// tell most keys apart, with no hash of the whole key), then by the key's hash.
struct ObservedKeys {
    /// The bitmap's size in words: 4,096 bits, 512 bytes, so that with a few keys observed,
    /// few keys that nobody observes get past it to the dearer hash.
    static let bitmapWords = 64
    private static let indexShift: UInt64 = 52  // 64 - log2(4,096)

    private var hashes = KeyHashSet()
    private var bitmap = [UInt64](repeating: 0, count: bitmapWords)

    /// How many keys are observed.
    var count: Int { hashes.count }

    mutating func insert(_ key: UnsafeRawBufferPointer) {
        hashes.insert(keyHash(key))
        let index = Self.bitIndex(key)
        bitmap[index >> 6] |= 1 << (index & 63)
    }

    @inline(__always)
    func contains(_ key: UnsafeRawBufferPointer) -> Bool {
        bitmap.withUnsafeBufferPointer { words in
            words.baseAddress.map { Self.isSet(Self.bitIndex(key), in: $0) } ?? false
        } && hashes.contains(keyHash(key))
    }

    /// Writes the bitmap's ``bitmapWords`` words to `words`.
    func copyBitmap(to words: UnsafeMutablePointer<UInt64>) {
        bitmap.withUnsafeBufferPointer { bitmap in
            for index in 0..<Self.bitmapWords { words[index] = bitmap[index] }
        }
    }

    /// Whether bit `index` of the bitmap at `words` is set.
    @inline(__always)
    static func isSet(_ index: Int, in words: UnsafePointer<UInt64>) -> Bool {
        words[index &>> 6] & (1 &<< UInt64(index & 63)) != 0
    }

    /// The key's bit in the bitmap: from its length and its first and last eight bytes (which
    /// overlap in a shorter key), multiplied so that every byte moves the top twelve bits.
    @inline(__always)
    static func bitIndex(_ key: UnsafeRawBufferPointer) -> Int {
        var folded = UInt64(truncatingIfNeeded: key.count)
        if key.count >= 8 {
            let last = key.loadUnaligned(fromByteOffset: key.count - 8, as: UInt64.self)
            folded ^= key.loadUnaligned(as: UInt64.self) ^ (last << 29 | last >> 35)
        } else {
            for byte in key { folded = folded << 8 | UInt64(byte) }
        }
        return Int(truncatingIfNeeded: (folded &* 0x9E37_79B9_7F4A_7C15) >> indexShift)
    }
}
