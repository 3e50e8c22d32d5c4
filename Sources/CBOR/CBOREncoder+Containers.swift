#if canImport(FoundationEssentials)
internal import FoundationEssentials
#else
internal import Foundation
#endif
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif
internal import Synchronization

// The encoder's containers: keyed (maps), unkeyed (arrays) and single values, each writing
// through the encoder's state (CBOREncoder.swift).

struct KeyedEncoding<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let state: EncoderState
    let id: Int
    let codingPath: [any CodingKey]

    mutating func encodeNil(forKey key: Key) throws {
        try state.beginEntry(id, key: key)
        state.writer.append(0xF6)
    }
    mutating func encode(_ value: Bool, forKey key: Key) throws {
        try state.beginEntry(id, key: key)
        state.writer.append(value ? 0xF5 : 0xF4)
    }
    mutating func encode(_ value: String, forKey key: Key) throws {
        try state.beginEntry(id, key: key)
        state.writer.text(value)
    }
    mutating func encode(_ value: Double, forKey key: Key) throws {
        try state.beginEntry(id, key: key)
        state.writer.double(value)
    }
    mutating func encode(_ value: Float, forKey key: Key) throws {
        try state.beginEntry(id, key: key)
        state.writer.double(Double(value))
    }
    mutating func encode(_ value: Int, forKey key: Key) throws { try int(Int64(value), key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try int(Int64(value), key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try int(Int64(value), key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try int(Int64(value), key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try int(value, key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try uint(UInt64(value), key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try uint(UInt64(value), key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try uint(UInt64(value), key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try uint(UInt64(value), key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try uint(value, key) }

    @inline(__always)
    private func int(_ value: Int64, _ key: Key) throws {
        try state.beginEntry(id, key: key)
        state.writer.int(value)
    }
    @inline(__always)
    private func uint(_ value: UInt64, _ key: Key) throws {
        try state.beginEntry(id, key: key)
        state.writer.head(0, value)
    }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try state.beginEntry(id, key: key)
        try state.encodeNested(value, key: key)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        record { try state.beginEntry(id, key: key) }
        return KeyedEncodingContainer(
            KeyedEncoding<NestedKey>(
                state: state, id: state.openContainer(isMap: true, reuse: false), codingPath: codingPath + [key]))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        record { try state.beginEntry(id, key: key) }
        return UnkeyedEncoding(
            state: state, id: state.openContainer(isMap: false, reuse: false), codingPath: codingPath + [key])
    }

    mutating func superEncoder() -> any Encoder { superEncoder(forKey: Key(stringValue: "super")!) }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        record { try state.beginEntry(id, key: key) }
        state.valueContainer = nil
        return state
    }

    private func record(_ body: () throws -> Void) {
        do { try body() } catch let error as EncodingError { state.failure = state.failure ?? error } catch {}
    }
}

struct IndexKey: CodingKey {
    let intValue: Int?
    var stringValue: String { "\(intValue ?? 0)" }
    init(_ index: Int) { intValue = index }
    init?(intValue: Int) { self.intValue = intValue }
    init?(stringValue: String) { nil }
}

struct UnkeyedEncoding: UnkeyedEncodingContainer {
    let state: EncoderState
    let id: Int
    let codingPath: [any CodingKey]
    var count: Int { state.frame(id)?.count ?? 0 }

    @inline(__always)
    private func begin() throws { try state.beginItem(id) }

    mutating func encodeNil() throws { try begin(); state.writer.append(0xF6) }
    mutating func encode(_ value: Bool) throws { try begin(); state.writer.append(value ? 0xF5 : 0xF4) }
    mutating func encode(_ value: String) throws { try begin(); state.writer.text(value) }
    mutating func encode(_ value: Double) throws { try begin(); state.writer.double(value) }
    mutating func encode(_ value: Float) throws { try begin(); state.writer.double(Double(value)) }
    mutating func encode(_ value: Int) throws { try begin(); state.writer.int(Int64(value)) }
    mutating func encode(_ value: Int8) throws { try begin(); state.writer.int(Int64(value)) }
    mutating func encode(_ value: Int16) throws { try begin(); state.writer.int(Int64(value)) }
    mutating func encode(_ value: Int32) throws { try begin(); state.writer.int(Int64(value)) }
    mutating func encode(_ value: Int64) throws { try begin(); state.writer.int(value) }
    mutating func encode(_ value: UInt) throws { try begin(); state.writer.head(0, UInt64(value)) }
    mutating func encode(_ value: UInt8) throws { try begin(); state.writer.head(0, UInt64(value)) }
    mutating func encode(_ value: UInt16) throws { try begin(); state.writer.head(0, UInt64(value)) }
    mutating func encode(_ value: UInt32) throws { try begin(); state.writer.head(0, UInt64(value)) }
    mutating func encode(_ value: UInt64) throws { try begin(); state.writer.head(0, value) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        let index = count
        try begin()
        try state.encodeNested(value, key: IndexKey(index))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type
    ) -> KeyedEncodingContainer<NestedKey> {
        let index = count
        record { try begin() }
        return KeyedEncodingContainer(
            KeyedEncoding<NestedKey>(
                state: state, id: state.openContainer(isMap: true, reuse: false),
                codingPath: codingPath + [IndexKey(index)]))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let index = count
        record { try begin() }
        return UnkeyedEncoding(
            state: state, id: state.openContainer(isMap: false, reuse: false),
            codingPath: codingPath + [IndexKey(index)])
    }

    mutating func superEncoder() -> any Encoder {
        record { try begin() }
        state.valueContainer = nil
        return state
    }

    private func record(_ body: () throws -> Void) {
        do { try body() } catch let error as EncodingError { state.failure = state.failure ?? error } catch {}
    }
}

struct SingleValueEncoding: SingleValueEncodingContainer {
    let state: EncoderState
    let codingPath: [any CodingKey]

    mutating func encodeNil() throws { state.writer.append(0xF6) }
    mutating func encode(_ value: Bool) throws { state.writer.append(value ? 0xF5 : 0xF4) }
    mutating func encode(_ value: String) throws { state.writer.text(value) }
    mutating func encode(_ value: Double) throws { state.writer.double(value) }
    mutating func encode(_ value: Float) throws { state.writer.double(Double(value)) }
    mutating func encode(_ value: Int) throws { state.writer.int(Int64(value)) }
    mutating func encode(_ value: Int8) throws { state.writer.int(Int64(value)) }
    mutating func encode(_ value: Int16) throws { state.writer.int(Int64(value)) }
    mutating func encode(_ value: Int32) throws { state.writer.int(Int64(value)) }
    mutating func encode(_ value: Int64) throws { state.writer.int(value) }
    mutating func encode(_ value: UInt) throws { state.writer.head(0, UInt64(value)) }
    mutating func encode(_ value: UInt8) throws { state.writer.head(0, UInt64(value)) }
    mutating func encode(_ value: UInt16) throws { state.writer.head(0, UInt64(value)) }
    mutating func encode(_ value: UInt32) throws { state.writer.head(0, UInt64(value)) }
    mutating func encode(_ value: UInt64) throws { state.writer.head(0, value) }
    mutating func encode<T: Encodable>(_ value: T) throws { try state.encodeValue(value) }
}
