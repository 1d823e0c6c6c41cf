/// One challenge of a `WWW-Authenticate` header (RFC 9110 §11.6.1): the scheme the server asks for
/// and its auth-params (RFC 6750 §3 `error`, `error_description`, `scope`; RFC 9449 §7.1 `algs`;
/// RFC 9470 §3 `acr_values`, `max_age`).
package struct AuthorizationChallenge: Sendable, Equatable {
    /// The auth-scheme as the server wrote it (`Bearer`, `DPoP`): compare it ignoring case
    /// (``hasScheme(_:)``).
    package let scheme: String
    /// The auth-params: names lower-cased, values with a quoted-string's quotes and backslash
    /// escapes removed. A name sent twice keeps its first value; a token68 is not kept.
    package let parameters: [String: String]

    /// A challenge with `scheme` and `parameters` (names already lower-cased).
    package init(scheme: String, parameters: [String: String] = [:]) {
        self.scheme = scheme
        self.parameters = parameters
    }

    /// Whether the scheme is `name`, ignoring ASCII case.
    package func hasScheme(_ name: String) -> Bool {
        scheme.utf8.count == name.utf8.count
            && zip(scheme.utf8, name.utf8).allSatisfy { Self.lowercased($0) == Self.lowercased($1) }
    }

    /// The most challenges ``parse(_:)`` returns.
    package static let maximumChallenges = 64
    /// The most bytes of header values ``parse(_:)`` reads, all values together.
    package static let maximumBytes = 8192

    /// The challenges of every `WWW-Authenticate` value in `headerValues` (one per header line; a
    /// value may hold several challenges separated by commas), in order.
    ///
    /// Never throws and never fails: what is malformed is skipped up to the next comma outside a
    /// quoted-string (an unquoted value that is not a token, a challenge whose scheme is followed
    /// by neither a space nor a comma, text after a value); a quoted-string that is never closed or
    /// holds a control character ends the reading of its header value (the challenge it is in keeps
    /// the parameters before it). Bounded: at most ``maximumChallenges`` challenges from the first
    /// ``maximumBytes`` bytes of the values together; a challenge that limit cuts is dropped.
    package static func parse(_ headerValues: [String]) -> [AuthorizationChallenge] {
        var challenges: [AuthorizationChallenge] = []
        var budget = maximumBytes
        for value in headerValues {
            guard budget > 0, challenges.count < maximumChallenges else { break }
            let complete = value.utf8.count <= budget
            var parser = Parser(bytes: Array(value.utf8.prefix(budget)))
            budget -= parser.bytes.count
            var parsed = parser.challenges(limit: maximumChallenges - challenges.count)
            // The limit cut this value: the challenge it was in may have had more parameters.
            if !complete, parser.isAtEnd, !parsed.isEmpty { parsed.removeLast() }
            challenges += parsed
        }
        return challenges
    }

    fileprivate static func lowercased(_ byte: UInt8) -> UInt8 {
        byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
    }
}

/// Reads one header value's bytes, once from left to right: every step consumes what it looked at
/// or gives it back to be read once more as something else (a parameter or the next challenge's
/// scheme), so the work stays linear in the value's length.
private struct Parser {
    let bytes: [UInt8]
    private var index = 0

    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    var isAtEnd: Bool { index >= bytes.count }

    private static let comma = UInt8(ascii: ",")
    private static let equals = UInt8(ascii: "=")
    private static let quote = UInt8(ascii: "\"")
    private static let backslash = UInt8(ascii: "\\")
    private static let space = UInt8(ascii: " ")
    private static let tab = UInt8(ascii: "\t")

    /// `challenge *( OWS "," OWS challenge )`, with empty list elements allowed, up to `limit`.
    mutating func challenges(limit: Int) -> [AuthorizationChallenge] {
        var result: [AuthorizationChallenge] = []
        while result.count < limit {
            skipListSeparators()
            guard !isAtEnd else { break }
            guard let scheme = token() else {
                skipElement()  // not a scheme
                continue
            }
            var parameters: [String: String] = [:]
            let spaced = skipWhitespace()
            if !isAtEnd, bytes[index] != Self.comma {
                guard spaced else {
                    skipElement()  // "Bearer=…", "Bearer\"…": no challenge
                    continue
                }
                // The first element: an auth-param, or a token68 (not kept), or nothing usable.
                if !parameter(into: &parameters) { skipElement() }
            }
            // The elements after it that are auth-params belong to this challenge; the first one
            // that is not begins the next challenge.
            while true {
                skipWhitespace()
                guard !isAtEnd else { break }
                guard bytes[index] == Self.comma else {
                    skipElement()  // text after a value: dropped up to the next comma
                    continue
                }
                let next = index
                skipListSeparators()
                guard !isAtEnd else { break }
                if !parameter(into: &parameters) {
                    index = next
                    break
                }
            }
            result.append(AuthorizationChallenge(scheme: scheme, parameters: parameters))
        }
        return result
    }

