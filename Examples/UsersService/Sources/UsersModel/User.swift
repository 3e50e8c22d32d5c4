public import Hoard

/// A user as the upstream API sends it (key set "api": `user_name`, `email_address`) and as the
/// service stores it (local key set 2; records of key set 1, written before users had versions,
/// are read as version 0).
@VariablyCoded
public struct User: Identifiable, Equatable, Sendable {
    public var id: Int64
    public var name: String
    public var email: String
    public var karma: Int
    /// How many times the user was written upstream: a replica serving a lower version than one
    /// every replica has applied serves a stale user.
    public var version: Int = 0

    public static let keySets = KeySets<User>(
        local: [
            1: [\.id: "ID", \.name: "NAME", \.email: "EMAIL", \.karma: "KARMA"],
            2: [\.id: "ID", \.name: "NAME", \.email: "EMAIL", \.karma: "KARMA", \.version: "VERSION"],
        ],
        remote: [
            "api": [
                \.id: "id", \.name: "user_name", \.email: "email_address", \.karma: "karma", \.version: "version",
            ]
        ]
    )

    public init(id: Int64, name: String, email: String, karma: Int, version: Int = 0) {
        self.id = id
        self.name = name
        self.email = email
        self.karma = karma
        self.version = version
    }
}

extension KeySetID {
    /// The upstream API's key names.
    public static let api = KeySetID.remote("api")
}

extension User {
    /// The upstream's validator of this user, an HTTP entity tag: it changes whenever a field the
    /// upstream changes does (`version` on a write, `karma` as the list is read). The service sends
    /// the stored user's tag in `If-None-Match`, and the upstream answers `304` while it matches.
    public var entityTag: String { "\"\(version)-\(karma)\"" }
}
