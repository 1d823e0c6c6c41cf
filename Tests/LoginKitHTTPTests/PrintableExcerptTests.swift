import LoginKitHTTP
import Testing

@Suite struct PrintableExcerptTests {
    @Test func printableASCIIIsKept() {
        #expect(printableExcerpt("invalid_grant") == "invalid_grant")
        #expect(printableExcerpt("https://issuer.test/a?b=c", limit: 200) == "https://issuer.test/a?b=c")
    }

    @Test func controlCharactersAndNonASCIIAreEscaped() {
        #expect(printableExcerpt("a\nb\u{1B}[31m") == #"a\u{A}b\u{1B}[31m"#)
        #expect(printableExcerpt("\r\u{7F}\u{9B}é") == #"\u{D}\u{7F}\u{9B}\u{E9}"#)
        #expect(printableExcerpt(#"back\slash"#) == #"back\\slash"#)
    }

    @Test func theExcerptIsBounded() {
        #expect(printableExcerpt(String(repeating: "a", count: 100)) == String(repeating: "a", count: 64) + "...")
        #expect(printableExcerpt("abcdef", limit: 3) == "abc...")
        // An escape is never cut in half.
        #expect(printableExcerpt("ab\n", limit: 4) == "ab...")
        #expect(printableExcerpt("abc", limit: 3) == "abc")
    }

    @Test func escapingControlCharactersKeepsEverythingElse() {
        #expect(escapingControlCharacters("plain — é ✓") == "plain — é ✓")
        #expect(escapingControlCharacters("a\nb\u{1B}c\u{202E}d\u{85}") == #"a\u{A}b\u{1B}c\u{202E}d\u{85}"#)
    }
}
