// Built with LoginKit's "DevServer" package trait only (Package.swift; docs/architecture.md, "Weight").
#if DevServer
import LoginKitHTTP
import LoginKitJOSE

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The authorization code flow (RFC 6749 §4.1) with PKCE enforced (RFC 7636, `S256` only), `nonce`
/// carried into the ID token, `iss` in every response (RFC 9207), pushed requests taken by their
/// `request_uri` (RFC 9126 §4), and `dpop_jkt` binding the code to a DPoP key (RFC 9449 §10). HTTP
/// lives in `AuthorizationEndpoint`.
extension IdentityProvider {
    /// What the authorization endpoint answers.
    enum AuthorizationStep: Equatable {
        /// An HTML page with this status.
        case page(status: Int, html: String)
        /// A redirect (302 after a GET, 303 after the form's POST) to this location.
        case redirect(status: Int, location: String)
    }

    /// How long a shown sign-in form stays valid.
    static let pendingRequestLifetime: TimeInterval = 600
    /// How long an authorization code stays valid.
    static let authorizationCodeLifetime: TimeInterval = 60

    /// What an authorization request asks for once its client and redirect URI are known, checked.
    struct AuthorizationParameters {
        let codeChallenge: String
        let scope: String
        /// `dpop_jkt`, unless DPoP is disabled.
        let dpopJKT: String?
        /// The first `acr_values` entry this provider supports, else the password one.
        let acr: String
        let maxAge: Int?
    }

    /// Checks an authorization request's `response_type`, PKCE challenge, `scope`, `dpop_jkt`,
    /// `acr_values` and `max_age`, as the authorization endpoint and the PAR endpoint both do.
    func authorizationParameters(_ fields: [String: String]) throws(OAuthError) -> AuthorizationParameters {
        func refuse(_ code: String, _ description: String) -> OAuthError {
            OAuthError(status: 400, code: code, description: description)
        }
        guard fields["response_type"] == "code" else {
            throw refuse("unsupported_response_type", "only response_type=code is supported")
        }
        guard let challenge = fields["code_challenge"] else {
            throw refuse("invalid_request", "PKCE is required: send code_challenge and code_challenge_method=S256")
        }
        guard fields["code_challenge_method"] == "S256" else {
            throw refuse("invalid_request", "only code_challenge_method=S256 is accepted; plain (the default) is refused")
        }
        guard challenge.utf8.count == 43, Base64URL.decode(challenge)?.count == 32 else {
            throw refuse("invalid_request", "code_challenge is not a base64url SHA-256 digest")
        }
        let scope = fields["scope"] ?? "openid"
        if let refusal = scopeRefusal(scope) { throw refusal }
        var dpopJKT: String?
        if let thumbprint = fields["dpop_jkt"], configuration.dpop != .disabled {
            guard thumbprint.utf8.count == 43, Base64URL.decode(thumbprint)?.count == 32 else {
                throw refuse("invalid_request", "dpop_jkt is not a base64url SHA-256 JWK thumbprint")
            }
            dpopJKT = thumbprint
        }
        var maxAge: Int?
        if let text = fields["max_age"] {
            guard let seconds = Int(text), seconds >= 0 else { throw refuse("invalid_request", "max_age must be a number of seconds") }
            maxAge = seconds
        }
        let asked = fields["acr_values"]?.split(separator: " ").map(String.init) ?? []
        let acr = asked.first(where: { Self.supportedACRValues.contains($0) }) ?? Self.passwordACR
        return AuthorizationParameters(codeChallenge: challenge, scope: scope, dpopJKT: dpopJKT, acr: acr, maxAge: maxAge)
    }

