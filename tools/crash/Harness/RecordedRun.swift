// The power-loss simulator's input: the log tools/crash/recorder.c writes of a workload run, and
// the file-system model that turns it into the disks a power cut could leave (docs/RELIABILITY.md,
// "Power loss").
public import TestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One call the recorder logged.
public struct RecordedCall: Sendable {
    public enum Kind: UInt8, Sendable {
        case open = 1, write, truncate, sync, close, makeDirectory, link, rename, unlink, acknowledgement, allocate
    }

    public var kind: Kind
    /// Open: bit 0 the call created the file, bit 1 it is a directory.
    public var flags: UInt8
    /// The descriptor's id: a new one at each open.
    public var handle: UInt32
    /// Open: the open flags; write: the file offset; truncate: the size; allocate: the offset.
    public var a: UInt64
    /// Allocate: the length.
    public var b: UInt64
    /// Write: the bytes; open, name changes: the path(s); acknowledgement: the line.
    public var bytes: [UInt8]

    var text: String { String(decoding: bytes, as: UTF8.self) }
    /// The two paths of a link or rename.
    var paths: (String, String) {
        let parts = bytes.split(separator: 0, maxSplits: 1, omittingEmptySubsequences: false)
        return (
            String(decoding: parts[0], as: UTF8.self), String(decoding: parts.count > 1 ? parts[1] : [], as: UTF8.self)
        )
    }
}

/// Reads a recorder log.
///
/// - Throws: `TestSupportError` naming the offset of a truncated or unknown record.
public func readRecordedCalls(_ path: String) throws -> [RecordedCall] {
    let data = try readFile(path)
    var calls: [RecordedCall] = []
    var offset = 0
    func integer<T: FixedWidthInteger>(_: T.Type, at position: Int) -> T {
        var value: T = 0
        for index in 0..<MemoryLayout<T>.size { value |= T(data[position + index]) << (8 * index) }
        return value
    }
    while offset < data.count {
        guard offset + 28 <= data.count, let kind = RecordedCall.Kind(rawValue: data[offset]) else {
            throw TestSupportError("\(path): a truncated or unknown record at byte \(offset)")
        }
        let length = Int(integer(UInt32.self, at: offset + 24))
        guard offset + 28 + length <= data.count else {
            throw TestSupportError("\(path): the record at byte \(offset) is cut short")
        }
        calls.append(
            RecordedCall(
                kind: kind, flags: data[offset + 1], handle: integer(UInt32.self, at: offset + 4),
                a: integer(UInt64.self, at: offset + 8), b: integer(UInt64.self, at: offset + 16),
                bytes: Array(data[(offset + 28)..<(offset + 28 + length)])))
        offset += 28 + length
    }
    return calls
}

/// A change to a file's bytes.
enum FileChange: Sendable {
    case write(offset: Int, bytes: [UInt8])
    case truncate(size: Int)
    case allocate(end: Int)

    func apply(to file: inout [UInt8], sectors: [Bool]? = nil, sectorSize: Int = 512) {
        switch self {
        case .write(let offset, let bytes):
            guard let sectors else {
                if file.count < offset + bytes.count {
                    file += [UInt8](repeating: 0, count: offset + bytes.count - file.count)
                }
                file.replaceSubrange(offset..<(offset + bytes.count), with: bytes)
                return
            }
            // Torn: only the chosen pieces (aligned to the device's sectors) reached the disk.
            for (index, range) in Self.pieces(offset: offset, count: bytes.count, size: sectorSize).enumerated()
            where sectors[index] {
                if file.count < range.upperBound {
                    file += [UInt8](repeating: 0, count: range.upperBound - file.count)
                }
                file.replaceSubrange(range, with: bytes[(range.lowerBound - offset)..<(range.upperBound - offset)])
            }
        case .truncate(let size):
            if sectors?.first == false { return }
            if size < file.count {
                file.removeLast(file.count - size)
            } else {
                file += [UInt8](repeating: 0, count: size - file.count)
            }
        case .allocate(let end):
            if sectors?.first == false { return }
            if file.count < end { file += [UInt8](repeating: 0, count: end - file.count) }
        }
    }

