/// A coder's `userInfo` converted once to the `[CodingUserInfoKey: Any]` that `Encoder` and
/// `Decoder` hand out. Converting a `[CodingUserInfoKey: any Sendable]` builds a new dictionary,
/// which would otherwise happen every time a value asks for `userInfo`.
final class UserInfoBox: @unchecked Sendable {
    // @unchecked: built from Sendable values and never changed.
    let values: [CodingUserInfoKey: Any]

    init(_ values: [CodingUserInfoKey: any Sendable]) {
        self.values = values
    }

    static let empty = UserInfoBox([:])
}
