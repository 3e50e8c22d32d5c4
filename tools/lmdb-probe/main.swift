// lmdb-probe: a second process for the LMDB tests, driven line by line over stdin/stdout.
//
//   LMDBProbe open PATH [--read-only] [--as-user UID]   open the store, answer "open ok" or
//                                                       "open error KIND DESCRIPTION", then serve:
//       get DB KEY            -> "value TEXT" | "nil"
//       put DB KEY VALUE      -> "ok"
//       count DB              -> "count N"
//       snapshot DB           -> "snapshot ENTRIES COUNTER" (one read transaction)
//       batches DB N SIZE     -> N write transactions of SIZE new keys each plus the key
//                                "counter"; answers "ok" after the last one
//       fill DB N SIZE        -> N values of SIZE bytes in one write transaction; "ok MAPSIZE"
//       hold-write            -> "holding" while a write transaction (LMDB's writer lock) stays
//                                open until the next line
//       hold-read             -> "holding" while a read transaction stays open until the next line
//       records DB N VERSION  -> N Hoard records (IDs 1_000_000…, payload {"ID": id}) of key-set
//                                VERSION in one write transaction; "holding" before the commit,
//                                which waits for the next line; then "committed"
//       stale                 -> "stale N" (stale reader slots, not cleared)
//       exit                  -> ends the process
//   LMDBProbe fds FILE...    -> "fds N": how many of this process's descriptors refer to FILEs
//   LMDBProbe store PATH      open the Hoard store, answer "open ok", then serve:
//       collection NAME A|B   -> "ok" | "error DESCRIPTION": opens collection NAME with model
//                                RaceA or RaceB, which agree on version 1 and name version 2's
//                                key differently (the registry must record only one of them)
//       exit                  -> ends the process
//   LMDBProbe bounded PATH RECORDS BYTES FIRST ROUNDS BATCH
//                             writes into collection Sized, opened with a capacity of RECORDS
//                             records and BYTES bytes (0: no bound on it): ROUNDS rounds (0: until
//                             killed), each a bulk put of BATCH new records (IDs from FIRST on, text
//                             of 0 to 288 bytes) and a delete of the round's first ID in a write
//                             of its own every fourth round; answers "committed N" after round N,
//                             then "done"
//   LMDBProbe observed PATH [--change-log N]
//                             opens the store (keeping a change log of N transactions when asked),
//                             answers "open ok", then writes collection Sized, one commit each:
//       put ID TEXT           -> "ok TXN" (TXN: the transaction id a read sees after the commit)
//       delete ID             -> "ok TXN"
//       clear                 -> "ok TXN" (deleteAll)
//       random SEED WRITES IDS -> "done" after WRITES puts or deletes (one in eight) of IDs below IDS
//       exit                  -> ends the process
//
// Every answer is one line, so the parent waits on the pipe, never on a timer.
import CBOR
@_spi(LMDB) import Hoard
import LMDB
import TestSupport
import VariableCoding

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes one unbuffered line, so the parent sees it at once.
func reply(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
}

func bytes(_ text: Substring) -> [UInt8] { Array(text.utf8) }

