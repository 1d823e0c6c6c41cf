#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Writes an `Encodable` value as the store file's JSON: the bytes `StoreFormat.encoder()` (a
/// `JSONEncoder`: sorted keys, pretty printed, dates as seconds since 1970) makes from it, in a
/// fraction of the time. The schema stays where it is written once — the types' `Codable`
/// conformances (their `CodingKeys`) — and `JSONDecoder` reads what this writes;
/// `StoreFileEncoderTests` compares the two encoders' bytes for every document the store writes.
///
/// It covers what the store's types encode: keyed containers, strings, integers, dates, optionals,
/// dictionaries with string keys, raw-value enums, and arrays. A value JSON cannot carry (a
/// non-finite number) throws `EncodingError.invalidValue`, as `JSONEncoder` does.
struct StoreFileEncoder {
    static func encode(_ value: some Encodable) throws -> [UInt8] {
        let root = Node()
        try Self.encode(value, into: root, codingPath: [])
        var writer = Writer()
        writer.write(root)
        return writer.bytes
    }

    /// A JSON value being built. A class: containers append to the node their encoder was made
    /// for, in place (members and elements live beside the kind, not in its payload, so that an
    /// append never copies them).
    final class Node {
        enum Value {
            case unset, null, bool(Bool), number(String), string(String), object, array
        }
        var value = Value.unset
        var members: [(key: String, node: Node)] = []
        var elements: [Node] = []
    }

    static func encode(_ value: some Encodable, into node: Node, codingPath: [any CodingKey]) throws {
        // Type comparisons first: a conditional cast on every value is a runtime look-up.
        if type(of: value) == Date.self, let date = value as? Date {
            node.value = .number(try number(date.timeIntervalSince1970, codingPath: codingPath))
        } else if type(of: value) == String.self, let string = value as? String {
            node.value = .string(string)
        } else {
            try value.encode(to: NodeEncoder(node: node, codingPath: codingPath))
        }
    }

    /// Swift's shortest round-tripping decimal without the `.0` of a whole number, as JSONEncoder
    /// writes a `Double`.
    static func number(_ value: Double, codingPath: [any CodingKey]) throws -> String {
        guard value.isFinite else {
            throw EncodingError.invalidValue(value, .init(codingPath: codingPath, debugDescription: "a number JSON cannot carry"))
        }
        let text = value.description
        return text.hasSuffix(".0") ? String(text.dropLast(2)) : text
    }

    struct NodeEncoder: Encoder {
        let node: Node
        let codingPath: [any CodingKey]
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
            if case .object = node.value {} else { node.value = .object }
            return KeyedEncodingContainer(KeyedContainer<Key>(node: node, codingPath: codingPath))
        }

        func unkeyedContainer() -> any UnkeyedEncodingContainer {
            if case .array = node.value {} else { node.value = .array }
            return UnkeyedContainer(node: node, codingPath: codingPath)
        }

