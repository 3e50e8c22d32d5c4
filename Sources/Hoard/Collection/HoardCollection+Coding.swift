internal import VariableCoding
internal import CBOR
internal import Synchronization

// Payload coding: the model's generated code first, field by field second, Codable last; the
// bytes are the same whichever path writes them.

extension HoardCollection {
    /// Encodes `model`'s payload and hands its bytes to `body` (valid only inside it) without
    /// making an array of them. An encoding error is thrown as ``HoardError/encoding(collection:key:underlying:)``
    /// naming `key`; what `body` throws comes out unchanged. With `ordinarily`, generated code is
    /// not tried (the caller's has declined already).
    func withPayload<R>(
        of model: Model, key: UnsafeRawBufferPointer, ordinarily: Bool = false,
        _ body: (UnsafeRawBufferPointer) throws -> R
    ) throws -> R {
        do {
            func forwarding(_ raw: UnsafeRawBufferPointer) throws -> R {
                do { return try body(raw) } catch { throw Forwarded(error: error) }
            }
            return try ordinarily ? encodeOrdinarily(model, forwarding) : encode(model, forwarding)
        } catch let forwarded as Forwarded {
            throw forwarded.error
        } catch {
            throw HoardError.encoding(collection: name, key: storedKey(key), underlying: error)
        }
    }

    /// Encodes a payload: deterministic CBOR with the current local key set. (`put` also tries
    /// the model's generated code itself, before this, to hand its bytes straight to LMDB.)
    ///
    /// The key set is chosen for the call (`withStorageKeySet`, a thread-local slot, where the
    /// innermost choice wins) rather than through the coder's `userInfo`. It is `.local(current)`,
    /// not `.currentLocal`: a nested VariablyCodable value is then written with the key set
    /// reading will use (the record stamps only the outer version).
    ///
    /// A model's generated code (`emit`, from `@VariablyCoded`) goes first; otherwise a flat key
    /// set is encoded field by field (``PayloadFields``). The bytes are the same as through
    /// `Encodable` either way, which the tests check.
    func encode<R>(_ model: Model, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        // Generated code writes plain values only: no nested model needs the key set chosen.
        guard let table = currentEmitted else { return try encodeOrdinarily(model, body) }
        return try encoder.emitFields(
            table: table, { emit(model, into: &$0) }, reading: body, otherwise: { try encodeOrdinarily(model, body) })
    }

    /// Writes `model`'s payload by property number: through its generated code, or else through
    /// its `encode(to:)` recorded by field. `false` when either declines; the caller then encodes
    /// the ordinary way (which also gives any error). A model whose recording declines once (a
    /// value of a type that is not plain) is not recorded again by this collection.
    @inline(__always)
    func emit(_ model: Model, into emitter: inout CBORFieldEmitter) -> Bool {
        if emitsGenerated { return model.emit(into: &emitter) }
        guard let layout = currentFields?.layout, recordsFields.load(ordering: .relaxed) else { return false }
        let emitted = (try? model.recordFields(layout: layout) { Self.emit($0, into: &emitter) }) ?? false
        if !emitted { recordsFields.store(false, ordering: .relaxed) }
        return emitted
    }

    /// Writes recorded values, property `n` being field `n`, in the emitter's order. Each value is
    /// moved out of the table (no copy of a string, nothing left to release after).
    private static func emit(
        _ values: UnsafeMutableBufferPointer<RecordedField>, into emitter: inout CBORFieldEmitter
    ) -> Bool {
        guard let base = values.baseAddress else { return false }
        var count = 0
        for index in values.indices {
            if case .absent = base[index] { continue }
            count += 1
        }
        emitter.beginMap(count: count)
        for property in emitter.propertyOrder {
            let place = base + property
            let value = place.move()
            place.initialize(to: .absent)
            switch value {
            case .absent: continue
            case .bool(let value): emitter.emit(value, property: property)
            case .string(let value): emitter.emit(value, property: property)
            case .double(let value): emitter.emit(value, property: property)
            case .float(let value): emitter.emit(value, property: property)
            case .int(let value): emitter.emit(value, property: property)
            case .int32(let value): emitter.emit(value, property: property)
            case .int64(let value): emitter.emit(value, property: property)
            case .uint64(let value): emitter.emit(value, property: property)
            }
        }
        return true
    }

    /// Encodes through the model's `encode(to:)`.
    private func encodeOrdinarily<R>(_ model: Model, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try withStorageKeySet(version: currentVersion) {
            guard let fields = currentFields else {
                // Codable's containers write the key names; the record keys by their numbers.
                let named = try encoder.encode(model)
                return try named.withUnsafeBytes { try numbering(currentVersion).numbered($0) }.withUnsafeBytes(body)
            }
            return try encoder.encodeFields(
                keys: fields.keys, { try model.encode(fields: $0, layout: fields.layout) }, reading: body)
        }
    }

    /// The numbering of local version `version`'s payloads (one of `localVersions`).
    func numbering(_ version: Int) throws -> CBORKeyNumbering {
        guard let numbering = numberings[version] else {
            throw RecordDamage("key-set version \(version) is not one of \(Model.self)'s local versions")
        }
        return numbering
    }

    /// Decodes a payload written with local key set `version` (one of `localVersions`): by the
    /// model's generated code (`scan`, from `@VariablyCoded`) when it has some and does not
    /// decline, else through its `init(from:)`. `numbered`: whether its keys are numbers (record
    /// format 3) rather than names (formats 1 and 2, numbered here first).
    ///
    /// The key set stays chosen (`withKeySet`) for nested `VariablyCodable` values, which are
    /// decoded through Codable.
    func decodePayload(_ payload: UnsafeRawBufferPointer, version: Int, numbered: Bool = true) throws -> Model {
        guard numbered else {
            // A map the numbering does not fit (keys it lacks, an indefinite length: from another
            // tool) is read by name, as before numbers, which also gives any error.
            if let renumbered = try? numbering(version).numbered(payload) {
                return try renumbered.withUnsafeBytes { try decodePayload($0, version: version) }
            }
            return try withKeySet(.local(version)) { try decoder.decode(Model.self, from: payload) }
        }
        // Generated code reads plain values only: no nested model needs the key set chosen. (The
        // scanner holds the table unowned; the collection holds it for as long as it lives.)
        if let table = version == currentVersion ? currentScanned : olderScanned[version],
            var scanner = CBORFieldScanner(payload, table: table)
        {
            do throws(FieldScanDeclined) {
                let model = try Model.scan(&scanner)
                if scanner.isComplete { return model }
            } catch {
                // Declined: read the ordinary way, which also gives any error.
            }
        }
        return try withKeySet(.local(version)) {
            guard let fields = version == currentVersion ? currentFields : olderFields[version] else {
                // Codable's containers read key names.
                return try decoder.decode(Model.self, from: try numbering(version).named(payload))
            }
            return try decoder.decodeFields(from: payload, keys: fields.keys) {
                try Model(fields: $0, layout: fields.layout)
            }
        }
    }
}