    /// `token BWS "=" BWS ( token / quoted-string )` at `index`, stored in `parameters` when it is
    /// well formed. Returns `false`, with nothing consumed, when the element is not an auth-param
    /// (a scheme, a token68 such as `abc==`).
    private mutating func parameter(into parameters: inout [String: String]) -> Bool {
        let start = index
        guard let name = token() else { return false }
        skipWhitespace()
        guard !isAtEnd, bytes[index] == Self.equals else {
            index = start
            return false
        }
        index += 1
        skipWhitespace()
        // "abc=" at the end or before a comma, "abc==": the tail of a token68.
        guard !isAtEnd, bytes[index] != Self.comma, bytes[index] != Self.equals else {
            index = start
            return false
        }
        let value: String?
        if bytes[index] == Self.quote {
            value = quotedString()
            if value == nil {
                index = bytes.count  // never closed, or a control character: the value is read no further
                return true
            }
        } else {
            value = token()
            if value == nil { skipElement() }  // neither a token nor a quoted-string: dropped
        }
        if let value {
            let key = name.lowercased()
            if parameters[key] == nil { parameters[key] = value }
        }
        return true
    }

    /// 1*tchar at `index`, or `nil` with nothing consumed.
    private mutating func token() -> String? {
        let start = index
        while index < bytes.count, Self.isTokenCharacter(bytes[index]) { index += 1 }
        guard index > start else { return nil }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    /// The quoted-string whose opening quote is at `index`, unescaped; `nil` when it is never
    /// closed or holds a byte neither qdtext nor a quoted-pair allows.
    private mutating func quotedString() -> String? {
        index += 1
        var value: [UInt8] = []
        while index < bytes.count {
            let byte = bytes[index]
            if byte == Self.quote {
                index += 1
                return String(decoding: value, as: UTF8.self)
            }
            if byte == Self.backslash {
                guard index + 1 < bytes.count, Self.isQuotedText(bytes[index + 1]) || bytes[index + 1] == Self.quote
                    || bytes[index + 1] == Self.backslash
                else { return nil }
                value.append(bytes[index + 1])
                index += 2
                continue
            }
            guard Self.isQuotedText(byte) else { return nil }
            value.append(byte)
            index += 1
        }
        return nil
    }

    /// Skips to the next comma that is not inside a quoted-string (left for the caller), or to the end.
    private mutating func skipElement() {
        var quoted = false
        while index < bytes.count {
            let byte = bytes[index]
            if quoted {
                if byte == Self.backslash {
                    index += 1
                } else if byte == Self.quote {
                    quoted = false
                }
            } else if byte == Self.quote {
                quoted = true
            } else if byte == Self.comma {
                return
            }
            index += 1
        }
        index = bytes.count
    }

    /// Skips spaces and tabs (OWS, BWS); says whether there were any.
    @discardableResult
    private mutating func skipWhitespace() -> Bool {
        let start = index
        while index < bytes.count, bytes[index] == Self.space || bytes[index] == Self.tab { index += 1 }
        return index > start
    }

    /// Skips commas, spaces and tabs: the separators of a list and its empty elements.
    private mutating func skipListSeparators() {
        while index < bytes.count, bytes[index] == Self.comma || bytes[index] == Self.space || bytes[index] == Self.tab {
            index += 1
        }
    }

    /// tchar (RFC 9110 §5.6.2): digits, letters and the visible characters ! # $ % & ' * + - . ^ _ | ~ and the backtick.
    private static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"):
            return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
            UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
            UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    /// qdtext (RFC 9110 §5.6.4): HTAB, SP, visible ASCII but `"` and `\`, and obs-text (0x80–0xFF).
    private static func isQuotedText(_ byte: UInt8) -> Bool {
        byte == tab || byte == space || (byte >= 0x21 && byte <= 0x7E && byte != quote && byte != backslash) || byte >= 0x80
    }
}
