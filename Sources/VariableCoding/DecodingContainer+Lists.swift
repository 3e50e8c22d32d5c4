/// Elements decoded from a list, and the ones that could not be.
public struct DecodedList<Element> {
    /// The elements that decoded, in order.
    public var elements: [Element]
    /// The elements that did not decode (with ``ListPolicy/lossy``), by their key or index.
    public var failures: [ElementFailure]
}

/// One element of a list that did not decode.
public struct ElementFailure: Error, CustomStringConvertible, @unchecked Sendable {
    // @unchecked: `error` is the coder's error, which Swift's Error does not require to be Sendable.
    /// The element's key in a map, or its index in an array.
    public let key: String
    /// Why it failed.
    public let error: any Error

    /// The element's key and its error.
    public var description: String { "element '\(key)': \(error)" }
}

/// What a list does with an element that does not decode.
public enum ListPolicy: Sendable {
    /// The whole decode fails, naming the element.
    case strict
    /// The element is left out and reported in ``DecodedList/failures``.
    case lossy
}

/// Decodes one element and never fails, so that an unkeyed container always moves on (a failed
/// `decode` would leave it on the same element).
struct Attempt<Element: Decodable>: Decodable {
    let result: Result<Element, any Error>
    init(from decoder: any Decoder) throws {
        do {
            result = .success(try Element(from: decoder))
        } catch {
            result = .failure(error)
        }
    }
}

/// Every element of a list that arrives as an array or as an object keyed by the elements' ids,
/// each decoded or failed, in the order ``DecodingContainer/decodeList(_:forProperty:policy:orderedBy:)``
/// starts from (array order; object keys numerically when they are all integers, else sorted).
struct ListAttempts<Element: Decodable>: Decodable {
    var attempts: [(key: String, result: Result<Element, any Error>)] = []

    init(from decoder: any Decoder) throws {
        if var array = try? decoder.unkeyedContainer() {
            while !array.isAtEnd {
                let index = array.currentIndex
                attempts.append((String(index), try array.decode(Attempt<Element>.self).result))
            }
            return
        }
        let object = try decoder.container(keyedBy: VariableKey.self)
        var keys = object.allKeys.map(\.stringValue)
        let numbered = keys.compactMap { key in Int(key).map { (number: $0, key: key) } }
        if numbered.count == keys.count {
            keys = numbered.sorted { $0.number < $1.number }.map(\.key)
        } else {
            keys.sort()
        }
        for key in keys {
            attempts.append((key, try object.decode(Attempt<Element>.self, forKey: VariableKey(key)).result))
        }
    }
}

extension DecodingContainer {
    /// Decodes a list that arrives as an array, or as an object keyed by the elements' ids
    /// (`{"17": {…}, "4": {…}}`) — the shape many APIs use where a list is meant.
    ///
    /// A missing or `null` key gives an empty list.
    ///
    /// - Parameters:
    ///   - type: the element type; `VariablyCodable` elements follow the same key set.
    ///   - keyPath: the property.
    ///   - policy: fail on the first element that does not decode, or leave it out and report it.
    ///   - areInIncreasingOrder: the order of the result; without it, an array keeps its order
    ///     and an object is ordered by its keys (numerically when they are all integers).
    /// - Throws: ``VariableCodingError/decoding(type:keySet:property:key:codingPath:reason:underlying:)``, naming the
    ///   property, its key and why: the list is not an array or object, or (with the failing policy) an element
    ///   does not decode.
    public func decodeList<Element: Decodable>(
        _ type: Element.Type,
        forProperty keyPath: PartialKeyPath<Model>,
        policy: ListPolicy = .strict,
        orderedBy areInIncreasingOrder: ((Element, Element) -> Bool)? = nil
    ) throws -> DecodedList<Element> {
        let empty = DecodedList<Element>(elements: [], failures: [])
        guard let slot = table.slot(for: keyPath) else { return empty }
        let place: any ValuePlace
        if let fields {
            place = FieldPlace(fields: fields, field: slot.field)
        } else {
            guard let container = try object(for: slot) else { return empty }
            place = KeyedPlace(container: container, key: slot.key)
        }
        guard place.contains(), try !place.decodeNil() else { return empty }
        let attempts = try place.decode(ListAttempts<Element>.self).attempts
        var list = DecodedList<Element>(elements: [], failures: [])
        for attempt in attempts {
            switch attempt.result {
            case .success(let element):
                list.elements.append(element)
            case .failure(let error):
                if policy == .strict {
                    throw failure(
                        keyPath, reason: "element '\(attempt.key)' does not decode: \(reason(of: error))",
                        underlying: error)
                }
                list.failures.append(ElementFailure(key: attempt.key, error: error))
            }
        }
        if let areInIncreasingOrder { list.elements.sort(by: areInIncreasingOrder) }
        return list
    }
}
