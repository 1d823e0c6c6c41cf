/// A JSON value parsed strictly (RFC 8259): duplicate object keys, trailing commas, comments,
/// invalid UTF-8, lone surrogates, leading zeros and nesting deeper than a limit are errors.
///
/// JOSE headers and JWT claims are parsed with this instead of `JSONDecoder`, which silently lets
/// the last duplicate key win — the kind of ambiguity a token forger uses.
public enum JSONValue: Sendable, Hashable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number, kept as written so that large integers lose nothing.
    case number(String)
    /// A string, unescaped.
    case string(String)
    /// An array, in order.
    case array([JSONValue])
    /// An object; its keys are unique (a duplicate is a parse error).
    case object([String: JSONValue])

    /// The string, when this is a string.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The number as `Double`, when this is a number.
    package var doubleValue: Double? {
        guard case .number(let text) = self else { return nil }
        // An integer (a NumericDate, mostly) converts without `strtod`; the conversion rounds to
        // nearest as `strtod` does.
        // (`-0` keeps its sign through `Double(text)`.)
        if let integer = Int64(text), integer != 0 || text.utf8.first != UInt8(ascii: "-") { return Double(integer) }
        return Double(text)
    }

    /// The number as `Int64`, when this is an integral number in range (`1.0` and `1e3` count).
    package var int64Value: Int64? {
        guard case .number(let text) = self else { return nil }
        if let exact = Int64(text) { return exact }
        guard let double = Double(text), double.rounded() == double, abs(double) < 9.0e18 else { return nil }
        return Int64(double)
    }

    /// The Boolean, when this is `true` or `false`.
    package var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// The members, when this is an object.
    package var objectValue: [String: JSONValue]? {
        if case .object(let value) = self { return value }
        return nil
    }

    /// The elements, when this is an array.
    package var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    /// The member named `key`, when this is an object that has it.
    public subscript(key: String) -> JSONValue? {
        objectValue?[key]
    }

    /// Parses `bytes` as one JSON text.
    ///
    /// - Throws: `JSONParseError` naming the byte offset and what was wrong.
    package static func parse(_ bytes: some Collection<UInt8>, maximumDepth: Int = 32) throws(JSONParseError) -> JSONValue {
        var parser = StrictJSONParser(bytes: Array(bytes), maximumDepth: maximumDepth)
        return try parser.parseDocument()
    }

    /// Serialises compactly with sorted keys (deterministic output).
    package var serialized: String {
        switch self {
        case .null: return "null"
        case .bool(let value): return value ? "true" : "false"
        case .number(let text): return text
        case .string(let value): return Self.quote(value)
        case .array(let values): return "[" + values.map(\.serialized).joined(separator: ",") + "]"
        case .object(let members):
            return "{" + members.sorted { $0.key < $1.key }.map { Self.quote($0.key) + ":" + $0.value.serialized }
                .joined(separator: ",") + "}"
        }
    }

    private static func quote(_ string: String) -> String {
        var output = "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                output += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: output.unicodeScalars.append(scalar)
            }
        }
        return output + "\""
    }
}

/// JSON that is not strictly valid.
package struct JSONParseError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The byte offset where parsing stopped.
    package let offset: Int
    /// What was wrong there.
    package let reason: String

    package var description: String { "invalid JSON at byte \(offset): \(reason)" }
}

struct StrictJSONParser {
    let bytes: [UInt8]
    let maximumDepth: Int
    var index = 0

