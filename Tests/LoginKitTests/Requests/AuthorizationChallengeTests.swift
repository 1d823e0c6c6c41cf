import LoginKit
import Testing

/// `WWW-Authenticate` parsing (RFC 9110 §11.6.1): several challenges per value and per header line,
/// token and quoted-string values, token68 skipped; malformed and hostile values never trap, never
/// take more than linear time and yield what can be read.
@Suite struct AuthorizationChallengeTests {
    typealias Challenge = AuthorizationChallenge

    @Test func oneBearerChallengeWithQuotedParameters() {
        let parsed = Challenge.parse([#"Bearer realm="example", error="invalid_token", error_description="The access token expired""#])
        #expect(
            parsed == [
                Challenge(scheme: "Bearer", parameters: ["realm": "example", "error": "invalid_token", "error_description": "The access token expired"])
            ])
    }

    /// RFC 9110 §11.6.1's own example: two challenges in one value, a token value, escapes.
    @Test func severalChallengesInOneValue() {
        let parsed = Challenge.parse([#"Newauth realm="apps", type=1, title="Login to \"apps\"", Basic realm="simple""#])
        #expect(
            parsed == [
                Challenge(scheme: "Newauth", parameters: ["realm": "apps", "type": "1", "title": #"Login to "apps""#]),
                Challenge(scheme: "Basic", parameters: ["realm": "simple"]),
            ])
    }

    @Test func severalHeaderLinesKeepTheirOrder() {
        let parsed = Challenge.parse([
            #"Bearer realm="api""#,
            #"DPoP algs="ES256 PS256", error="use_dpop_nonce", error_description="Resource server requires nonce in DPoP proof""#,
        ])
        #expect(parsed.map(\.scheme) == ["Bearer", "DPoP"])
        #expect(parsed.last?.parameters["error"] == "use_dpop_nonce")
        #expect(parsed.last?.parameters["algs"] == "ES256 PS256")
    }

    @Test func rfc9470StepUpChallenge() {
        let parsed = Challenge.parse([
            #"Bearer error="insufficient_user_authentication", error_description="A different authentication level is required", acr_values="myACR""#,
            #"Bearer error="insufficient_user_authentication", error_description="More recent authentication is required", max_age="5""#,
        ])
        #expect(parsed.count == 2)
        #expect(parsed.first?.parameters["acr_values"] == "myACR")
        #expect(parsed.last?.parameters["max_age"] == "5")
    }

    @Test func namesAreLowerCasedSchemesKeptAndComparedIgnoringCase() {
        let parsed = Challenge.parse([#"BEARER Error="invalid_token", ERROR_DESCRIPTION = "x""#])
        #expect(parsed == [Challenge(scheme: "BEARER", parameters: ["error": "invalid_token", "error_description": "x"])])
        #expect(parsed.first?.hasScheme("bearer") == true)
        #expect(parsed.first?.hasScheme("DPoP") == false)
        #expect(parsed.first?.hasScheme("Bearer ") == false)
    }

    @Test func token68IsSkippedAndSchemesWithoutParametersKept() {
        #expect(
            Challenge.parse(["Basic dXNlcjpwYXNzd29yZA==, Bearer, Negotiate abc=, DPoP algs=ES256"]) == [
                Challenge(scheme: "Basic"), Challenge(scheme: "Bearer"), Challenge(scheme: "Negotiate"),
                Challenge(scheme: "DPoP", parameters: ["algs": "ES256"]),
            ])
        #expect(Challenge.parse(["Basic a/b+c=="]) == [Challenge(scheme: "Basic")])
    }

    @Test func emptyElementsAndWhitespaceAreAllowed() {
        #expect(
            Challenge.parse([" ,, Bearer  realm=\"a\" ,  , error=invalid_token ,,\tDPoP , "]) == [
                Challenge(scheme: "Bearer", parameters: ["realm": "a", "error": "invalid_token"]), Challenge(scheme: "DPoP"),
            ])
        #expect(Challenge.parse([]) == [])
        #expect(Challenge.parse(["", " ", ",,,"]) == [])
    }

    @Test func theFirstValueOfARepeatedNameIsKept() {
        #expect(Challenge.parse([#"Bearer error="first", error="second""#]).first?.parameters["error"] == "first")
    }

    @Test func escapesInQuotedStringsAreRemoved() {
        let parsed = Challenge.parse([#"Bearer a="back\\slash", b="\q\"x\"", c="", d="comma, inside""#])
        #expect(parsed.first?.parameters == ["a": #"back\slash"#, "b": #"q"x""#, "c": "", "d": "comma, inside"])
    }

    // MARK: Malformed and hostile values

    @Test func anUnterminatedQuoteEndsTheValueKeepingWhatCameBefore() {
        let parsed = Challenge.parse([#"Bearer error="invalid_token", error_description="never closed, DPoP error=use_dpop_nonce"#])
        #expect(parsed == [Challenge(scheme: "Bearer", parameters: ["error": "invalid_token"])])
        // The next header line is read as usual.
        let twoLines = Challenge.parse([#"Bearer realm="x"#, #"DPoP error="use_dpop_nonce""#])
        #expect(twoLines == [Challenge(scheme: "Bearer"), Challenge(scheme: "DPoP", parameters: ["error": "use_dpop_nonce"])])
        #expect(Challenge.parse([#"Bearer error="ends with a backslash\"#]) == [Challenge(scheme: "Bearer")])
    }

    @Test func aControlCharacterInAQuotedStringEndsTheValue() {
        let parsed = Challenge.parse(["Bearer a=\"b\", c=\"x\u{1B}[31m\", d=\"e\""])
        #expect(parsed == [Challenge(scheme: "Bearer", parameters: ["a": "b"])])
    }

    @Test func junkIsSkippedUpToTheNextComma() {
        // Text after a value, a value that is neither a token nor a quoted-string, a quoted-string
        // after a value: each dropped up to the next comma outside quotes.
        let parsed = Challenge.parse([#"Bearer error=invalid_token junk, x=@@@, realm="r" "extra, still", DPoP error="use_dpop_nonce""#])
        #expect(
            parsed == [
                Challenge(scheme: "Bearer", parameters: ["error": "invalid_token", "realm": "r"]),
                Challenge(scheme: "DPoP", parameters: ["error": "use_dpop_nonce"]),
            ])
        // A parameter without a name.
        #expect(Challenge.parse([#"Bearer ="nameless", realm="r""#]) == [Challenge(scheme: "Bearer", parameters: ["realm": "r"])])
        // A scheme followed by neither a space nor a comma, a quoted-string where a scheme belongs.
        #expect(Challenge.parse([#"Bearer=notascheme, "quoted, scheme", DPoP"#]) == [Challenge(scheme: "DPoP")])
    }

    @Test func tenThousandCommasAreReadInLinearTime() {
        #expect(Challenge.parse([String(repeating: ",", count: 10_000)]) == [])
        #expect(Challenge.parse([String(repeating: ", ", count: 10_000) + "Bearer"]) == [], "beyond the 8 KiB read")
        #expect(Challenge.parse(["Bearer" + String(repeating: ",", count: 3_000) + "error=invalid_token"]) == [
            Challenge(scheme: "Bearer", parameters: ["error": "invalid_token"])
        ])
    }

    @Test func atMost64ChallengesAreReturned() {
        let many = Array(repeating: "Bearer", count: 1000).joined(separator: ", ")
        #expect(Challenge.parse([many]).count == Challenge.maximumChallenges)
        #expect(Challenge.parse(Array(repeating: "Bearer, DPoP", count: 100)).count == Challenge.maximumChallenges)
    }

    @Test func aHugeHeaderIsReadOnlyToItsFirst8KiBAndTheChallengeCutThereIsDropped() {
        let huge = #"Bearer error="invalid_token", DPoP error_description=""# + String(repeating: "x", count: 1 << 20) + "\""
        #expect(Challenge.parse([huge]) == [Challenge(scheme: "Bearer", parameters: ["error": "invalid_token"])])
        // The values after the limit are not read.
        let filler = "Basic " + String(repeating: "a", count: Challenge.maximumBytes)
        #expect(Challenge.parse([#"Bearer error="insufficient_user_authentication""#, filler, "DPoP"]).map(\.scheme) == ["Bearer"])
        // A value that ends exactly at the limit is complete.
        let exact = "Bearer realm=" + String(repeating: "r", count: Challenge.maximumBytes - 13)
        #expect(exact.utf8.count == Challenge.maximumBytes)
        #expect(Challenge.parse([exact]).first?.parameters["realm"]?.count == Challenge.maximumBytes - 13)
    }

    @Test func arbitraryBytesNeverTrap() {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array(#"Bearer DPoP a=b"\,=  "#.unicodeScalars) + ["\u{0}", "\u{7F}", "\u{E9}", "\t", "\u{1F600}"]
        for _ in 0..<2000 {
            let length = Int.random(in: 0...80, using: &generator)
            let value = String(String.UnicodeScalarView((0..<length).map { _ in alphabet.randomElement(using: &generator) ?? " " }))
            let parsed = Challenge.parse([value, value])
            #expect(parsed.count <= Challenge.maximumChallenges)
            #expect(parsed.allSatisfy { !$0.scheme.isEmpty })
        }
    }
}
