import LoginKitHTTP
import LoginKitJOSE

/// One authorization request (RFC 6749 §4.1.1 with PKCE, OIDC Core §3.1.2.1): the URL to open in
/// the browser and what its response is checked against.
///
/// Make one per attempt with ``AuthorizationCodeAPI/authorizationRequest(redirectURI:options:)``;
/// never reuse one. `description` shows neither the URL nor `state`, `nonce`, the verifier or the
/// DPoP key.
package struct AuthorizationRequest: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The authorization URL to open: the endpoint with every parameter, or for a pushed request
    /// (RFC 9126) with only `client_id` and `request_uri`.
    package let url: String
    /// The redirect URI sent (and sent again in the code exchange).
    package let redirectURI: String
    /// The `state` sent; the response must carry it back.
    package let state: String
    /// The `nonce` sent, when the scope has `openid`; the ID token must carry it.
    package let nonce: String?
    /// The PKCE code verifier; sent only to the token endpoint.
    package let codeVerifier: String
    /// The scope asked for (empty when none was sent).
    package let scope: String
    /// The issuer the request goes to; a response's `iss`, when present, must equal it.
    package let issuer: String
    /// Whether the response must carry `iss` (the provider advertises
    /// `authorization_response_iss_parameter_supported`, RFC 9207 §3).
    package let requiresIssuerInResponse: Bool
    /// The provider's `scopes_supported`, when its discovery lists them: an `invalid_scope`
    /// response names them.
    package let advertisedScopes: [String]?
    /// The DPoP key (RFC 9449) whose thumbprint the request sent as `dpop_jkt`: the code exchange
    /// proves possession of it, and the credentials keep it. `nil`: bearer tokens.
    package let proofKey: DPoPKey?

    /// A request built by another ``AuthorizationCodeAPI`` implementation; the redirect is checked
    /// against its `state`, `issuer` and `nonce`, and `codeVerifier` (with `proofKey`'s proof, when
    /// given) redeems the code.
    package init(
        url: String, redirectURI: String, state: String, nonce: String?, codeVerifier: String, scope: String,
        issuer: String, requiresIssuerInResponse: Bool, advertisedScopes: [String]? = nil, proofKey: DPoPKey? = nil
    ) {
        self.url = url
        self.redirectURI = redirectURI
        self.state = state
        self.nonce = nonce
        self.codeVerifier = codeVerifier
        self.scope = scope
        self.issuer = issuer
        self.requiresIssuerInResponse = requiresIssuerInResponse
        self.advertisedScopes = advertisedScopes
        self.proofKey = proofKey
    }

    package var description: String {
        "AuthorizationRequest(redirect URI \(redirectURI), scope \"\(scope)\", state, nonce and verifier redacted)"
    }
    package var debugDescription: String { description }
    package var customMirror: Mirror { Mirror(self, children: [:]) }
}

/// What a redirect to the callback says, once checked against the request it answers.
package enum CallbackOutcome: Sendable {
    /// Not a sign-in response at all (no `state`, `code` or `error`): it is ignored.
    case notACallback
    /// Not this login's response: its `state` is missing or another one (another sign-in's
    /// response, or a forgery). Nothing in it is read. The receiver answers it with an error page
    /// and keeps waiting, so that whoever can reach the loopback port cannot end the login; a pasted
    /// one is refused with this error (`LoginError` `.stateMismatch`).
    case foreign(LoginError)
    /// The authorization code; `state` and `iss` held.
    case code(String)
    /// This login's response (its `state` held), refused or reporting an error; the login ends with
    /// this error.
    case failed(any Error)
}

