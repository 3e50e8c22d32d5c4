internal import VariableCoding
internal import CBOR

/// How a collection codes the payloads of one flat local key set: field by field, with the key
/// names matched once per collection instead of by string for every property of every record.
///
/// `VariableCoding` and `CBOR` do not know each other; this is where they meet. The model's
/// `init(from:)` and `encode(to:)` run unchanged over the CBOR coder's direct field access; the
/// bytes are the ones the Codable path writes, and the checks the ones it makes.
struct PayloadFields<Model: VariablyCodable>: Sendable {
    let layout: FieldLayout<Model>
    let keys: CBORKeyTable
    /// The numbers the keys are written as (record format 3).
    let numbering: CBORKeyNumbering

    init(layout: FieldLayout<Model>, numbering: CBORKeyNumbering) {
        self.layout = layout
        self.numbering = numbering
        self.keys = CBORKeyTable(layout.keyNames, numbering: numbering)
    }

    /// The key names of the properties the model's generated code reads (`Model.scan`), or `nil`
    /// when it has none, or none this key set can use.
    var scanned: CBORPropertyTable? { table(Model.scannedProperties) }

    /// The same for the properties it writes (`Model.emit`). The ordinary path refuses to encode a
    /// property the key set lacks (storage must not lose data); generated code would leave it
    /// out, so such a key set gets no table, and that error.
    var emitted: CBORPropertyTable? {
        guard let table = table(Model.emittedProperties), !table.names.contains(nil) else { return nil }
        return table
    }

    /// The key names by field number, for writing what the model's `encode(to:)` records
    /// (`Model.recordFields`): property `n` is field `n`. (`nil` past 64 keys, as for generated code.)
    var recorded: CBORPropertyTable? { CBORPropertyTable(layout.keyNames, numbering: numbering) }

    private func table(_ properties: [PartialKeyPath<Model>]) -> CBORPropertyTable? {
        guard !properties.isEmpty else { return nil }
        let names = layout.keyNames
        return CBORPropertyTable(layout.fields(of: properties).map { $0.map { names[$0] } }, numbering: numbering)
    }
}

extension CBORFieldReader: FieldDecoding {}
extension CBORFieldWriter: FieldEncoding {}
extension CBORFieldScanner: FieldScanning {}
extension CBORFieldEmitter: FieldEmitting {}

/// Carries the error of a closure run inside encoding past the encoding error handling.
struct Forwarded: Error {
    let error: any Error
}
