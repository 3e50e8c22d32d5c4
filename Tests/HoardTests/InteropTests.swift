import CBOR
import Foundation
@_spi(LMDB) import Hoard
import HoardTestSupport
import TestSupport
import Testing
import VariableCoding

/// A store read from Python, following docs/FORMAT.md only (tools/interop/read_store.py).
@Suite("Interoperability")
struct InteropTests {
    /// The Python that has lmdb and cbor2: $HOARD_PYTHON (tools/test.sh sets it up), else python3.
    static var python: String {
        ProcessInfo.processInfo.environment["HOARD_PYTHON"] ?? "/usr/bin/python3"
    }

    static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
            .appendingPathComponent("tools/interop/read_store.py").path
    }

    @Test("FORMAT.md's Python sketch reads records of the current format")
    func formatSketch() throws {
        let page = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/FORMAT.md")
        let text = try String(contentsOf: page, encoding: .utf8)
        let start = try #require(text.range(of: "```python\n"), "FORMAT.md has no Python sketch")
        let end = try #require(text.range(of: "```", range: start.upperBound..<text.endIndex))
        let sketch = String(text[start.upperBound..<end.lowerBound])
        #expect(sketch.contains("b\"collection:User\"") && sketch.contains("b\"c:User\""))
        try withTemporaryDirectory { dir in
            let notes = [
                Note(id: 3, text: "three", stars: 1, pinned: true), Note(id: 9, text: "Grüße", stars: 5, pinned: false),
            ]
            try Store(path: dir + "/store", options: testOptions).collection(Note.self).put(notes)
            // The sketch as printed, for the collection Note, printing what it read.
            let program =
                "import json\npath = \(String(reflecting: dir + "/store"))\n"
                + sketch.replacingOccurrences(of: "User", with: "Note")
                + "        print(json.dumps({\"version\": version, \"payload\": payload}))\n"
            try writeFile(dir + "/sketch.py", Array(program.utf8))
            let child = try ChildProcess(Self.python, [dir + "/sketch.py"])
            var read: [[String: Any]] = []
            while let line = try child.readLine() {
                read.append(try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]))
            }
            #expect(child.wait() == 0, "the sketch failed")
            #expect(read.count == notes.count)
            for (note, record) in zip(notes, read) {
                let payload = try #require(record["payload"] as? [String: Any])
                #expect(record["version"] as? Int == 3)
                #expect(payload["ID"] as? Int == Int(note.id) && payload["TEXT"] as? String == note.text)
                #expect(payload["STARS"] as? Int == note.stars && payload["PINNED"] as? Bool == note.pinned)
            }
        }
    }

    @Test("Python's lmdb and cbor2 read every field of every record")
    func pythonReadsTheStore() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/store"
            let notes = [
                Note(id: -5, text: "minus", stars: 4, pinned: true),
                Note(id: 12, text: "Grüße 水", stars: 0, pinned: false),
                Note(id: 30, text: "in record format 2", stars: 2, pinned: true),
            ]
            let tags = [Tag(id: "", uses: 1), Tag(id: "swift", uses: 9)]
            do {
                let store = try Store(path: path, options: testOptions)
                try store.collection(Note.self).put(notes[0], expiry: .at(Date(timeIntervalSince1970: 1_900_000_000)))
                try store.collection(Note.self).put(notes[1])
                try writeRecord(notes[2], version: 3, in: store)  // keys as text, as before numbers
                try store.collection(Tag.self).put(tags)
                // A nested model whose key changed between versions: one record of each version,
                // the older one in record format 1.
                let framed = try store.collection(FramedTwice.self)
                try framed.put(FramedTwice(id: 2, frame: Frame(width: 20)))
                let payload = try CBOREncoder(deterministic: true, userInfo: [.keySet: KeySetID.local(1)]).encode(
                    FramedTwice(id: 1, frame: Frame(width: 10)))
                let database = try store.environment.openDatabase("c:FramedTwice")
                try store.environment.write { txn in
                    try txn.put(
                        ChecksumTests.formatOneRecord(version: 1, writtenAt: 7, expiresAt: nil, payload: payload),
                        forKey: Int64(1).keyBytes, in: database)
                }
            }
            let child = try ChildProcess(Self.python, [Self.script, path])
            var lines: [[String: Any]] = []
            while let line = try child.readLine() {
                lines.append(
                    try #require(
                        try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not JSON: \(line)"))
            }
            #expect(
                child.wait() == 0,
                "read_store.py failed (is \(Self.python) set up with lmdb and cbor2? tools/test.sh does it)")
            #expect(lines.first?["format"] as? Int == Store.formatVersion)

            let registry = lines.filter { $0["registry"] as? String == "Note" }.first?["entry"] as? [String: Any]
            #expect(registry?["type"] as? String == "Note")
            #expect(registry?["current"] as? Int == 3)
            let versions = registry?["versions"] as? [String: [String: String]]
            #expect(versions?["1"] == ["id": "ID", "text": "BODY", "stars": "STARS"])
            #expect(versions?["3"] == ["id": "ID", "text": "TEXT", "stars": "STARS", "pinned": "PINNED"])

            let records = lines.filter { $0["collection"] != nil }
            #expect(records.count == 7)
            // The nested model's fields, named through the registry's `nested` entry alone.
            for (id, version, width) in [(Int64(1), 1, 10), (Int64(2), 2, 20)] {
                let key = id.keyBytes.map { String(format: "%02x", $0) }.joined()
                let record = try #require(
                    records.first { $0["collection"] as? String == "FramedTwice" && $0["key"] as? String == key })
                #expect(record["version"] as? Int == version)
                #expect(record["written"] as? Int == (version == 1 ? 7 : 1_700_000_000_000))
                let named = try #require(record["named"] as? [String: Any])
                #expect(named["id"] as? Int == Int(id) && named["frame.width"] as? Int == width, "\(named)")
            }
            let note = try #require(records.first { $0["collection"] as? String == "Note" }?["named"] as? [String: Any])
            #expect(Set(note.keys) == ["id", "text", "stars", "pinned"])
            for note in notes {
                let record = try #require(
                    records.first {
                        $0["key"] as? String == note.id.keyBytes.map { String(format: "%02x", $0) }.joined()
                    })
                #expect(record["collection"] as? String == "Note")
                #expect(record["version"] as? Int == 3)
                #expect(record["written"] as? Int == (note.id == 30 ? 42 : 1_700_000_000_000))
                #expect((record["expires"] as? Int) == (note.id == -5 ? 1_900_000_000_000 : nil))
                let payload = try #require(record["payload"] as? [String: Any])
                #expect(Set(payload.keys) == ["ID", "TEXT", "STARS", "PINNED"])
                #expect(payload["ID"] as? Int == Int(note.id))
                #expect(payload["TEXT"] as? String == note.text)
                #expect(payload["STARS"] as? Int == note.stars)
                #expect(payload["PINNED"] as? Bool == note.pinned)
            }
            let empty = try #require(records.first { $0["key"] as? String == "01" })
            #expect((empty["payload"] as? [String: Any])?["id"] as? String == "")
            #expect((empty["payload"] as? [String: Any])?["uses"] as? Int == 1)
        }
    }
}
