import Foundation
import Hoard
import TestSupport
import Testing
import VariableCoding
import VariableCodingMacros

// The README's "Models with several key sets" example, compiled and run here. The lines between
// each pair of markers must appear in README.md as they are (indentation aside), which the test
// checks: so the README cannot drift away from code that builds and works.

// README begin: declaration
@VariablyCoded
struct User: Identifiable {
    var id: Int64
    var name: String
    var age: Int = 0          // the default when a key set or a record has no age
    var nickname: String?     // nil when missing or null

    static let keySets = KeySets<User>(
        local: [1: [\.id: "ID", \.name: "NAME", \.age: "AGE", \.nickname: "NICK"]],
        remote: ["v1": [\.id: "id", \.name: "user_name", \.age: "user_age", \.nickname: "nick"]]
    )
}
// README end

@Suite("README")
struct ReadmeSnippetTests {
    /// The marked blocks of this file, each as trimmed lines.
    func markedBlocks() throws -> [[String]] {
        let source = try String(contentsOfFile: #filePath, encoding: .utf8)
        var blocks: [[String]] = []
        var current: [String]?
        for line in source.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("// README begin") {
                current = []
            } else if trimmed == "// README end" {
                blocks.append(current ?? [])
                current = nil
            } else if current != nil {
                current?.append(trimmed)
            }
        }
        return blocks
    }

    @Test("the model example in the README is this file's code, and it works as the README says")
    func modelExample() throws {
        let readmePath = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("README.md").path
        let readme = try String(contentsOfFile: readmePath, encoding: .utf8)
            .split(separator: "\n", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        let blocks = try markedBlocks()
        #expect(blocks.count == 2)
        for block in blocks {
            let found = readme.indices.contains { start in
                start + block.count <= readme.count && Array(readme[start..<start + block.count]) == block
            }
            #expect(found, "README.md does not contain, as it is:\n\(block.joined(separator: "\n"))")
        }

        let serverJSON = Data(#"{"id": 7, "user_name": "Ada", "nick": null}"#.utf8)
        try withStore { store, _ in
            // README begin: usage
            let user = try JSONDecoder().decode(User.self, from: serverJSON, keySet: .remote("v1"))
            let users = try store.collection(User.self)   // records in CBOR with local key set 1
            try users.put(user)
            // README end
            #expect(user.id == 7 && user.name == "Ada" && user.age == 0 && user.nickname == nil)
            let stored = try #require(try users.get(7))
            #expect(stored.id == 7 && stored.name == "Ada" && stored.age == 0 && stored.nickname == nil)
            #expect(try users.header(of: 7)?.version == 1)
        }
    }
}
