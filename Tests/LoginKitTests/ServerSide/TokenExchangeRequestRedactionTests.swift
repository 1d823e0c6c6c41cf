import LoginKit
import Testing

/// A token exchange request prints, reflects and dumps its token types and target, never its tokens.
@Suite struct TokenExchangeRequestRedactionTests {
    @Test func printReflectionAndDumpShowNeitherToken() {
        let request = TokenExchangeRequest(
            subjectToken: "subject-token-value", actorToken: "actor-token-value", requestedTokenType: TokenExchangeRequest.jwtType,
            target: TokenTarget(audience: "https://api.example"))
        var dumped = ""
        dump(request, to: &dumped)
        for shown in [String(describing: request), String(reflecting: request), "\(request)", String(describing: [request]), dumped] {
            #expect(!shown.contains("subject-token-value"), "\(shown)")
            #expect(!shown.contains("actor-token-value"), "\(shown)")
            #expect(shown.contains("<redacted>"))
            #expect(shown.contains("https://api.example") && shown.contains(TokenExchangeRequest.jwtType))
        }
        var optional = ""
        dump(Optional(request), to: &optional)
        #expect(!optional.contains("token-value"))
    }
}
