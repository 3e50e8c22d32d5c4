public import VariableCoding
internal import CBOR

/// How a collection codes the payloads of one flat local key set: field by field, with the key
/// names matched once per collection instead of by string for every property of every record.
///
/// `VariableCoding` and `CBOR` do not know each other; this is where they meet. The model's
/// `init(from:)` and `encode(to:)` run unchanged over the CBOR coder's direct field access; the
/// bytes are the ones the Codable path writes, and the checks the ones it makes.
struct PayloadFields<Model>: Sendable {
    let layout: FieldLayout<Model>
    let keys: CBORKeyTable

    init(layout: FieldLayout<Model>) {
        self.layout = layout
        self.keys = CBORKeyTable(layout.keyNames)
    }
}

extension CBORFieldReader: FieldDecoding {}
extension CBORFieldWriter: FieldEncoding {}

/// Carries the error of a closure run inside encoding past the encoding error handling.
struct Forwarded: Error {
    let error: any Error
}
