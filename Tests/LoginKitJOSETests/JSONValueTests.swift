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