    /// The file ranges of a write of `count` bytes at `offset`, split at multiples of `size`.
    static func pieces(offset: Int, count: Int, size: Int) -> [Range<Int>] {
        var result: [Range<Int>] = []
        var start = offset
        while start < offset + count {
            let end = min(offset + count, (start / size + 1) * size)
            result.append(start..<end)
            start = end
        }
        return result
    }

    /// How many pieces a torn variant chooses among: the write's `size`-byte pieces, or 1.
    func pieceCount(size: Int) -> Int {
        if case .write(let offset, let bytes) = self {
            return Self.pieces(offset: offset, count: bytes.count, size: size).count
        }
        return 1
    }
}

/// A change to the names of the recorded directory.
enum NameChange: Sendable {
    case create(path: String, entry: Entry)
    case remove(path: String)

    enum Entry: Sendable, Equatable {
        case directory
        case file(Int)
    }

    func apply(to names: inout [String: Entry]) {
        switch self {
        case .create(let path, let entry): names[path] = entry
        case .remove(let path): names[path] = nil
        }
    }
}

/// What a power cut at one moment of the run could leave, before a variant chooses among the
/// writes still pending: the model of docs/RELIABILITY.md.
///
/// - A file's write, size change or allocation is on the disk once a later `fsync`/`fdatasync`
///   of the same file (through any descriptor) completed; a write through an `O_DSYNC`/`O_SYNC`
///   descriptor as soon as it returns. Until then it may be there or not, in any combination with
///   the file's other pending changes, and each may be torn at the device's 512-byte sectors.
/// - Name changes (create, mkdir, link, rename, unlink) reach the disk in the order they were
///   made, as a journaling file system commits them: a crash keeps some prefix of the pending ones,
///   and a name is on the disk once a later fsync of its directory completed (with every name
///   change before it).
public struct CrashState: Sendable {
    /// Where this state is in the run: after this many calls.
    public var point: Int
    /// Each file's contents as of its last completed sync (by file number).
    var durable: [Int: [UInt8]]
    /// Each file's changes since, in order; `true` for those on the disk already (O_DSYNC writes).
    var pending: [Int: [(change: FileChange, id: Int, settled: Bool)]]
    /// The names on the disk and those still pending.
    var durableNames: [String: NameChange.Entry]
    var pendingNames: [NameChange]
    /// How many changes each file had folded into `durable`, and how many name changes are
    /// durable: with the pending choices, they identify an image.
    var folded: [Int: Int]
    var foldedNames: Int
    /// The last LMDB transaction whose meta page write returned, and the one being written now (if any).
    public var committed: Int
    public var inFlight: Int?
    /// The acknowledgements written so far, each with the last transaction committed before it.
    public var acknowledgements: [(line: String, transaction: Int)]
    /// Whether the call after this point completes a sync (the points the variants look at hardest).
    public var beforeSync: Bool

    /// The number of pending file changes that a variant may keep or drop.
    public var pendingCount: Int { pending.values.reduce(0) { $0 + $1.filter { !$0.settled }.count } }
}

/// Which of a crash state's pending changes reach the disk.
public struct Variant: Sendable, CustomStringConvertible {
    public enum Choice: Sendable, Equatable {
        case dropped
        case applied
        /// Torn: these pieces (512-byte sectors, or `tearSize` pieces) were written.
        case torn([Bool])
    }

    public var name: String
    /// One choice per unsettled pending change, in order (by file number, then time).
    public var choices: [Choice]
    /// How many of the pending name changes are kept.
    public var names: Int

    public var description: String { name }
}

