// The benchmarks' model as a plain Codable row, shared by write-bench and peers-bench: what GRDB's
// documentation has for a record, and what the file cache and JSON in LMDB encode with JSONEncoder.
public import BenchModels
public import GRDB

/// `Member` as a row: columns by property.
public struct MemberRow: Codable, FetchableRecord, PersistableRecord, Equatable {
    public static let databaseTableName = "member"
    public var id: Int64
    public var name: String
    public var email: String
    public var age: Int
    public var city: String
    public var followers: Int

    public init(_ member: Member) {
        (id, name, email, age, city, followers) = (
            member.id, member.name, member.email, member.age, member.city, member.followers
        )
    }

    public var member: Member { Member(id: id, name: name, email: email, age: age, city: city, followers: followers) }
}
