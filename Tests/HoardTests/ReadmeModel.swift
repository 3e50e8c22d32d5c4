// The README's model example, in a file that imports Hoard and Foundation (for JSONDecoder)
// only: `import Hoard` is all a user writes to declare a model (ReadmeSnippetTests checks that
// README.md shows these lines).
// README begin: declaration; also GettingStarted.md
import Foundation
import Hoard

@VariablyCoded
struct User: Identifiable, Equatable {
    var id: Int64
    var name: String
    var age: Int = 0  // the default when a key set or a record has no age
    var nickname: String?  // nil when missing or null

    static let keySets = KeySets<User>(
        local: [1: [\.id: "ID", \.name: "NAME", \.age: "AGE", \.nickname: "NICK"]],
        remote: ["v1": [\.id: "id", \.name: "user_name", \.age: "user_age", \.nickname: "nick"]]
    )
}
// README end