func serve(_ env: Environment) throws {
    while let line = readLine() {
        let words = line.split(separator: " ")
        guard let command = words.first else { continue }
        do {
            switch command {
            case "get":
                let db = try env.openDatabase(String(words[1]))
                let value = try env.read { txn in try txn.value(forKey: bytes(words[2]), in: db) }
                reply(value.map { "value " + String(decoding: $0, as: UTF8.self) } ?? "nil")
            case "put":
                let db = try env.openDatabase(String(words[1]), create: true)
                try env.write { txn in try txn.put(bytes(words[3]), forKey: bytes(words[2]), in: db) }
                reply("ok")
            case "count":
                let db = try env.openDatabase(String(words[1]))
                reply("count \(try env.read { txn in try txn.count(in: db) })")
            case "snapshot":
                let db = try env.openDatabase(String(words[1]))
                let (entries, counter) = try env.read { txn in
                    let counter =
                        try txn.value(forKey: bytes("counter"), in: db).map { String(decoding: $0, as: UTF8.self) }
                        ?? "0"
                    return (try txn.count(in: db), counter)
                }
                reply("snapshot \(entries) \(counter)")
            case "batches":
                let db = try env.openDatabase(String(words[1]), create: true)
                guard let batches = Int(words[2]), let size = Int(words[3]) else { reply("error usage"); continue }
                for batch in 0..<batches {
                    try env.write { txn in
                        for i in 0..<size {
                            try txn.put(bytes("v"), forKey: bytes(Substring("k\(batch * size + i)")), in: db)
                        }
                        try txn.put(bytes(Substring("\(batch + 1)")), forKey: bytes("counter"), in: db)
                    }
                }
                reply("ok")
            case "fill":
                let db = try env.openDatabase(String(words[1]), create: true)
                guard let count = Int(words[2]), let size = Int(words[3]) else { reply("error usage"); continue }
                let value = [UInt8](repeating: 0x5A, count: size)
                try env.write { txn in
                    for i in 0..<count { try txn.put(value, forKey: bytes(Substring("f\(i)")), in: db) }
                }
                reply("ok \(try env.info().mapSize)")
            case "hold-write":
                try env.write { _ in
                    reply("holding")
                    _ = readLine()
                }
                reply("released")
            case "hold-read":
                try env.read { _ in
                    reply("holding")
                    _ = readLine()
                }
                reply("released")
            case "records":
                let db = try env.openDatabase(String(words[1]))
                guard let count = Int(words[2]), let version = Int(words[3]) else { reply("error usage"); continue }
                try env.write { txn in
                    for i in 0..<count {
                        let id = Int64(1_000_000 + i)
                        let payload = CBORValue.map([.init(.text("ID"), .unsigned(UInt64(id)))]).encoded()
                        let record = RecordHeader(version: version, writtenAt: 0, expiresAt: nil).record(with: payload)
                        try txn.put(record, forKey: id.keyBytes, in: db)
                    }
                    reply("holding")
                    _ = readLine()
                }
                reply("committed")
            case "stale":
                reply("stale \(try env.readers().filter(\.isStale).count)")
            case "exit":
                return
            default:
                reply("error unknown command \(command)")
            }
        } catch let error as LMDBError {
            reply("error \(error.kind) \(error)")
        }
    }
}

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    FileHandleStandardError.emit("usage: LMDBProbe open PATH [--read-only] [--as-user UID] | LMDBProbe fds FILE...\n")
    exit(2)
}
switch arguments[1] {
case "fds":
    reply("fds \(countDescriptors(referringTo: Array(arguments[2...])))")
case "store":
    do {
        // Room for a collection per round of the registry race test.
        let store = try Store(path: arguments[2], options: .init(durability: .riskStoreOnOSCrash, maxCollections: 500))
        reply("open ok")
        serveStore(store)
    } catch {
        reply("open error \(error)")
    }
case "bounded":
    do {
        try writeBounded(Array(arguments[2...]))
        reply("done")
    } catch {
        reply("error \(error)")
    }
case "observed":
    // A writer of collection Sized for the observation tests: commands on stdin, one reply each.
    do {
        var options = Store.Options(durability: .riskStoreOnOSCrash)
        if let index = arguments.firstIndex(of: "--change-log"), index + 1 < arguments.count {
            options.changeLog = Int(arguments[index + 1])
        }
        let store = try Store(path: arguments[2], options: options)
        reply("open ok")
        try serveObserved(store, try store.collection(Sized.self))
    } catch {
        reply("error \(error)")
    }
case "open":
    var options = Environment.Options(durability: .riskStoreOnOSCrash)
    options.readOnly = arguments.contains("--read-only")
    if let index = arguments.firstIndex(of: "--as-user"), index + 1 < arguments.count,
        let uid = UInt32(arguments[index + 1])
    {
        guard setgid(uid) == 0, setuid(uid) == 0 else {
            reply("open error setuid \(String(cString: strerror(errno)))")
            exit(1)
        }
    }
    do {
        let env = try Environment(path: arguments[2], options: options)
        reply("open ok")
        try serve(env)
    } catch let error as LMDBError {
        reply("open error \(error.kind) \(error)")
    }
default:
    FileHandleStandardError.emit("unknown mode \(arguments[1])\n")
    exit(2)
}

enum FileHandleStandardError {
    static func emit(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    }
}

/// Two models of one collection that agree on key set 1 and disagree on key set 2.
struct RaceA: VariablyCodable, Identifiable {
    var id: Int64
    var name: String
    static let keySets = KeySets<RaceA>(local: [1: [\.id: "ID", \.name: "NAME"], 2: [\.id: "ID", \.name: "NAME_A"]])
    init(from container: DecodingContainer<RaceA>) throws {
        id = try container.decodeValue(for: \.id)
        name = try container.decodeValue(for: \.name)
    }
    func encode(to container: inout EncodingContainer<RaceA>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(name, for: \.name)
    }
}

