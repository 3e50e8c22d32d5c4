import ArgumentParser
import Foundation
@_spi(LMDB) import Hoard
import LMDB
import VariableCoding

/// `hoard demo`: the README's main job. Plays two app versions against one store: version 1
/// caches users from the server's API v1; version 2 renames a stored key and adds a field, reads
/// the old records through migration on read, synchronizes with the server's current list from
/// API v2, and migrates what version 1 wrote meanwhile.
struct Demo: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the Hoard demo on a store and print what happened.",
        discussion: """
            The store lives at --path, or by default in your cache directory \
            ($XDG_CACHE_HOME/hoard/demo.hoard or ~/.cache/hoard/demo.hoard). Each run starts the \
            story again in the collection "users".
            """
    )

    @Option(name: .long, help: "The store directory (created with mode 0700 when missing).")
    var path: String?

    func run() throws {
        let path = path ?? defaultStorePath()
        do {
            try runDemo(at: path)
        } catch let error as HoardError {
            printError("hoard demo: \(error)")
            throw ExitCode(3)
        }
    }

    private func runDemo(at path: String) throws {
        let store = try Store(path: path)
        say("store     \(path)")

        // App version 1: the server speaks API v1; storage uses local key set 1.
        let v1 = try store.collection(DemoUserV1.self, named: "users")
        try v1.deleteAll()
        let serverV1 = Data(
            """
            [{"id": 1, "user_name": "ada", "email_address": "ada@example.com"},
             {"id": 2, "user_name": "grace", "email_address": "grace@example.com"},
             {"id": 3, "user_name": "alan", "email_address": "alan@example.com"}]
            """.utf8)
        let fromServer = try JSONDecoder().decode([DemoUserV1].self, from: serverV1, keySet: .remote("v1"))
        try v1.put(fromServer)
        say(
            "app v1    decoded \(fromServer.count) users from API v1 (user_name, email_address) and stored them with local key set 1 (USER_NAME, EMAIL)"
        )

        // App version 2: local key set 2 renames USER_NAME to NAME and adds KARMA.
        let users = try store.collection(DemoUser.self, named: "users")
        for user in try users.scan() {
            let version = try users.header(of: user.id)?.version ?? 0
            say(
                "app v2    read \(user.name) <\(user.email)> karma \(user.karma) from a version-\(version) record (migrated on read)"
            )
        }
        // The server's current list, from API v2: grace changed, alan is gone, barbara is new.
        let serverV2 = Data(
            """
            [{"id": 1, "name": "ada", "email": "ada@example.com", "karma": 0},
             {"id": 2, "name": "grace", "email": "grace@navy.mil", "karma": 7},
             {"id": 4, "name": "barbara", "email": "barbara@example.com", "karma": 42}]
            """.utf8)
        let current = try JSONDecoder().decode([DemoUser].self, from: serverV2, keySet: .remote("v2"))
        let sync = try users.synchronize(with: current)
        say(
            "app v2    synchronized with API v2 in one transaction: added \(sync.added), updated \(sync.updated), migrated \(sync.migrated), removed \(sync.removed)"
        )
        say("versions  \(try versionCounts(users))")

        // App version 1, still running somewhere, stores a user in its own version.
        try v1.put(fromServer[2])
        say("app v1    stored \(fromServer[2].name) again with local key set 1")
        let progress = try users.migrate(batchSize: 2)
        say("migrate   looked at \(progress.scanned) records, rewrote \(progress.migrated) in version 2")
        say("versions  \(try versionCounts(users))")

        say("")
        try StatReport(store).print()
    }

    private func versionCounts(_ users: HoardCollection<DemoUser>) throws -> String {
        var counts: [Int: Int] = [:]
        for user in try users.scan() {
            counts[try users.header(of: user.id)?.version ?? 0, default: 0] += 1
        }
        return counts.sorted { $0.key < $1.key }.map { "version \($0.key): \($0.value)" }.joined(separator: ", ")
    }
}

/// The user model as app version 1 declared it.
struct DemoUserV1: VariablyCodable, Identifiable {
    var id: Int
    var name: String
    var email: String

    static let keySets = KeySets<DemoUserV1>(
        local: [1: [\.id: "ID", \.name: "USER_NAME", \.email: "EMAIL"]],
        remote: ["v1": [\.id: "id", \.name: "user_name", \.email: "email_address"]]
    )

    init(from container: DecodingContainer<DemoUserV1>) throws {
        id = try container.decodeValue(for: \.id)
        name = try container.decodeValue(for: \.name)
        email = try container.decodeValue(for: \.email)
    }

    func encode(to container: inout EncodingContainer<DemoUserV1>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(name, for: \.name)
        try container.encodeValue(email, for: \.email)
    }
}

/// The user model of app version 2: version 1's key set kept as it shipped, version 2 added.
struct DemoUser: VariablyCodable, Identifiable {
    var id: Int
    var name: String
    var email: String
    var karma: Int

    static let keySets = KeySets<DemoUser>(
        local: [
            1: [\.id: "ID", \.name: "USER_NAME", \.email: "EMAIL"],
            2: [\.id: "ID", \.name: "NAME", \.email: "EMAIL", \.karma: "KARMA"],
        ],
        remote: [
            "v1": [\.id: "id", \.name: "user_name", \.email: "email_address"],
            "v2": [\.id: "id", \.name: "name", \.email: "email", \.karma: "karma"],
        ]
    )

    init(from container: DecodingContainer<DemoUser>) throws {
        id = try container.decodeValue(for: \.id)
        name = try container.decodeValue(for: \.name)
        email = try container.decodeValue(for: \.email)
        karma = try container.decodeValue(for: \.karma, default: 0)
    }

    func encode(to container: inout EncodingContainer<DemoUser>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(name, for: \.name)
        try container.encodeValue(email, for: \.email)
        try container.encodeValue(karma, for: \.karma)
    }
}
