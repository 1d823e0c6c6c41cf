import LoginKit
import LoginKitHTTP
import Testing

/// How a sign-in response is checked against its request, whether it came to the loopback receiver
/// or was pasted.
@Suite struct AuthorizationResponseTests {
    let state = String(repeating: "S", count: 43)
    let issuer = "https://id.example.com"

    func request(requiresIssuer: Bool = true, redirectURI: String = "http://127.0.0.1:8000/callback")
        -> AuthorizationRequest
    {
        AuthorizationRequest(
            url: issuer + "/authorize?…", redirectURI: redirectURI, state: state, nonce: "n",
            codeVerifier: String(repeating: "v", count: 43),
            scope: "openid", issuer: issuer, requiresIssuerInResponse: requiresIssuer
        )
    }

    func query(_ pairs: [(String, String)]) -> String { FormURLEncoding.encode(pairs) }

    func failure(of outcome: CallbackOutcome) -> (any Error)? {
        if case .failed(let error) = outcome { return error }
        return nil
    }

    @Test func aResponseWithStateAndIssuerYieldsTheCode() {
        let outcome = request().outcome(
            ofCallbackQuery: query([("code", "the-code"), ("state", state), ("iss", issuer)]))
        guard case .code("the-code") = outcome else {
            Issue.record("\(outcome)")
            return
        }
    }

    /// A response without this login's `state` is not this login's: nothing else in it is read (not
    /// even a repeated parameter or another `iss`), and the receiver ignores it — the login goes on.
    @Test func anotherOrMissingStateMakesAForeignResponseBeforeAnythingElseIsRead() {
        for pairs in [
            [("code", "c"), ("state", "other"), ("iss", issuer)], [("code", "c"), ("iss", issuer)],
            [("error", "access_denied"), ("state", "x")], [("code", "a"), ("code", "b"), ("state", "x")],
            [("code", "c"), ("state", "x"), ("iss", "https://evil.example")],
        ] {
            let outcome = request().outcome(ofCallbackQuery: query(pairs))
            guard case .foreign(let error) = outcome else {
                Issue.record("\(pairs): \(outcome)")
                continue
            }
            #expect(error.code == .stateMismatch, "\(pairs)")
            let reply = CallbackPage.reply(for: outcome)
            #expect(reply.status == 400, "\(pairs)")
            let endsTheLogin = reply.outcome != nil
            #expect(!endsTheLogin, "\(pairs): a foreign response must not end the login")
        }
    }

    /// A response with this login's `state` but another (or, when promised, no) `iss` is this
    /// login's response mixed up with another issuer's (RFC 9207): it ends the login.
    @Test func anIssuerMismatchUnderTheRightStateEndsTheLogin() {
        let outcome = request().outcome(
            ofCallbackQuery: query([("code", "c"), ("state", state), ("iss", "https://evil.example")]))
        let reply = CallbackPage.reply(for: outcome)
        #expect(reply.status == 400)
        guard case .failure(let error as LoginError)? = reply.outcome else {
            Issue.record("an issuer mismatch must end the login: \(String(describing: reply.outcome))")
            return
        }
        #expect(error.code == .issuerMismatch)
    }

    @Test func anotherIssuerIsRefusedAndAMissingOneWhenThePromiseWasMade() {
        let other = failure(
            of: request().outcome(
                ofCallbackQuery: query([("code", "c"), ("state", state), ("iss", "https://evil.example")])))
        #expect((other as? LoginError)?.code == .issuerMismatch)
        let missing = failure(of: request().outcome(ofCallbackQuery: query([("code", "c"), ("state", state)])))
        #expect((missing as? LoginError)?.code == .issuerMismatch)
        guard
            case .code = request(requiresIssuer: false).outcome(
                ofCallbackQuery: query([("code", "c"), ("state", state)]))
        else {
            Issue.record("a provider that promises no iss need not send it")
            return
        }
        let wrongAnyway = failure(
            of: request(requiresIssuer: false).outcome(
                ofCallbackQuery: query([("code", "c"), ("state", state), ("iss", "x")])))
        #expect((wrongAnyway as? LoginError)?.code == .issuerMismatch)
    }

    @Test func providerErrorsMapToTheKitsErrors() {
        func mapped(_ code: String) -> (any Error)? {
            failure(
                of: request().outcome(
                    ofCallbackQuery: query([
                        ("error", code), ("error_description", "why\n<script>"), ("state", state), ("iss", issuer),
                    ])))
        }
        #expect((mapped("access_denied") as? LoginError)?.code == .accessDenied)
        #expect((mapped("invalid_scope") as? LoginError)?.code == .invalidScope)
        #expect((mapped("login_required") as? LoginError)?.code == .accessDenied)
        #expect((mapped("temporarily_unavailable") as? ServerError)?.isTransient == true)
        #expect((mapped("invalid_request") as? ServerError)?.code == .protocolError)
        #expect(!((mapped("access_denied") as? LoginError)?.message.contains("\n") ?? true))
    }

    @Test func aRequestWithoutAResponseIsIgnoredAndRepeatedParametersRefused() {
        guard case .notACallback = request().outcome(ofCallbackQuery: "foo=bar") else {
            Issue.record("a request without state, code or error ends the login")
            return
        }
        let repeated = failure(
            of: request().outcome(
                ofCallbackQuery: query([("code", "a"), ("code", "b"), ("state", state), ("iss", issuer)])))
        #expect((repeated as? ServerError)?.code == .malformedResponse)
    }

    @Test func pagesNeverEchoTheResponse() {
        let outcomes: [CallbackOutcome] = [
            request().outcome(ofCallbackQuery: query([("code", "the-code"), ("state", state), ("iss", issuer)])),
            request().outcome(ofCallbackQuery: query([("code", "the-code"), ("state", "forged"), ("iss", issuer)])),
            request().outcome(
                ofCallbackQuery: query([
                    ("error", "access_denied"), ("error_description", "<b>x</b>"), ("state", state), ("iss", issuer),
                ])),
        ]
        let replies = outcomes.map(CallbackPage.reply(for:))
        #expect(replies.map(\.status) == [200, 400, 200])
        for reply in replies {
            #expect(!reply.page.contains("the-code"))
            #expect(!reply.page.contains("forged"))
            #expect(!reply.page.contains("<b>"))
            #expect(!reply.page.contains(state))
        }
    }

    @Test func aPastedRedirectIsCheckedLikeACallback() throws {
        let pasted =
            "  http://127.0.0.1:8000/callback?" + query([("code", "the-code"), ("state", state), ("iss", issuer)])
            + "\n"
        #expect(try PastedRedirect.authorizationCode(from: pasted, for: request()) == "the-code")

        for text in [
            "the-code", "http://127.0.0.1:9999/callback?code=c&state=\(state)", "http://localhost:8000/callback?code=c",
            "http://127.0.0.1:8000/other?code=c",
        ] {
            let error = #expect(throws: LoginError.self, "\(text)") {
                try PastedRedirect.authorizationCode(from: text, for: request())
            }
            #expect(error?.code == .invalidRedirect, "\(text)")
        }
        let forged = "http://127.0.0.1:8000/callback?" + query([("code", "c"), ("state", "forged"), ("iss", issuer)])
        let error = #expect(throws: LoginError.self) {
            try PastedRedirect.authorizationCode(from: forged, for: request())
        }
        #expect(error?.code == .stateMismatch)
        let empty = #expect(throws: LoginError.self) {
            try PastedRedirect.authorizationCode(from: "http://127.0.0.1:8000/callback", for: request())
        }
        #expect(empty?.code == .invalidRedirect)
    }
}