    init(bytes: [UInt8], maximumDepth: Int) {
        self.bytes = bytes
        self.maximumDepth = maximumDepth
    }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        skipWhitespace()
        let value = try parseValue(depth: 0)
        skipWhitespace()
        guard index == bytes.count else { throw fail("unexpected data after the JSON value") }
        return value
    }

    private func fail(_ reason: String) -> JSONParseError {
        JSONParseError(offset: index, reason: reason)
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
        guard index < bytes.count else { throw fail("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw fail("unexpected character")
        }
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let count = literal.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw fail("unexpected end of input") }
        let matches = literal.withUTF8Buffer { expected in bytes[index..<index + count].elementsEqual(expected) }
        guard matches else { throw fail("invalid literal") }
        index += count
    }

    private mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth <= maximumDepth else { throw fail("nesting deeper than \(maximumDepth)") }
        index += 1
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object([:])
        }
        // Room for a JOSE header's or an ID token's members without growing (each growth rehashes
        // every key); a larger object grows as usual.
        var members = [String: JSONValue](minimumCapacity: 12)
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail("expected a member name") }
            let keyOffset = index
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            index += 1
            skipWhitespace()
            let value = try parseValue(depth: depth)
            guard members.updateValue(value, forKey: key) == nil else {
                throw JSONParseError(offset: keyOffset, reason: "duplicate member name")
            }
            skipWhitespace()
            guard index < bytes.count else { throw fail("unexpected end of input") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") { index += 1; return .object(members) }
            throw fail("expected ',' or '}'")
        }
    }

    private mutating func parseArray(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth <= maximumDepth else { throw fail("nesting deeper than \(maximumDepth)") }
        index += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try parseValue(depth: depth))
            skipWhitespace()
            guard index < bytes.count else { throw fail("unexpected end of input") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(elements) }
            throw fail("expected ',' or ']'")
        }
    }

    private mutating func parseNumber() throws(JSONParseError) -> String {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw fail("expected a digit") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if index < bytes.count, isDigit(bytes[index]) { throw fail("leading zero") }
        } else {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw fail("expected a digit after '.'") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw fail("expected an exponent") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        guard index - start <= 64 else { throw JSONParseError(offset: start, reason: "number longer than 64 characters") }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    private func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    private mutating func parseString() throws(JSONParseError) -> String {
        index += 1  // opening quote
        // Most strings have no escapes and are ASCII: one String straight from the bytes, with no
        // UTF-8 validation to run (every ASCII byte string is valid UTF-8).
        var scan = index
        var highBits: UInt8 = 0
        while scan < bytes.count {
            let byte = bytes[scan]
            if byte == UInt8(ascii: "\"") {
                let start = index
                let text = bytes.withUnsafeBufferPointer { buffer -> String? in
                    let run = UnsafeBufferPointer(rebasing: buffer[start..<scan])
                    return highBits & 0x80 == 0 ? String(decoding: run, as: UTF8.self) : String(validating: run, as: UTF8.self)
                }
                guard let text else { throw JSONParseError(offset: start, reason: "invalid UTF-8") }
                index = scan + 1
                return text
            }
            if byte == UInt8(ascii: "\\") || byte < 0x20 { break }
            highBits |= byte
            scan += 1
        }
        return try parseEscapedString()
    }

    /// A string with escapes (many encoders write `/` as `\/`): its UTF-8 gathered in one buffer —
    /// raw runs as they are (each non-ASCII run validated where it stands, so an error names its
    /// offset), escapes encoded — and made a String once.
    private mutating func parseEscapedString() throws(JSONParseError) -> String {
        var utf8: [UInt8] = []
        utf8.reserveCapacity(32)
        var runStart = index
        var runHighBits: UInt8 = 0
        func flushRun(_ parser: StrictJSONParser, upTo end: Int) throws(JSONParseError) {
            guard runStart < end else { return }
            let run = parser.bytes[runStart..<end]
            if runHighBits & 0x80 != 0, String(validating: run, as: UTF8.self) == nil {
                throw JSONParseError(offset: runStart, reason: "invalid UTF-8")
            }
            utf8.append(contentsOf: run)
        }
        while true {
            guard index < bytes.count else { throw fail("unterminated string") }
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                try flushRun(self, upTo: index)
                index += 1
                // Valid: the runs were validated, and an escape encodes whole scalars (never a
                // continuation byte that could complete a run's truncated sequence).
                return String(decoding: utf8, as: UTF8.self)
            }
            if byte < 0x20 { throw fail("control character in string") }
            if byte == UInt8(ascii: "\\") {
                try flushRun(self, upTo: index)
                index += 1
                guard index < bytes.count else { throw fail("unterminated escape") }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(escape)
                case UInt8(ascii: "b"): utf8.append(0x08)
                case UInt8(ascii: "f"): utf8.append(0x0C)
                case UInt8(ascii: "n"): utf8.append(0x0A)
                case UInt8(ascii: "r"): utf8.append(0x0D)
                case UInt8(ascii: "t"): utf8.append(0x09)
                case UInt8(ascii: "u"): utf8.append(contentsOf: try parseUnicodeEscape().utf8)
                default: throw fail("invalid escape")
                }
                runStart = index
                runHighBits = 0
                continue
            }
            runHighBits |= byte
            index += 1
        }
    }

    private mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw fail("truncated \\u escape") }
        var value: UInt32 = 0
        for byte in bytes[index..<index + 4] {
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw fail("invalid hex digit in \\u escape")
            }
            value = value << 4 | digit
        }
        index += 4
        return value
    }

    private mutating func parseUnicodeEscape() throws(JSONParseError) -> Unicode.Scalar {
        let first = try parseHex4()
        if (0xD800...0xDBFF).contains(first) {
            guard index + 2 <= bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                throw fail("lone high surrogate")
            }
            index += 2
            let second = try parseHex4()
            guard (0xDC00...0xDFFF).contains(second) else { throw fail("invalid low surrogate") }
            let combined = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
            guard let scalar = Unicode.Scalar(combined) else { throw fail("invalid code point") }
            return scalar
        }
        guard let scalar = Unicode.Scalar(first) else { throw fail("lone low surrogate") }
        return scalar
    }
}
