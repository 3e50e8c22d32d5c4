// The record of the framework adapters (HoardVapor's cache, HoardHummingbird's persist driver): a
// string key and a value as JSON text, its coding written out (the adapters build without the
// `@VariablyCoded` macro, so that their users need no swift-syntax).

/// A key and a value's JSON text, in a collection of the framework adapters.
package struct KeyedJSON: Identifiable, Sendable, Equatable {
    package var id: String
    package var json: String

    package init(id: String, json: String) {
        self.id = id
        self.json = json
    }
}

extension KeyedJSON: VariablyCodable {
    package static let keySets = KeySets<KeyedJSON>(local: [1: [\.id: "KEY", \.json: "JSON"]])

    package init(from container: DecodingContainer<KeyedJSON>) throws {
        id = try container.decodeValue(for: \.id)
        json = try container.decodeValue(for: \.json)
    }

    package func encode(to container: inout EncodingContainer<KeyedJSON>) throws {
        try container.encodeValue(id, for: \.id)
        try container.encodeValue(json, for: \.json)
    }

    // The fast path: properties numbered by their place in these lists (0: id, 1: json).

    package static var scannedProperties: [PartialKeyPath<KeyedJSON>] { [\.id, \.json] }
    package static var emittedProperties: [PartialKeyPath<KeyedJSON>] { [\.id, \.json] }

    package static func scan<S: FieldScanning>(_ scanner: inout S) throws(FieldScanDeclined) -> KeyedJSON {
        var id: String?
        var json: String?
        while let property = scanner.nextProperty() {
            switch property {
            case 0:
                guard let value = scanner.string() else { throw FieldScanDeclined() }
                id = value
            case 1:
                guard let value = scanner.string() else { throw FieldScanDeclined() }
                json = value
            default: throw FieldScanDeclined()
            }
        }
        // Both are required: the ordinary path gives the error for a missing one.
        guard scanner.isComplete, let id, let json else { throw FieldScanDeclined() }
        return KeyedJSON(id: id, json: json)
    }

    package func emit<E: FieldEmitting & ~Copyable>(into emitter: inout E) -> Bool {
        let order = emitter.propertyOrder
        emitter.beginMap(count: order.count)
        for property in order {
            switch property {
            case 0: emitter.emit(id, property: 0)
            case 1: emitter.emit(json, property: 1)
            default: return false
            }
        }
        return true
    }
}