/// Walks a recorded run and gives the crash state after each call.
public struct RecordedRun: Sendable {
    public let calls: [RecordedCall]
    /// The recorded directory; images put its contents under their own directory.
    public let root: String
    /// LMDB's page size, from the first write of a new data file (two meta pages).
    public private(set) var pageSize = 4096

    public init(calls: [RecordedCall], root: String) {
        self.calls = calls
        self.root = root
        if let first = calls.first(where: { $0.kind == .write && $0.a == 0 && $0.bytes.count >= 2 * 512 }) {
            pageSize = first.bytes.count / 2
        }
    }

    /// Calls `body` with the crash state before each call and after the last; stops when it returns false.
    public func forEachCrashState(_ body: (CrashState) throws -> Bool) rethrows {
        var state = CrashState(
            point: 0, durable: [:], pending: [:], durableNames: [:], pendingNames: [], folded: [:], foldedNames: 0,
            committed: 0, inFlight: nil, acknowledgements: [], beforeSync: false)
        var volatileNames: [String: NameChange.Entry] = [:]
        var handles: [UInt32: (file: Int?, path: String, directory: Bool, dsync: Bool)] = [:]
        var nextFile = 0
        let syncFlags = UInt64(O_DSYNC | O_SYNC)

        for (index, call) in calls.enumerated() {
            // The state a crash just before this call completes leaves. An O_DSYNC write in progress
            // is pending (it may be torn); a meta page write in progress is the transaction in flight.
            var view = state
            view.point = index
            view.beforeSync = call.kind == .sync || (call.kind == .write && handles[call.handle]?.dsync == true)
            view.inFlight = call.kind == .write && handles[call.handle]?.file != nil ? metaTransaction(call) : nil
            if call.kind == .write, let handle = handles[call.handle], let file = handle.file, handle.dsync {
                view.pending[file, default: []].append((.write(offset: Int(call.a), bytes: call.bytes), index, false))
            }
            guard try body(view) else { return }

            switch call.kind {
            case .open:
                let path = call.text
                let directory = call.flags & 2 != 0
                var file: Int?
                // LMDB's lock file is not part of the model: LMDB rebuilds it when no process holds it.
                if !directory && !isLockFile(path) {
                    if call.flags & 1 != 0 || volatileNames[path] == nil {
                        file = nextFile
                        nextFile += 1
                        let change = NameChange.create(path: path, entry: .file(file!))
                        change.apply(to: &volatileNames)
                        state.pendingNames.append(change)
                        state.durable[file!] = []
                        state.folded[file!] = 0
                    } else if case .file(let existing) = volatileNames[path] {
                        file = existing
                    }
                    if let file, call.a & UInt64(O_TRUNC) != 0 {
                        state.pending[file, default: []].append((.truncate(size: 0), index, false))
                    }
                }
                handles[call.handle] = (file, path, directory, call.a & syncFlags != 0)
            case .write:
                guard let handle = handles[call.handle], let file = handle.file else { continue }
                state.pending[file, default: []].append(
                    (.write(offset: Int(call.a), bytes: call.bytes), index, handle.dsync))
                if let transaction = metaTransaction(call) { state.committed = max(state.committed, transaction) }
            case .truncate:
                guard let file = handles[call.handle]?.file else { continue }
                state.pending[file, default: []].append((.truncate(size: Int(call.a)), index, false))
            case .allocate:
                guard let file = handles[call.handle]?.file else { continue }
                state.pending[file, default: []].append((.allocate(end: Int(call.a + call.b)), index, false))
            case .sync:
                guard let handle = handles[call.handle] else { continue }
                if let file = handle.file {
                    var bytes = state.durable[file] ?? []
                    for change in state.pending[file] ?? [] { change.change.apply(to: &bytes) }
                    state.folded[file, default: 0] += state.pending[file]?.count ?? 0
                    state.durable[file] = bytes
                    state.pending[file] = []
                } else if handle.directory {
                    // Every name change up to the last one in this directory is now on the disk.
                    if let last = state.pendingNames.lastIndex(where: { parent(of: $0) == handle.path }) {
                        for change in state.pendingNames[...last] { change.apply(to: &state.durableNames) }
                        state.foldedNames += last + 1
                        state.pendingNames.removeFirst(last + 1)
                    }
                }
            case .close:
                handles[call.handle] = nil
            case .makeDirectory:
                let change = NameChange.create(path: call.text, entry: .directory)
                change.apply(to: &volatileNames)
                state.pendingNames.append(change)
            case .link, .rename:
                let (old, new) = call.paths
                guard let entry = volatileNames[old] else { continue }
                var changes = [NameChange.create(path: new, entry: entry)]
                if call.kind == .rename { changes.append(.remove(path: old)) }
                for change in changes {
                    change.apply(to: &volatileNames)
                    state.pendingNames.append(change)
                }
            case .unlink:
                let change = NameChange.remove(path: call.text)
                change.apply(to: &volatileNames)
                state.pendingNames.append(change)
            case .acknowledgement:
                state.acknowledgements.append((call.text, state.committed))
            }
        }
        state.point = calls.count
        state.beforeSync = false
        state.inFlight = nil
        _ = try body(state)
    }

