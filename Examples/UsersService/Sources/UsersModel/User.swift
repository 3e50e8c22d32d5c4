public import Hoard

/// A user as the upstream API sends it (key set "api": `user_name`, `email_address`) and as the
/// service stores it (local key set 1).
@VariablyCoded
public struct User: Identifiable, Equatable, Sendable {
    public var id: Int64
    public var name: String
    public var email: String
    public var karma: Int

    public static let keySets = KeySets<User>(
        local: [1: [\.id: "ID", \.name: "NAME", \.email: "EMAIL", \.karma: "KARMA"]],
        remote: ["api": [\.id: "id", \.name: "user_name", \.email: "email_address", \.karma: "karma"]]
    )

    public init(id: Int64, name: String, email: String, karma: Int) {
        self.id = id
        self.name = name
        self.email = email
        self.karma = karma
    }
}

extension KeySetID {
    /// The upstream API's key names.
    public static let api = KeySetID.remote("api")
}