extension AuthorizationRequest {
    /// Checks a callback's query string (`code=…&state=…&iss=…`, or `error=…`): first `state`, then
    /// `iss` (RFC 9207 §2.4), and only then what it reports. A response without this login's `state`
    /// is ``CallbackOutcome/foreign(_:)``: it never completes the login, and neither ends it nor
    /// carries a message of the sender's choosing. A response with this login's `state` but another
    /// `iss` is this login's response mixed up with another issuer: it ends the login.
    package func outcome(ofCallbackQuery query: some StringProtocol) -> CallbackOutcome {
        let (fields, duplicates) = FormURLEncoding.decodeFields(query)
        guard fields["state"] != nil || fields["code"] != nil || fields["error"] != nil else { return .notACallback }
        guard let state = fields["state"], constantTimeEquals(state, self.state) else {
            return .foreign(
                LoginError(
                    .stateMismatch,
                    "the sign-in response does not carry this login's state: it belongs to another sign-in or was forged; start again"
                ))
        }
        guard duplicates.isEmpty else {
            let names = duplicates.sorted().map { printableExcerpt($0) }.joined(separator: ", ")
            return .failed(ServerError(.malformedResponse, "the sign-in response repeats \(names) (RFC 6749 §3.1)"))
        }
        if let iss = fields["iss"] {
            guard iss == issuer else {
                return .failed(
                    LoginError(
                        .issuerMismatch,
                        "the sign-in response names issuer \"\(printableExcerpt(iss, limit: 200))\", not \"\(printableExcerpt(issuer, limit: 200))\" (RFC 9207): a mix-up attack or a misconfigured provider"
                    ))
            }
        } else if requiresIssuerInResponse {
            return .failed(
                LoginError(
                    .issuerMismatch,
                    "the sign-in response has no iss although \(printableExcerpt(issuer, limit: 200)) advertises authorization_response_iss_parameter_supported (RFC 9207)"
                ))
        }
        if let error = fields["error"] {
            let scopes = TokenEndpoint.ScopeContext(asked: scope.isEmpty ? nil : scope, advertised: advertisedScopes)
            return .failed(Self.authorizationError(error, description: fields["error_description"], scopes: scopes))
        }
        guard let code = fields["code"], !code.isEmpty else {
            return .failed(ServerError(.malformedResponse, "the sign-in response has neither a code nor an error"))
        }
        return .code(code)
    }

    /// The typed error for an authorization error response (RFC 6749 §4.1.2.1, OIDC Core §3.1.2.6);
    /// an `invalid_scope` refusal names what `scopes` holds, when given.
    static func authorizationError(_ error: String, description: String?, scopes: TokenEndpoint.ScopeContext? = nil) -> any Error {
        let code = printableExcerpt(error)
        let detail = description.map { ": " + printableExcerpt($0, limit: 200) } ?? ""
        switch error {
        case "access_denied":
            return LoginError(.accessDenied, "the sign-in was denied\(detail)", providerError: code)
        case "invalid_scope":
            return LoginError(
                .invalidScope, scopes.map { $0.refusal(detail: detail) } ?? "the requested scope was refused\(detail)", providerError: code)
        case "unauthorized_client":
            return LoginError(
                .unauthorizedClient, "this client may not use the authorization code flow\(detail)", providerError: code
            )
        case "login_required", "consent_required", "interaction_required", "account_selection_required":
            return LoginError(
                .accessDenied,
                "the provider needs the user to sign in interactively (\(code))\(detail); do not send prompt=none",
                providerError: code)
        case "server_error", "temporarily_unavailable":
            return ServerError(
                .unavailable, "the provider failed the sign-in (\(code))\(detail); try again later", providerError: code
            )
        default:
            return ServerError(
                .protocolError, "the provider refused the authorization request (\(code))\(detail)", providerError: code
            )
        }
    }
}

/// A redirect URL the user copied from the browser's address bar, for when the browser could not
/// reach the loopback receiver (another machine, no browser at all): kubelogin's "authcode-keyboard".
package enum PastedRedirect {
    /// The authorization code in `text`, checked exactly as the loopback receiver checks a callback:
    /// the address must be `request.redirectURI` (scheme, host, port, path), then `state`, then `iss`.
    ///
    /// - Throws: `LoginError` `.invalidRedirect` when `text` is not such an address or carries
    ///   no sign-in response (ask again; nothing was checked); otherwise what the response carries:
    ///   `LoginError` `.stateMismatch`/`.issuerMismatch`/`.accessDenied`, `ServerError`.
    package static func authorizationCode(from text: String, for request: AuthorizationRequest) throws -> String {
        let trimmed = String(text.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
        guard let pasted = URLParts(trimmed), let expected = URLParts(request.redirectURI),
            pasted.scheme == expected.scheme, pasted.host == expected.host, pasted.port == expected.port,
            path(of: pasted) == path(of: expected)
        else {
            throw LoginError(
                .invalidRedirect,
                "paste the whole address the browser was sent to; it starts with \(request.redirectURI)")
        }
        let query =
            pasted.pathAndQuery.firstIndex(of: "?").map { pasted.pathAndQuery[pasted.pathAndQuery.index(after: $0)...] }
            ?? ""
        switch request.outcome(ofCallbackQuery: query) {
        case .notACallback:
            throw LoginError(
                .invalidRedirect, "that address carries no sign-in response; paste the address shown after signing in")
        case .code(let code):
            return code
        case .foreign(let error):
            throw error
        case .failed(let error):
            throw error
        }
    }

    private static func path(of parts: URLParts) -> Substring {
        parts.pathAndQuery.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
    }
}