    /// The transaction id a write of an LMDB meta page carries, if the write is one: LMDB writes
    /// a meta page from its map size to its end (120 bytes at offset 32 of page 0 or 1), the
    /// transaction id last.
    func metaTransaction(_ call: RecordedCall) -> Int? {
        guard call.bytes.count == 120, call.a == 32 || call.a == UInt64(pageSize) + 32 else { return nil }
        var id = 0
        for index in 0..<8 { id |= Int(call.bytes[112 + index]) << (8 * index) }
        return id
    }

    /// Whether `path` names an LMDB lock file (directory or single-file layout).
    func isLockFile(_ path: String) -> Bool { path.hasSuffix("/lock.mdb") || path.hasSuffix("-lock") }

    private func parent(of change: NameChange) -> String {
        let path: String
        switch change {
        case .create(let p, _), .remove(let p): path = p
        }
        return String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
    }
}

extension CrashState {
    /// The unsettled pending changes in the order variants choose for them.
    var choosable: [(file: Int, position: Int, change: FileChange, id: Int)] {
        var result: [(Int, Int, FileChange, Int)] = []
        for file in pending.keys.sorted() {
            for (position, entry) in (pending[file] ?? []).enumerated() where !entry.settled {
                result.append((file, position, entry.change, entry.id))
            }
        }
        return result
    }

    /// The variants to build at this point: everything pending dropped, everything applied (what a
    /// SIGKILL leaves), and, before a sync completes, each change omitted alone, `subsets` random
    /// subsets and `subsets` random subsets torn at `tearSize`-byte pieces (512: sectors); with
    /// `tornPrefixes`, also each change torn after each of its pieces, the others applied.
    public func variants(
        subsets: Int, tearSize: Int, tornPrefixes: Bool = false, generator: inout SeededGenerator
    ) -> [Variant] {
        let changes = choosable
        let names = pendingNames.count
        var result = [
            Variant(name: "all dropped", choices: Array(repeating: .dropped, count: changes.count), names: 0),
            allApplied,
        ]
        guard !changes.isEmpty || names > 0 else { return [result[1]] }
        if beforeSync {
            for index in changes.indices where changes.count > 1 {
                var choices = Array(repeating: Variant.Choice.applied, count: changes.count)
                choices[index] = .dropped
                result.append(Variant(name: "change \(changes[index].id) omitted", choices: choices, names: names))
            }
            for index in changes.indices where tornPrefixes {
                let pieces = changes[index].change.pieceCount(size: tearSize)
                for written in 1..<max(1, pieces) {
                    var choices = Array(repeating: Variant.Choice.applied, count: changes.count)
                    choices[index] = .torn((0..<pieces).map { $0 < written })
                    result.append(
                        Variant(
                            name: "change \(changes[index].id) torn after \(written) of \(pieces) pieces",
                            choices: choices, names: names))
                }
            }
        }
        let rounds = beforeSync ? subsets : min(subsets, 1)
        for round in 0..<(changes.isEmpty ? 0 : rounds * 2) {
            let torn = round % 2 == 1
            let choices = changes.map { entry -> Variant.Choice in
                guard Bool.random(using: &generator) else { return .dropped }
                guard torn else { return .applied }
                return .torn((0..<entry.change.pieceCount(size: tearSize)).map { _ in Bool.random(using: &generator) })
            }
            result.append(
                Variant(
                    name: torn ? "random subset, torn" : "random subset", choices: choices,
                    names: Int.random(in: 0...names, using: &generator)))
        }
        return result
    }