struct RaceB: VariablyCodable, Identifiable {
    var id: Int64
    var name: String
    static let keySets = KeySets<RaceB>(local: [1: [\.id: "ID", \.name: "NAME"], 2: [\.id: "ID", \.name: "NAME_B"]])
    init(from container: DecodingContainer<RaceB>) throws {
        id = try container.decodeValue(for: \.id)
        name = try container.decodeValue(for: \.name)
    }
    func encode(to container: inout EncodingContainer<RaceB>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(name, for: \.name)
    }
}

func serveStore(_ store: Store) {
    while let line = readLine() {
        let words = line.split(separator: " ").map(String.init)
        switch words.first {
        case "collection" where words.count == 3:
            do {
                if words[2] == "A" {
                    _ = try store.collection(RaceA.self, named: words[1])
                } else {
                    _ = try store.collection(RaceB.self, named: words[1])
                }
                reply("ok")
            } catch {
                reply("error \(error)")
            }
        case "exit":
            return
        default:
            reply("error unknown command \(line)")
        }
    }
}

/// A model whose records differ in size, for the capacity tests.
struct Sized: VariablyCodable, Identifiable {
    var id: Int64
    var text: String
    static let keySets = KeySets<Sized>(local: [1: [\.id: "ID", \.text: "TEXT"]])
    init(id: Int64, text: String) { (self.id, self.text) = (id, text) }
    init(from container: DecodingContainer<Sized>) throws {
        id = try container.decodeValue(for: \.id)
        text = try container.decodeValue(for: \.text)
    }
    func encode(to container: inout EncodingContainer<Sized>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(text, for: \.text)
    }
}

func writeBounded(_ words: [String]) throws {
    guard words.count == 6, let records = Int(words[1]), let bytes = Int(words[2]), let first = Int64(words[3]),
        let rounds = Int(words[4]), let batch = Int(words[5])
    else {
        reply("error usage: bounded PATH RECORDS BYTES FIRST ROUNDS BATCH")
        exit(2)
    }
    let store = try Store(path: words[0], options: .init(durability: .riskStoreOnOSCrash))
    let sized = try store.collection(
        Sized.self, capacity: Capacity(records: records == 0 ? nil : records, bytes: bytes == 0 ? nil : bytes))
    var round = 0
    var next = first
    while rounds == 0 || round < rounds {
        round += 1
        let models = (0..<batch).map { offset in
            let id = next + Int64(offset)
            return Sized(id: id, text: String(repeating: "x", count: Int(id % 97) * 3))
        }
        try sized.put(models)
        if round % 4 == 0 { try sized.delete(next) }
        next += Int64(batch)
        reply("committed \(round)")
    }
}

/// Serves `put ID TEXT`, `delete ID`, `clear` and `random SEED WRITES IDS` (that many single
/// writes, each a put or now and then a delete of an ID below IDS, from a seeded generator), then
/// `exit`; each command is answered once it committed.
func serveObserved(_ store: Store, _ sized: HoardCollection<Sized>) throws {
    while let line = readLine() {
        let words = line.split(separator: " ").map(String.init)
        switch (words.first, words.count) {
        case ("put", 3):
            try sized.put(Sized(id: Int64(words[1]) ?? 0, text: words[2]))
            reply("ok \(try store.read { $0.id })")
        case ("delete", 2):
            try sized.delete(Int64(words[1]) ?? 0)
            reply("ok \(try store.read { $0.id })")
        case ("clear", 1):
            try sized.deleteAll()
            reply("ok \(try store.read { $0.id })")
        case ("random", 4):
            guard let seed = UInt64(words[1]), let writes = Int(words[2]), let ids = Int64(words[3]) else {
                reply("error usage: random SEED WRITES IDS")
                continue
            }
            var generator = SeededGenerator(seed: seed)
            for write in 0..<writes {
                let id = Int64.random(in: 0..<ids, using: &generator)
                if Int.random(in: 0..<8, using: &generator) == 0 {
                    try sized.delete(id)
                } else {
                    try sized.put(Sized(id: id, text: "child-\(seed)-\(write)"))
                }
            }
            reply("done")
        case ("exit", 1):
            return
        default:
            reply("error unknown command \(line)")
        }
    }
}