    /// `GET /oauth/authorize?…`: checks the request and shows the sign-in form. Errors before the
    /// client and its redirect URI are known are shown as a page (never redirected to an unchecked
    /// URI, RFC 6749 §4.1.2.1); later ones go back to the client. A request with `request_uri` is
    /// the pushed request's parameters, for the same client, once and before it expires; when pushed
    /// requests are required, a request without one is refused.
    func startAuthorization(query: String) -> AuthorizationStep {
        let decoded = FormURLEncoding.decodeFields(query)
        var fields = decoded.fields
        guard decoded.duplicates.isEmpty else {
            return .page(status: 400, html: Self.errorPage("The request repeats a parameter."))
        }
        if let requestURI = fields["request_uri"] {
            guard let clientID = fields["client_id"],
                let pushed = authorizationCodes.takePushed(requestURI, now: configuration.now()), pushed.clientID == clientID
            else {
                return .page(
                    status: 400,
                    html: Self.errorPage(
                        "invalid_request: this request_uri is unknown, expired, already used, or was pushed by another client. "
                            + "Start again from the application."))
            }
            fields = pushed.fields
        } else if configuration.par == .required {
            return .page(
                status: 400,
                html: Self.errorPage(
                    "invalid_request: this provider requires pushed authorization requests (RFC 9126): "
                        + "push the request to \(Self.parPath) and send only client_id and request_uri."))
        }
        guard let clientID = fields["client_id"], let client = configuration.clients.first(where: { $0.id == clientID })
        else {
            return .page(status: 400, html: Self.errorPage("Unknown client."))
        }
        guard let redirectURI = fields["redirect_uri"],
            Self.redirectURI(redirectURI, isRegisteredIn: client.redirectURIs)
        else {
            return .page(status: 400, html: Self.errorPage("This redirect URI is not registered for the client."))
        }
        let state = fields["state"]
        func fail(_ error: String, _ description: String) -> AuthorizationStep {
            .redirect(
                status: 302,
                location: callbackURL(
                    redirectURI, [("error", error), ("error_description", description)], state: state))
        }
        let parameters: AuthorizationParameters
        do throws(OAuthError) {
            parameters = try authorizationParameters(fields)
        } catch {
            return fail(error.code, error.description)
        }
        if fields["prompt"]?.split(separator: " ").contains("none") == true {
            return fail("login_required", "the dev server keeps no sessions; sign in interactively")
        }
        let now = configuration.now()
        let request = AuthorizationCodes.PendingRequest(
            clientID: clientID, redirectURI: redirectURI, state: state, nonce: fields["nonce"],
            codeChallenge: parameters.codeChallenge, scope: parameters.scope,
            dpopJKT: parameters.dpopJKT, acr: parameters.acr, maxAge: parameters.maxAge,
            expiresAt: now.addingTimeInterval(Self.pendingRequestLifetime)
        )
        let id = authorizationCodes.addPending(request, now: now)
        return .page(
            status: 200,
            html: Self.signInPage(
                requestID: id, clientID: clientID, scope: parameters.scope, loginHint: fields["login_hint"], message: nil))
    }

    /// `POST /oauth/authorize` (the form): signs in and redirects with a code, or denies.
    func decideAuthorization(form: String) -> AuthorizationStep {
        let (fields, _) = FormURLEncoding.decodeFields(form)
        let now = configuration.now()
        guard let id = fields["request_id"], let request = authorizationCodes.pending(id, now: now) else {
            return .page(
                status: 400,
                html: Self.errorPage(
                    "This sign-in request is unknown or has expired. Start again from the application."))
        }
        if fields["action"] == "deny" {
            authorizationCodes.removePending(id)
            return .redirect(
                status: 303,
                location: callbackURL(
                    request.redirectURI,
                    [("error", "access_denied"), ("error_description", "the user denied the request")],
                    state: request.state)
            )
        }
        guard let username = fields["username"], let password = fields["password"],
            let signedIn = user(named: username, password: password)
        else {
            let page = Self.signInPage(
                requestID: id, clientID: request.clientID, scope: request.scope, loginHint: fields["username"],
                message: "Wrong username or password.")
            return .page(status: 401, html: page)
        }
        authorizationCodes.removePending(id)
        let code = authorizationCodes.issue(
            AuthorizationCodes.IssuedCode(
                clientID: request.clientID, redirectURI: request.redirectURI, codeChallenge: request.codeChallenge,
                nonce: request.nonce,
                scope: request.scope, username: signedIn.username,
                dpopJKT: request.dpopJKT, acr: request.acr, maxAge: request.maxAge, authTime: now,
                expiresAt: now.addingTimeInterval(Self.authorizationCodeLifetime)
            ), now: now)
        return .redirect(
            status: 303, location: callbackURL(request.redirectURI, [("code", code)], state: request.state))
    }

