import Foundation
import Hoard
import HoardTestSupport
import TestSupport
import Testing

// The README's examples ("Models with several key sets", "Using the store"), compiled and run
// here and in ReadmeModel.swift (the model's declaration, in a file that imports Hoard alone).
// The lines between each pair of markers must appear in README.md as they are (indentation
// aside), which a test checks: so the README cannot drift away from code that builds and works.
// A marker may add articles of the DocC catalog that show the block too
// (`// README begin: declaration; also GettingStarted.md`), or name the articles that show it in
// place of the README (`// README begin: testing; only Testing.md`); they are checked the same way.

@Suite("README")
struct ReadmeSnippetTests {
    /// A marked block, as trimmed lines, and the DocC articles that show it besides the README.
    struct Block {
        var lines: [String] = []
        var articles: [String] = []
        var inReadme = true
    }

    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The marked blocks of this file, ReadmeModel.swift and HoardTestingExampleTests.swift.
    func markedBlocks() throws -> [Block] {
        let here = URL(fileURLWithPath: #filePath)
        let others = ["ReadmeModel.swift", "HoardTestingExampleTests.swift"].map {
            here.deletingLastPathComponent().appendingPathComponent($0).path
        }
        let source = try (others + [here.path]).map { try String(contentsOfFile: $0, encoding: .utf8) }.joined(
            separator: "\n")
        var blocks: [Block] = []
        var current: Block?
        for line in source.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("// README begin") {
                let only = trimmed.contains("; only ")
                let named = trimmed.components(separatedBy: only ? "; only " : "; also ").dropFirst().first ?? ""
                current = Block(
                    articles: named.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) },
                    inReadme: !only)
            } else if trimmed == "// README end" {
                blocks.append(current ?? Block())
                current = nil
            } else if current != nil {
                current?.lines.append(trimmed)
            }
        }
        return blocks
    }

    /// The lines of a file of the repository, each trimmed.
    func trimmedLines(of path: String) throws -> [String] {
        try String(contentsOfFile: Self.repository.appendingPathComponent(path).path, encoding: .utf8)
            .split(separator: "\n", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
    }

    func contains(_ text: [String], _ block: [String]) -> Bool {
        text.indices.contains { start in
            start + block.count <= text.count && Array(text[start..<start + block.count]) == block
        }
    }

    @Test("the README's examples are this file's code: every marked block appears in README.md as it is")
    func sameText() throws {
        let readme = try trimmedLines(of: "README.md")
        let blocks = try markedBlocks()
        #expect(blocks.count == 6)
        // The model's declaration and the testing example are in the Getting started and Testing articles.
        #expect(blocks.flatMap(\.articles).sorted() == ["GettingStarted.md", "Testing.md"])
        #expect(blocks.filter(\.inReadme).count == 5)
        for block in blocks where block.inReadme {
            #expect(
                contains(readme, block.lines),
                "README.md does not contain, as it is:\n\(block.lines.joined(separator: "\n"))")
        }
        for block in blocks {
            for article in block.articles {
                let text = try trimmedLines(of: "Sources/Hoard/Documentation.docc/" + article)
                #expect(
                    contains(text, block.lines),
                    "\(article) does not contain, as it is:\n\(block.lines.joined(separator: "\n"))")
            }
        }
    }

    @Test("the README's first example runs as written, at the path it names")
    func firstExample() throws {
        let path = FileManager.default.temporaryDirectory.path + "/hoard-first-example"
        try? FileManager.default.removeItem(atPath: path)
        defer { try? FileManager.default.removeItem(atPath: path) }
        // README begin: usage
        let store = try Store(path: FileManager.default.temporaryDirectory.path + "/hoard-first-example")
        let users = try store.collection(User.self)  // records in CBOR with local key set 1
        let serverJSON = Data(#"{"id": 7, "user_name": "Ada", "nick": null}"#.utf8)
        let user = try JSONDecoder().decode(User.self, from: serverJSON, keySet: .remote("v1"))
        try users.put(user)
        print(try users.get(7)?.name ?? "absent")  // Ada
        // README end
        defer { store.close() }
        #expect(user.id == 7 && user.name == "Ada" && user.age == 0 && user.nickname == nil)
        let stored = try #require(try users.get(7))
        #expect(stored.id == 7 && stored.name == "Ada" && stored.age == 0 && stored.nickname == nil)
        #expect(try users.header(of: 7)?.version == 1)
    }

    @Test("the README's store example runs as its comments say")
    func storeExample() throws {
        let serverJSON = Data(
            #"[{"id": 1, "user_name": "Ada", "user_age": 36}, {"id": 2, "user_name": "Grace"}, {"id": 150, "user_name": "Alan"}]"#
                .utf8)
        let freshFromServer = [User(id: 1, name: "Ada", age: 37), User(id: 3, name: "Edsger")]
        try withStore { store, _ in
            // (The README opens its store at a fixed path; here it is a temporary one.)
            // README begin: store usage
            let users = try store.collection(User.self, timeToLive: .hours(24), migration: .lazy)
            // A bulk put: one transaction, one write time.
            try users.put(try JSONDecoder().decode([User].self, from: serverJSON, keySet: .remote("v1")))
            let ada = try users.get(1)  // nil when absent or expired
            let page = try users.scan(from: 100, through: 200, limit: 20)
            try store.write { txn in  // several collections, all or nothing
                try users.put(ada!, in: txn)
                try users.delete(2, in: txn)
            }
            try users.migrate()  // rewrite older records in the current version
            let result = try users.synchronize(with: freshFromServer)  // one transaction: added, updated, removed…
            // README end
            #expect(ada?.name == "Ada" && ada?.age == 36)
            #expect(page.map(\.name) == ["Alan"])
            #expect(result.added == [3] && result.updated == [1] && result.removed == [150])
            #expect(try users.scan().map(\.name) == ["Ada", "Edsger"])
            #expect(try users.get(1)?.age == 37)
        }
    }

    /// The README's service: a source of truth for users.
    struct Upstream: Sendable {
        func user(_ id: Int64) async throws -> User? { id == 404 ? nil : User(id: id, name: "user \(id)") }
    }

    @Test("the README's read-through example runs as its comments say")
    func readThroughExample() async throws {
        // Its hard timeout is real time, 2 s: a machine loaded enough to leave the upstream's task
        // unscheduled that long makes the read time out, rightly. Such a round is repeated (a
        // timeout that fires for nothing fails all three; FetchTimeoutTests test the timeouts).
        for round in 1...3 {
            do {
                try await readThroughRound()
                return
            } catch let error as HoardError where error.kind == .fetchTimedOut {
                print("README read-through example, round \(round): \(error)")
            }
        }
        Issue.record("the README's read-through example timed out three times")
    }

    private func readThroughRound() async throws {
        let upstream = Upstream()
        try await withTemporaryStore { store in
            // README begin: read-through
            let users = try store.collection(
                User.self, timeToLive: .minutes(5),
                freshness: Freshness(
                    staleWhileRevalidate: .minutes(1), staleIfError: .hours(1),
                    timeouts: FetchTimeouts(soft: .milliseconds(100), hard: .seconds(2)), refreshAhead: 0.8))
            // Stored and fresh: returned (past 80% of its life, and refreshed in the background).
            // Otherwise fetched (once, however many requests ask at the same time), stored and returned;
            // an expired record within a window may be served, also when the fetch takes over 100 ms.
            let user = try await users.get(42, orFetch: { id in try await upstream.user(id) })
            // README end
            #expect(user?.name == "user 42")
            #expect(try users.get(42)?.name == "user 42")
            #expect(try await users.get(404, orFetch: { id in try await upstream.user(id) }) == nil)
            #expect(users.statistics().fetches == 2)
        }
    }

    @Test("the README's bounded collection keeps its bound and the records asked for")
    func boundedExample() async throws {
        let upstream = Upstream()
        try await withTemporaryStore { store in
            // README begin: bounded
            // At most 1,000,000 users and 2 GiB; a put past the bound evicts in its own transaction,
            // keeping the users asked for most (a frequency sketch in memory, no write per read).
            let users = try store.collection(
                User.self, timeToLive: .hours(24), capacity: Capacity(records: 1_000_000, bytes: 2 << 30))
            let user = try await users.get(7, orFetch: { id in try await upstream.user(id) })
            let statistics = users.statistics()  // hits, misses, puts, removals by reason…
            let usage = try users.capacityUsage()  // the recorded capacity, records and bytes stored
            // README end
            #expect(user?.name == "user 7")
            #expect(statistics.misses == 1 && statistics.puts == 1 && statistics.removed.evicted == 0)
            #expect(usage?.records == 1 && usage?.capacity.records == 1_000_000)
            #expect((usage?.bytes ?? 0) > 0)
        }
    }
}