    /// Each file's pending changes with what `variant` chooses for them (settled ones are applied).
    func decided(_ variant: Variant) -> [Int: [(change: FileChange, id: Int, choice: Variant.Choice)]] {
        var result: [Int: [(FileChange, Int, Variant.Choice)]] = [:]
        var next = 0
        for file in pending.keys.sorted() {
            result[file] = (pending[file] ?? []).map { entry in
                guard !entry.settled else { return (entry.change, entry.id, .applied) }
                defer { next += 1 }
                return (entry.change, entry.id, variant.choices[next])
            }
        }
        return result
    }

    /// A value that is equal for two (state, variant) pairs exactly when their images are built
    /// from the same changes: the image's identity before any byte is written.
    public func identity(of variant: Variant) -> [Int] {
        var key = [foldedNames + variant.names]
        let decisions = decided(variant)
        for file in Set(folded.keys).union(pending.keys).sorted() {
            // Applied changes that directly follow the folded ones count as folded: the same image
            // comes from a later point where a sync folded them.
            var leading = folded[file] ?? 0
            var rest: [Int] = []
            var contiguous = true
            for entry in decisions[file] ?? [] {
                switch entry.choice {
                case .applied where contiguous: leading += 1
                case .applied: rest.append(entry.id)
                case .dropped: contiguous = false
                case .torn(let pieces):
                    contiguous = false
                    rest.append(entry.id)
                    rest.append(pieces.reduce(0) { $0 &* 31 &+ ($1 ? 1 : 0) })
                }
            }
            key += [file, leading, rest.count] + rest
        }
        return key
    }

    /// The variant that keeps every pending change: what a SIGKILL at this point leaves.
    public var allApplied: Variant {
        Variant(
            name: "all applied", choices: Array(repeating: .applied, count: pendingCount), names: pendingNames.count)
    }

    /// The files of the image of `variant`.
    public func image(of variant: Variant, root: String, tearSize: Int) -> ImageFiles {
        var names = durableNames
        for change in pendingNames.prefix(variant.names) { change.apply(to: &names) }
        var files = durable
        for (file, entries) in decided(variant) {
            var bytes = files[file] ?? []
            for entry in entries {
                switch entry.choice {
                case .applied: entry.change.apply(to: &bytes)
                case .dropped: break
                case .torn(let pieces): entry.change.apply(to: &bytes, sectors: pieces, sectorSize: tearSize)
                }
            }
            files[file] = bytes
        }
        // A name is on the disk when its directory is: shallow paths first.
        var present: Set<String> = [root]
        var entries: [(String, [UInt8]?)] = []
        for (path, entry) in names.sorted(by: { ($0.key.count, $0.key) < ($1.key.count, $1.key) }) {
            guard path.hasPrefix(root + "/"), let slash = path.lastIndex(of: "/"),
                present.contains(String(path[..<slash]))
            else { continue }
            switch entry {
            case .directory:
                present.insert(path)
                entries.append((String(path.dropFirst(root.count)), nil))
            case .file(let file):
                entries.append((String(path.dropFirst(root.count)), files[file] ?? []))
            }
        }
        return ImageFiles(entries: entries)
    }
}
