// The README's model example, in a file that imports Hoard and Foundation (for JSONDecoder)
// only: `import Hoard` is all a user writes to declare a model (ReadmeSnippetTests checks that
// README.md shows these lines).
// README begin: declaration; also GettingStarted.md
import Foundation
import Hoard

struct User: Identifiable, Equatable {
    var id: Int64
    var name: String
    var age = 0
    var nickname: String?
}

extension User: VariablyCodable {
    static let keySets = KeySets<User>(
        local: [1: [\.id: "ID", \.name: "NAME", \.age: "AGE", \.nickname: "NICK"]],
        remote: ["v1": [\.id: "id", \.name: "user_name", \.age: "user_age", \.nickname: "nick"]]
    )

    init(from container: DecodingContainer<User>) throws {
        id = try container.decodeValue(for: \.id)
        name = try container.decodeValue(for: \.name)
        age = try container.decodeValue(for: \.age, default: 0)  // when a key set or a record has no age
        nickname = try container.decodeValueIfPresent(for: \.nickname)  // nil when missing or null
    }

    func encode(to container: inout EncodingContainer<User>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(name, for: \.name)
        try container.encodeValue(age, for: \.age)
        try container.encodeValueIfPresent(nickname, for: \.nickname)
    }
}
// README end