    /// The token endpoint's `authorization_code` grant: the code once, unexpired, for this client and
    /// redirect URI, a `code_verifier` whose S256 digest is the challenge, and for a code bound by
    /// `dpop_jkt` a DPoP proof by that key (`jkt`, the request's proof's thumbprint). The tokens are
    /// bound to `jkt` when there is one.
    func authorizationCodeGrant(client: DevClient, fields: [String: String], jkt: String? = nil) throws(OAuthError) -> [String: JSONValue] {
        guard let code = fields["code"], let redirectURI = fields["redirect_uri"] else {
            throw OAuthError(status: 400, code: "invalid_request", description: "code and redirect_uri are required")
        }
        guard let issued = authorizationCodes.redeem(code) else {
            throw OAuthError(
                status: 400, code: "invalid_grant", description: "unknown or already used authorization code")
        }
        guard issued.expiresAt > configuration.now() else {
            throw OAuthError(status: 400, code: "invalid_grant", description: "the authorization code expired")
        }
        guard issued.clientID == client.id else {
            throw OAuthError(
                status: 400, code: "invalid_grant", description: "the authorization code was issued to another client")
        }
        guard issued.redirectURI == redirectURI else {
            throw OAuthError(
                status: 400, code: "invalid_grant", description: "redirect_uri differs from the authorization request's"
            )
        }
        guard let verifier = fields["code_verifier"] else {
            throw OAuthError(status: 400, code: "invalid_grant", description: "code_verifier is required (PKCE)")
        }
        guard Self.isCodeVerifier(verifier), let digest = try? MessageDigest.sha256(Array(verifier.utf8)),
            Base64URL.encode(digest) == issued.codeChallenge
        else {
            throw OAuthError(
                status: 400, code: "invalid_grant",
                description: "PKCE verification failed: code_verifier does not match code_challenge")
        }
        if let bound = issued.dpopJKT {
            guard let jkt else {
                throw OAuthError(
                    status: 400, code: "invalid_dpop_proof",
                    description: "the authorization code is bound to a DPoP key (dpop_jkt): send a proof by that key")
            }
            guard jkt == bound else {
                throw OAuthError(status: 400, code: "invalid_grant", description: "DPoP key mismatch: the proof's key is not the one dpop_jkt named")
            }
        }
        guard let owner = configuration.users.first(where: { $0.username == issued.username }) else {
            throw OAuthError(status: 400, code: "invalid_grant", description: "the user no longer exists")
        }
        return issue(
            user: owner, clientID: client.id, scope: issued.scope, family: Self.randomToken(bytes: 9),
            nonce: issued.nonce, jkt: jkt, acr: issued.acr, authTime: issued.authTime)
    }

    /// Whether `requested` is one of `registered`: exactly, or for a loopback URI with any port
    /// (RFC 8252 §7.3): same scheme, host and path and query.
    static func redirectURI(_ requested: String, isRegisteredIn registered: [String]) -> Bool {
        guard let asked = URLParts(requested) else { return false }
        return registered.contains { candidate in
            if candidate == requested { return true }
            guard let known = URLParts(candidate), known.isLoopback, asked.isLoopback else { return false }
            return known.scheme == asked.scheme && known.host == asked.host && known.pathAndQuery == asked.pathAndQuery
        }
    }

    /// 43 to 128 characters of `A-Z a-z 0-9 - . _ ~` (RFC 7636 §4.1).
    static func isCodeVerifier(_ text: String) -> Bool {
        (43...128).contains(text.utf8.count)
            && text.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"),
                    UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                    true
                default:
                    false
                }
            }
    }

    /// `redirectURI` with `parameters`, `state` (when the request had one) and `iss` added to its query.
    func callbackURL(_ redirectURI: String, _ parameters: [(String, String)], state: String?) -> String {
        var all = parameters
        if let state { all.append(("state", state)) }
        all.append(("iss", issuer))
        let separator = redirectURI.contains("?") ? "&" : "?"
        return redirectURI + separator + FormURLEncoding.encode(all)
    }

    static func signInPage(requestID: String, clientID: String, scope: String, loginHint: String?, message: String?)
        -> String
    {
        """
        <!doctype html><html><head><meta charset="utf-8"><title>LoginKit dev — sign in</title></head>
        <body><h1>Sign in</h1><p><code>\(escaped(clientID))</code> asks for: \(escaped(scope))</p>\(message.map { "<p>\(escaped($0))</p>" } ?? "")
        <form method="post" action="/oauth/authorize">
        <input type="hidden" name="request_id" value="\(escaped(requestID))">
        <label>Username <input name="username" value="\(escaped(loginHint ?? ""))" autocomplete="username"></label><br>
        <label>Password <input name="password" type="password" autocomplete="current-password"></label><br>
        <button name="action" value="allow">Sign in</button> <button name="action" value="deny">Deny</button>
        </form></body></html>
        """
    }

    static func errorPage(_ message: String) -> String {
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>LoginKit dev — error</title></head><body><h1>Error</h1><p>\(escaped(message))</p></body></html>"
    }

    /// `text` safe inside HTML text and double-quoted attributes.
    static func escaped(_ text: String) -> String {
        escapingHTML(text)
    }
}
#endif
