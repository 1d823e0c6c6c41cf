import LoginKitJOSE
import Testing

@Suite struct JSONValueTests {
    @Test func parsesEveryKindOfValue() throws {
        let value = try JSONValue.parse(Array(#" {"a": [1, -2.5e3, true, false, null, "x\u00e9\ud83d\ude00\n"], "b": {}} "#.utf8))
        #expect(value["a"]?.arrayValue?.count == 6)
        #expect(value["a"]?.arrayValue?[0].int64Value == 1)
        #expect(value["a"]?.arrayValue?[1].doubleValue == -2500)
        #expect(value["a"]?.arrayValue?[5].stringValue == "xé😀\n")
        #expect(value["b"]?.objectValue?.isEmpty == true)
    }

    @Test(arguments: [
        #"{"alg":"RS256","alg":"none"}"#,  // duplicate member: the forger's favourite
        #"{"a":1,}"#, #"[1,]"#, #"{"a":01}"#, #"{'a':1}"#, #"{"a":1} x"#, #"{"a":"\ud800"}"#, #"{"a":"\udc00"}"#,
        #"{"a":"\x"}"#, #"{"a":.5}"#, #"{"a":1.}"#, #"{"a":tru}"#, #"// c"#, "", "{\"a\":\"\u{01}\"}", #"{"a" 1}"#,
        #"{"a":-}"#, #"{"a":1e}"#, #"NaN"#,
    ])
    func refusesInvalidJSON(_ text: String) {
        #expect(throws: JSONParseError.self) { try JSONValue.parse(Array(text.utf8)) }
    }

    @Test func refusesInvalidUTF8() {
        #expect(throws: JSONParseError.self) { try JSONValue.parse([0x22, 0xC3, 0x28, 0x22]) }
    }

    /// Strings are read on three paths: ASCII without escapes, non-ASCII without escapes (validated
    /// as UTF-8), and with escapes (runs and escapes gathered in one buffer).
    @Test(arguments: [
        (#""https://issuer.example/a""#, "https://issuer.example/a"),
        (#""https:\/\/issuer.example\/a""#, "https://issuer.example/a"),  // how many encoders write "/"
        (#""Zoë Å""#, "Zoë Å"),
        (#""Zoë\n\u00c5\/ü""#, "Zoë\nÅ/ü"),
        (#""\ud83d\ude00é\t""#, "😀é\t"),
        (#""\"\\\b\f\r""#, "\"\\\u{08}\u{0C}\r"),
        (#""a\u0000b""#, "a\u{0}b"),
        (#""""#, ""),
    ])
    func decodesStrings(_ json: String, _ expected: String) throws {
        #expect(try JSONValue.parse(Array(json.utf8)).stringValue == expected)
    }

    @Test func invalidUTF8IsRefusedOnEveryPathWithItsOffset() {
        func offset(_ bytes: [UInt8]) -> Int? {
            #expect(throws: JSONParseError.self) { try JSONValue.parse(bytes) }?.offset
        }
        // `"ab\/` then a truncated two-byte sequence, then an escape that must not complete it.
        #expect(offset(Array(#""ab\/"#.utf8) + [0xC3] + Array(#"\u00a9""#.utf8)) == 5)
        #expect(offset([0x22, 0x78, 0xE2, 0x82] + Array(#"\n""#.utf8)) == 1)  // before an escape
        #expect(offset([0x22, 0x61, 0xFF, 0x22]) == 1)  // no escape at all
    }

    @Test func aMemberNameWrittenWithEscapesIsStillADuplicate() {
        #expect(throws: JSONParseError.self) { try JSONValue.parse(Array(#"{"iss":"a","\u0069ss":"b"}"#.utf8)) }
        #expect(throws: JSONParseError.self) { try JSONValue.parse(Array(#"{"a\/b":1,"a/b":2}"#.utf8)) }
    }

    @Test func numbersConvertAsWritten() throws {
        let value = try JSONValue.parse(Array(#"[1700000000, -0, 9007199254740993, 1e3, -2.5, 123456789012345678901234567890]"#.utf8))
        let numbers = try #require(value.arrayValue).map(\.doubleValue)
        #expect(numbers[0] == 1_700_000_000)
        #expect(numbers[1] == 0 && numbers[1]?.sign == .minus)
        #expect(numbers[2] == Double("9007199254740993"))  // beyond 2^53: rounded as strtod rounds
        #expect(numbers[3] == 1000)
        #expect(numbers[4] == -2.5)
        #expect(numbers[5] == 1.2345678901234568e29)
    }

    @Test func refusesDeepNesting() {
        let deep = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        #expect(throws: JSONParseError.self) { try JSONValue.parse(Array(deep.utf8)) }
        let fine = String(repeating: "[", count: 10) + String(repeating: "]", count: 10)
        #expect(throws: Never.self) { try JSONValue.parse(Array(fine.utf8)) }
    }

    @Test func serialisesDeterministically() throws {
        let value = try JSONValue.parse(Array(#"{"b":[1,"x\"y"],"a":null}"#.utf8))
        #expect(value.serialized == #"{"a":null,"b":[1,"x\"y"]}"#)
        #expect(try JSONValue.parse(Array(value.serialized.utf8)) == value)
    }
}
