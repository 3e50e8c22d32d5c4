import Foundation
@_spi(LMDB) import Hoard
import HoardTestSupport
import LMDB
import TestSupport
import Testing

/// A backup of a damaged store: `hoard dump` leaves out exactly what `hoard verify` names, the
/// dump restores, and a forensic dump with the damage in it loads only with `--skip-damaged`.
@Suite("hoard dump and load of a damaged store")
struct CLIDamageTests {
    @Test("randomly damaged records: dump leaves out and names what verify names; the dump restores the rest")
    func damagedStore() throws {
        let seed = SeededGenerator.seedFromEnvironment()
        var random = SeededGenerator(seed: seed)
        try withTemporaryDirectory { dir in
            let path = dir + "/store"
            do {
                let store = try Store(path: path, options: .init(durability: .riskStoreOnOSCrash))
                try store.collection(Note.self).put(
                    (1...300).map {
                        Note(
                            id: $0, text: "note \($0) " + String(repeating: "x", count: Int($0 % 40)), stars: 3,
                            pinned: $0 % 2 == 0)
                    })
                try store.collection(Tag.self).put((1...50).map { Tag(id: "tag\($0)", uses: $0) })
            }
            // Damage a copy through LMDB, as a failing disk or foreign code might: a bit of the
            // payload flipped, a bit of the header flipped, a value cut short.
            let copy = dir + "/copy"
            #expect(try hoard("compact", path, copy).status == 0)
            let damagedIDs = Array((1...300).shuffled(using: &random).prefix(30))
            do {
                let environment = try Environment(path: copy)
                let notes = try environment.openDatabase("c:Note")
                try environment.write { txn in
                    for (index, id) in damagedIDs.enumerated() {
                        let key = Int64(id).keyBytes
                        var record = try #require(try txn.value(forKey: key, in: notes))
                        switch index % 3 {
                        case 0:
                            let byte = Int.random(in: RecordHeader.minimumSize..<record.count, using: &random)
                            record[byte] ^= 1 << UInt8.random(in: 0..<8, using: &random)
                        case 1:
                            let byte = Int.random(in: 0..<RecordHeader.minimumSize, using: &random)
                            record[byte] ^= 1 << UInt8.random(in: 0..<8, using: &random)
                        default:
                            record.removeLast(Int.random(in: 1..<record.count, using: &random))
                        }
                        try txn.put(record, forKey: key, in: notes)
                    }
                }
            }
            let verify = try jsonObject(try hoard("verify", copy, "--json").stdout)
            let problems = try #require(verify["problems"] as? [[String: Any]], "seed \(seed)")
            let named = Set(problems.compactMap { $0["id"] as? String })
            #expect(named == Set(damagedIDs.map(String.init)), "verify names every damaged record (seed \(seed))")

            // The default dump: damaged records left out and named, the rest dumped, exit 1.
            let dump = try hoard("dump", copy)
            #expect(dump.status == 1, "seed \(seed)")
            let reported = dump.stderr.split(separator: "\n").map(String.init)
            #expect(Set(reported.dropLast().compactMap { Self.noteID(in: $0) }) == named, "\(dump.stderr)")
            #expect(reported.dropLast().allSatisfy { $0.hasPrefix("Note[") })
            #expect(reported.count == named.count + 1, "\(dump.stderr)")
            #expect(reported.last?.contains("left out \(named.count) damaged records") == true, "\(dump.stderr)")
            #expect(reported.last?.contains("the other \(350 - named.count) of 350") == true, "\(dump.stderr)")
            let lines = try jsonLines(dump.stdout)
            let dumpedIDs = Set(
                lines.filter { $0["collection"] as? String == "Note" && $0["kind"] as? String == "record" }
                    .compactMap { $0["id"] as? String })
            #expect(dumpedIDs == Set((1...300).map(String.init)).subtracting(named))
            #expect(!dump.stdout.contains("\"damage\""))

            // --json: the same objects verify --json lists, then a count.
            let json = try hoard("dump", copy, "--json")
            #expect(json.status == 1 && json.stdout == dump.stdout)
            let objects = try jsonLines(json.stderr)
            #expect(objects.dropLast().map(Self.comparable) == problems.map(Self.comparable))
            #expect(objects.last?["damaged"] as? Int == named.count)
            #expect(objects.last?["dumped"] as? Int == 350 - named.count)

            // The dump loads into an empty store without options, which verifies clean and holds
            // every record that was not damaged, byte for byte (its dump is the same dump).
            let restored = dir + "/restored"
            let load = try hoard("load", restored, input: Array(dump.stdout.utf8))
            #expect(load.status == 0, "\(load.stderr)")
            #expect(try hoard("verify", restored).status == 0)
            #expect(try hoard("dump", restored).stdout == dump.stdout)

            // A forensic dump keeps the damaged records, and says so: a plain load refuses it
            // (nothing loaded), --skip-damaged loads the rest and names each line it skipped.
            let forensic = try hoard("dump", copy, "--include-damaged")
            #expect(forensic.status == 1)
            #expect(forensic.stdout.hasPrefix(#"{"hoard":"dump","format":1,"includesDamaged":true}"#))
            #expect(forensic.stderr.split(separator: "\n").count == named.count + 1)
            let refused = try hoard("load", dir + "/refused", input: Array(forensic.stdout.utf8))
            #expect(refused.status == 1 && refused.stderr.contains("--skip-damaged"), "\(refused.stderr)")
            #expect(!FileManager.default.fileExists(atPath: dir + "/refused"), "refused before the store was made")
            let skipping = dir + "/skipping"
            let skipped = try hoard("load", skipping, "--skip-damaged", input: Array(forensic.stdout.utf8))
            #expect(skipped.status == 1, "\(skipped.stderr)")
            let skippedLines = skipped.stderr.split(separator: "\n").map(String.init)
            #expect(Set(skippedLines.dropLast().compactMap { Self.noteID(in: $0) }) == named, "\(skipped.stderr)")
            #expect(skippedLines.dropLast().allSatisfy { $0.hasPrefix("stdin line ") && $0.hasSuffix("; skipped") })
            #expect(skippedLines.last == "hoard load: skipped \(named.count) damaged records (named above)")
            #expect(try hoard("verify", skipping).status == 0)
            #expect(try hoard("dump", skipping).stdout == dump.stdout)

            // A default dump of a damaged record loads nothing when the line is put back by hand.
            let damagedLine = try #require(forensic.stdout.split(separator: "\n").first { $0.contains("\"damage\"") })
            let planted = dump.stdout + damagedLine + "\n"
            let plain = try hoard("load", dir + "/planted", input: Array(planted.utf8))
            #expect(plain.status == 1 && plain.stderr.contains("the record is damaged"), "\(plain.stderr)")
        }
    }

    /// The ID in a line that names a record as `Note[ID]: …`.
    static func noteID(in line: String) -> String? {
        guard let open = line.range(of: "Note["), let close = line[open.upperBound...].firstIndex(of: "]") else {
            return nil
        }
        return String(line[open.upperBound..<close])
    }

    /// A problem's fields as text, to compare the objects of two outputs.
    static func comparable(_ object: [String: Any]) -> [String: String] {
        object.compactMapValues { $0 as? String }
    }
}