        func singleValueContainer() -> any SingleValueEncodingContainer {
            SingleValueContainer(node: node, codingPath: codingPath)
        }
    }

    struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let node: Node
        let codingPath: [any CodingKey]

        private func child(_ key: Key) -> Node {
            child(named: key.stringValue)
        }

        private func child(named name: String) -> Node {
            let child = Node()
            node.members.append((name, child))
            return child
        }

        mutating func encodeNil(forKey key: Key) throws { child(key).value = .null }
        mutating func encode(_ value: Bool, forKey key: Key) throws { child(key).value = .bool(value) }
        mutating func encode(_ value: String, forKey key: Key) throws { child(key).value = .string(value) }
        mutating func encode(_ value: Double, forKey key: Key) throws {
            child(key).value = .number(try StoreFileEncoder.number(value, codingPath: codingPath + [key]))
        }
        mutating func encode(_ value: Float, forKey key: Key) throws {
            child(key).value = .number(try StoreFileEncoder.number(Double(value), codingPath: codingPath + [key]))
        }
        mutating func encode(_ value: Int, forKey key: Key) throws { child(key).value = .number(String(value)) }
        mutating func encode(_ value: Int8, forKey key: Key) throws { child(key).value = .number(String(value)) }
        mutating func encode(_ value: Int16, forKey key: Key) throws { child(key).value = .number(String(value)) }
        mutating func encode(_ value: Int32, forKey key: Key) throws { child(key).value = .number(String(value)) }
        mutating func encode(_ value: Int64, forKey key: Key) throws { child(key).value = .number(String(value)) }
        mutating func encode(_ value: UInt, forKey key: Key) throws { child(key).value = .number(String(value)) }
        mutating func encode(_ value: UInt8, forKey key: Key) throws { child(key).value = .number(String(value)) }
        mutating func encode(_ value: UInt16, forKey key: Key) throws { child(key).value = .number(String(value)) }
        mutating func encode(_ value: UInt32, forKey key: Key) throws { child(key).value = .number(String(value)) }
        mutating func encode(_ value: UInt64, forKey key: Key) throws { child(key).value = .number(String(value)) }
        mutating func encode(_ value: some Encodable, forKey key: Key) throws {
            try StoreFileEncoder.encode(value, into: child(key), codingPath: codingPath + [key])
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
            NodeEncoder(node: child(key), codingPath: codingPath + [key]).container(keyedBy: keyType)
        }

        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            NodeEncoder(node: child(key), codingPath: codingPath + [key]).unkeyedContainer()
        }

        mutating func superEncoder() -> any Encoder {
            NodeEncoder(node: child(named: "super"), codingPath: codingPath)
        }

        mutating func superEncoder(forKey key: Key) -> any Encoder {
            NodeEncoder(node: child(key), codingPath: codingPath + [key])
        }
    }

    struct UnkeyedContainer: UnkeyedEncodingContainer {
        let node: Node
        let codingPath: [any CodingKey]
        var count: Int { node.elements.count }

        private func next() -> Node {
            let element = Node()
            node.elements.append(element)
            return element
        }

        mutating func encodeNil() throws { next().value = .null }
        mutating func encode(_ value: Bool) throws { next().value = .bool(value) }
        mutating func encode(_ value: String) throws { next().value = .string(value) }
        mutating func encode(_ value: Double) throws { next().value = .number(try StoreFileEncoder.number(value, codingPath: codingPath)) }
        mutating func encode(_ value: Int) throws { next().value = .number(String(value)) }
        mutating func encode(_ value: some Encodable) throws {
            try StoreFileEncoder.encode(value, into: next(), codingPath: codingPath)
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
            NodeEncoder(node: next(), codingPath: codingPath).container(keyedBy: keyType)
        }

        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            NodeEncoder(node: next(), codingPath: codingPath).unkeyedContainer()
        }

        mutating func superEncoder() -> any Encoder {
            NodeEncoder(node: next(), codingPath: codingPath)
        }
    }

    struct SingleValueContainer: SingleValueEncodingContainer {
        let node: Node
        let codingPath: [any CodingKey]

        mutating func encodeNil() throws { node.value = .null }
        mutating func encode(_ value: Bool) throws { node.value = .bool(value) }
        mutating func encode(_ value: String) throws { node.value = .string(value) }
        mutating func encode(_ value: Double) throws { node.value = .number(try StoreFileEncoder.number(value, codingPath: codingPath)) }
        mutating func encode(_ value: Float) throws { node.value = .number(try StoreFileEncoder.number(Double(value), codingPath: codingPath)) }
        mutating func encode(_ value: Int) throws { node.value = .number(String(value)) }
        mutating func encode(_ value: Int8) throws { node.value = .number(String(value)) }
        mutating func encode(_ value: Int16) throws { node.value = .number(String(value)) }
        mutating func encode(_ value: Int32) throws { node.value = .number(String(value)) }
        mutating func encode(_ value: Int64) throws { node.value = .number(String(value)) }
        mutating func encode(_ value: UInt) throws { node.value = .number(String(value)) }
        mutating func encode(_ value: UInt8) throws { node.value = .number(String(value)) }
        mutating func encode(_ value: UInt16) throws { node.value = .number(String(value)) }
        mutating func encode(_ value: UInt32) throws { node.value = .number(String(value)) }
        mutating func encode(_ value: UInt64) throws { node.value = .number(String(value)) }
        mutating func encode(_ value: some Encodable) throws {
            try StoreFileEncoder.encode(value, into: node, codingPath: codingPath)
        }
    }

    /// JSON pretty printed as JSONEncoder does: `"key" : value`, two spaces per level, members in
    /// the order of their keys' UTF-8 bytes, an empty object as `{`, an empty line, `}`.
    struct Writer {
        private(set) var bytes: [UInt8] = []
        private var depth = 0

        init() {
            bytes.reserveCapacity(1024)
        }

        mutating func write(_ node: Node) {
            switch node.value {
            case .unset, .null: bytes.append(contentsOf: "null".utf8)
            case .bool(let value): bytes.append(contentsOf: (value ? "true" : "false").utf8)
            case .number(let text): bytes.append(contentsOf: text.utf8)
            case .string(let value): string(value)
            case .object:
                bytes.append(UInt8(ascii: "{"))
                depth += 1
                let sorted = node.members.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
                for (index, member) in sorted.enumerated() {
                    if index > 0 { bytes.append(UInt8(ascii: ",")) }
                    newline()
                    string(member.key)
                    bytes.append(contentsOf: [UInt8(ascii: " "), UInt8(ascii: ":"), UInt8(ascii: " ")])
                    write(member.node)
                }
                depth -= 1
                if sorted.isEmpty { bytes.append(UInt8(ascii: "\n")) }
                newline()
                bytes.append(UInt8(ascii: "}"))
            case .array:
                let elements = node.elements
                bytes.append(UInt8(ascii: "["))
                depth += 1
                for (index, element) in elements.enumerated() {
                    if index > 0 { bytes.append(UInt8(ascii: ",")) }
                    newline()
                    write(element)
                }
                depth -= 1
                if elements.isEmpty { bytes.append(UInt8(ascii: "\n")) }
                newline()
                bytes.append(UInt8(ascii: "]"))
            }
        }

        private mutating func newline() {
            bytes.append(UInt8(ascii: "\n"))
            for _ in 0..<depth { bytes.append(contentsOf: [UInt8(ascii: " "), UInt8(ascii: " ")]) }
        }

        /// A JSON string: `"` and `\` escaped, control characters as `\n`, `\t`… or `\u00XX`, `/` as
        /// `\/` (as JSONEncoder does), everything else as its UTF-8.
        private mutating func string(_ value: String) {
            bytes.append(UInt8(ascii: "\""))
            for byte in value.utf8 {
                switch byte {
                case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
                case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
                case UInt8(ascii: "/"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "/")])
                case 0x0A: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
                case 0x0D: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
                case 0x09: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
                case 0x08: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
                case 0x0C: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
                case 0..<0x20:
                    let hex = Array("0123456789abcdef".utf8)
                    bytes.append(contentsOf: [
                        UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)],
                    ])
                default:
                    bytes.append(byte)
                }
            }
            bytes.append(UInt8(ascii: "\""))
        }
    }
}
