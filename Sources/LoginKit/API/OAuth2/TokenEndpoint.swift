#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPTypes
import LoginKitHTTP
import LoginKitJOSE

/// The HTTP side shared by the APIs: sending a request, mapping statuses and OAuth error bodies
/// (RFC 6749 §5.2) to typed errors, and parsing token responses (§5.1) into `Credentials`.
struct TokenEndpoint: Sendable {
    let transport: any HTTPTransport

    /// The grant a response answers, which decides how `invalid_grant` is read.
    enum Grant {
        case password, refresh, clientCredentials, deviceCode, tokenExchange, other
        /// The JWT-bearer grant (RFC 7523 §2.1) with an assertion from `source`, asked of it once
        /// the provider's metadata is known.
        case jwtBearer(source: IdentitySource)
    }

    /// An OAuth error body: `error` and `error_description`.
    struct OAuthErrorBody {
        let error: String
        let description: String?
    }

    /// Where a URL comes from, which decides whose fault a malformed one is.
    enum URLOrigin {
        /// A setting of the caller's configuration, named as the caller writes it
        /// (`OAuth2API.Configuration.issuer`): a malformed URL is a `LoginError` `.invalidConfiguration`.
        case configuration(String)
        /// The provider's metadata, named with its host (`example.com's token_endpoint`): a
        /// malformed URL is a `ServerError` `.misconfigured`.
        case provider(String)
    }

    /// The grants whose request carries a one-time credential: a refresh token (rotated by many
    /// providers, which revoke the whole family when they see a retired one again), an
    /// authorization code, a device code.
    static let oneTimeCredentialGrants: Set<String> = [
        "refresh_token", "authorization_code", "urn:ietf:params:oauth:grant-type:device_code",
    ]

    /// POSTs `fields` as a form, with client authentication `authentication`. A grant in
    /// ``oneTimeCredentialGrants`` is sent so that the transport never resends it.
    ///
    /// With `proof`, the request carries a `DPoP` proof (RFC 9449 §5) for `POST` `url` with the
    /// nonce `url`'s origin sent last; every response's `DPoP-Nonce` is remembered. A `400`
    /// `use_dpop_nonce` that brings a nonce other than the one sent is answered once: the request is
    /// made again, with a new proof and a new client assertion (a federated one, the platform's
    /// token, is sent again as it is). What the second attempt gets is returned as it is (a second
    /// `use_dpop_nonce` is then an error like any other).
    func postForm(
        _ url: String, origin: URLOrigin, fields: [(String, String)], authentication: ClientAuthentication?,
        proof: DPoPProofMaker? = nil
    ) async throws -> (HTTPResponse, JSONValue?, Data) {
        // A URL that is no absolute http(s) URL is refused before anything is sent (`send`), with
        // the error its origin calls for: no proof is made for it.
        guard let proof, URLParts(url) != nil else {
            return try await postFormOnce(url, origin: origin, fields: fields, authentication: authentication, dpop: nil)
        }
        let sent = proof.nonces.nonce(for: url)
        let first = try await postFormOnce(
            url, origin: origin, fields: fields, authentication: authentication, dpop: proof.make(url: url, nonce: sent))
        proof.nonces.remember(first.0, for: url)
        guard first.0.status.code == 400, Self.oauthError(first.1)?.error == "use_dpop_nonce",
            let nonce = DPoPNonces.nonce(in: first.0), nonce != sent
        else { return first }
        // Made again even for a one-time credential (a refresh token, a code), still never resent by
        // the transport: this is a new request, sent because the server refused the first one
        // without using it (RFC 9449 §8), not a copy of a request whose answer was lost. The form is
        // built anew, so a client assertion of ours is never sent twice; a federated one is the
        // platform's token, valid until it expires, and goes again as it is.
        let second = try await postFormOnce(
            url, origin: origin, fields: fields, authentication: authentication, dpop: proof.make(url: url, nonce: nonce))
        proof.nonces.remember(second.0, for: url)
        return second
    }

    /// One POST of `fields` with `authentication` (a client assertion made for it) and the `DPoP`
    /// proof `dpop` when given.
    private func postFormOnce(
        _ url: String, origin: URLOrigin, fields: [(String, String)], authentication: ClientAuthentication?, dpop: String?
    ) async throws -> (HTTPResponse, JSONValue?, Data) {
        var fields = fields
        var headers: HTTPFields = [.contentType: "application/x-www-form-urlencoded", .accept: "application/json"]
        switch authentication {
        case .basic(let id, let secret)?:
            let pair = FormURLEncoding.encode([("a", id)]).dropFirst(2) + ":" + FormURLEncoding.encode([("a", secret)]).dropFirst(2)
            headers[.authorization] = "Basic " + Data(pair.utf8).base64EncodedString()
        case .post(let id, let secret)?:
            fields.append(("client_id", id))
            if let secret { fields.append(("client_secret", secret)) }
        case .none(let id)?:
            fields.append(("client_id", id))
        case .assertion(let id, let assertion)?:
            // Made here, for this request only: a retry (of the service) sends a new one, and no
            // assertion is ever sent twice (RFC 7523 §3: the server may refuse a reused `jti`).
            fields.append(("client_id", id))
            fields.append(("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"))
            fields.append(("client_assertion", try assertion.make(clientID: id)))
        case .federated(let id, let token, _)?:
            fields.append(("client_id", id))
            fields.append(("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"))
            fields.append(("client_assertion", token))
        case nil:
            break
        }
        if let dpop { headers[.dpop] = dpop }
        // A client assertion of ours is single-use too: a provider may refuse its `jti` the second
        // time (RFC 7523 §3). A federated one is the platform's bearer token, reusable until it expires.
        var oneTime = fields.contains { $0.0 == "grant_type" && Self.oneTimeCredentialGrants.contains($0.1) }
        if case .assertion? = authentication { oneTime = true }
        let answer = try await send(
            url, origin: origin, method: .post, headers: headers, body: Data(FormURLEncoding.encode(fields).utf8),
            carriesOneTimeCredential: oneTime)
        // A platform token the provider refuses as the client's credential (revoked, refused as
        // replayed, or its file rotated early) is not handed out again: the next request asks the
        // source anew instead of sending it until it nears expiry.
        if case .federated(_, let token, let source)? = authentication, !(200..<300).contains(answer.0.status.code),
            Self.oauthError(answer.1)?.error == "invalid_client"
        {
            IdentitySource.discard(token, for: source)
        }
        return answer
    }

    /// Sends a request and parses the body as JSON when it is JSON; never throws for a status.
    /// With `carriesOneTimeCredential`, through a transport that never resends it
    /// (`NeverResendingTransport`, such as `CurlHTTPClient`) when the transport is one: a provider
    /// that saw the credential twice may revoke everything issued from it.
    ///
    /// - Throws: when `url` is not an absolute http(s) URL, nothing is sent and the error depends on
    ///   `origin`: `LoginError` `.invalidConfiguration` for the caller's setting, `ServerError`
    ///   `.misconfigured` for the provider's metadata; otherwise the transport's errors.
    func send(
        _ url: String, origin: URLOrigin, method: HTTPRequest.Method, headers: HTTPFields, body: Data?,
        carriesOneTimeCredential: Bool = false
    ) async throws -> (HTTPResponse, JSONValue?, Data) {
        guard let request = HTTPRequest(method: method, url: url, headerFields: headers) else {
            switch origin {
            case .configuration(let setting):
                throw LoginError(.invalidConfiguration, "\(setting) \(Self.quoted(url: url)) is not an absolute http(s) URL")
            case .provider(let field):
                throw ServerError(.misconfigured, "\(field) \(Self.quoted(url: url)) is not an absolute http(s) URL")
            }
        }
        let received: (HTTPResponse, Data)
        if carriesOneTimeCredential, let transport = transport as? any NeverResendingTransport {
            received = try await transport.sendNeverResent(request, body: body)
        } else {
            received = try await transport.send(request, body: body)
        }
        let (response, data) = received
        return (response, try? JSONValue.parse(Array(data)), data)
    }

    /// A refused `url` as an error message may show it: quoted and cut to 200 characters, or not at
    /// all when it has an `@`, which may follow credentials (user info, which is refused anyway).
    static func quoted(url: String) -> String {
        url.contains("@") ? "(a URL with user info, which is refused; not shown)" : "\"\(printableExcerpt(url, limit: 200))\""
    }

    /// What an `invalid_scope` refusal names: the scope the request asked for (`nil`: it named
    /// none) and the scopes the provider's discovery lists (`scopes_supported`; `nil` or empty: none).
    struct ScopeContext {
        let asked: String?
        let advertised: [String]?

        /// The message of an `invalid_scope` refusal; `detail` is the provider's description, already
        /// made printable. Both scope lists are escaped and cut: the advertised one is the provider's.
        func refusal(detail: String) -> String {
            let refused =
                asked.map { "the provider refused the scope \"\(printableExcerpt($0, limit: 500))\"" } ?? "the provider refused the scope"
            let offer =
                if let advertised, !advertised.isEmpty {
                    "it advertises \"\(printableExcerpt(advertised.joined(separator: " "), limit: 500))\" (scopes_supported)"
                } else {
                    "the provider's discovery lists no scopes_supported"
                }
            return "\(refused) (invalid_scope)\(detail); \(offer)"
        }
    }

    /// The typed error for a non-2xx response, or `nil` for 2xx. An `invalid_scope` refusal names
    /// what `scopes` holds, when given.
    static func error(
        for response: HTTPResponse, json: JSONValue?, grant: Grant, host: String, scopes: ScopeContext? = nil
    ) -> (any Error)? {
        let status = response.status.code
        guard !(200..<300).contains(status) else { return nil }
        let retryAfter = response.headerFields[.retryAfter].flatMap(parseRetryAfter)
        if status == 429 {
            return ServerError(.rateLimited, "\(host) is rate-limiting requests (HTTP 429); try again later", status: status, retryAfter: retryAfter)
        }
        if status >= 500 {
            return ServerError(.unavailable, "\(host) failed (HTTP \(status)); try again later", status: status, retryAfter: retryAfter)
        }
        guard let body = oauthError(json) else {
            return ServerError(.unexpectedStatus, "\(host) answered HTTP \(status) without an OAuth error body", status: status)
        }
        let detail = body.description.map { ": \($0)" } ?? ""
        switch body.error {
        case "invalid_grant":
            switch grant {
            case .refresh: return LoginError(.refreshTokenRejected, "the refresh token was rejected\(detail); log in again", providerError: body.error)
            case .deviceCode: return LoginError(.accessDenied, "the device code was rejected\(detail)", providerError: body.error)
            case .tokenExchange:
                return LoginError(.subjectTokenRejected, "the subject or actor token was refused for the exchange\(detail)", providerError: body.error)
            case .clientCredentials:
                return LoginError(.invalidClient, "the client's credentials grant was refused\(detail)", providerError: body.error)
            case .jwtBearer(let source):
                return LoginError(
                    .invalidCredentials, "the assertion from \(source.displayName) was rejected\(detail); check the source's audience and subject with the provider",
                    providerError: body.error)
            default: return LoginError(.invalidCredentials, "the user ID or password was rejected\(detail)", providerError: body.error)
            }
        case "invalid_client":
            return LoginError(
                .invalidClient, "the client's authentication (ID and secret, or signed assertion) was rejected\(detail); check the client configuration",
                providerError: body.error)
        case "invalid_target":
            return LoginError(.invalidTarget, "the requested resource or audience was refused\(detail)", providerError: body.error)
        case "unauthorized_client":
            return LoginError(.unauthorizedClient, "this client may not use this grant\(detail)", providerError: body.error)
        case "invalid_scope":
            let message = scopes.map { $0.refusal(detail: detail) } ?? "the requested scope was refused\(detail)"
            return LoginError(.invalidScope, message, providerError: body.error)
        case "access_denied":
            return LoginError(.accessDenied, "the request was denied\(detail)", providerError: body.error)
        case "expired_token":
            return LoginError(.deviceCodeExpired, "the device code expired before it was approved; start again", providerError: body.error)
        case "temporarily_unavailable":
            return ServerError(.unavailable, "\(host) is temporarily unavailable\(detail)", status: status, providerError: body.error, retryAfter: retryAfter)
        case "server_error":
            return ServerError(.unavailable, "\(host) reported a server error\(detail)", status: status, providerError: body.error, retryAfter: retryAfter)
        case "invalid_dpop_proof":
            return ServerError(.protocolError, "\(host) refused the DPoP proof (invalid_dpop_proof)\(detail)", status: status, providerError: body.error)
        case "use_dpop_nonce":
            return ServerError(
                .protocolError, "\(host) refused the DPoP proof's nonce (use_dpop_nonce)\(detail); it sent no usable new one, or refused the retry made with it", status: status,
                providerError: body.error)
        default:
            return ServerError(.protocolError, "\(host) refused the request (\(body.error))\(detail)", status: status, providerError: body.error)
        }
    }

    /// A successful token or login response must be JSON (RFC 6749 §5.1): a `Content-Type` that
    /// says otherwise (an HTML page from a proxy, `text/plain`, a form-encoded answer) is refused,
    /// even when the body happens to parse. A missing `Content-Type` is let through to the parser.
    static func requireJSON(_ response: HTTPResponse, host: String) throws {
        guard let type = response.headerFields[.contentType] else { return }
        let media = String(type.split(separator: ";").first ?? "").filter { !$0.isWhitespace }.lowercased()
        guard media == "application/json" || media.hasSuffix("+json") || media.hasPrefix("application/x-amz-json") else {
            throw ServerError(.malformedResponse, "\(host) answered HTTP \(response.status.code) with Content-Type \(media.isEmpty ? "(empty)" : media), not JSON")
        }
    }

    static func oauthError(_ json: JSONValue?) -> OAuthErrorBody? {
        guard let error = json?["error"]?.stringValue else { return nil }
        // Both end up in messages and logs: printable and short, so that a hostile server cannot
        // forge log lines with newlines (fuzz-token-response checks it). RFC 6749 §5.2 allows only
        // printable ASCII in both anyway.
        return OAuthErrorBody(error: printable(error, limit: 64), description: json?["error_description"]?.stringValue.map { printable($0, limit: 200) })
    }

    /// `text` with everything but printable ASCII dropped, at most `limit` characters: what a
    /// provider-controlled string may bring into an error message or a log line.
    static func printable(_ text: String, limit: Int) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7F }.prefix(limit)))
    }

    /// `Retry-After` as seconds (an HTTP date is not honoured; it falls back to the default backoff).
    static func parseRetryAfter(_ value: String) -> Duration? {
        guard let seconds = Int(value.trimmingPrefix(" ")), seconds >= 0 else { return nil }
        return .seconds(min(seconds, 3600))
    }

    /// Credentials from a successful token response (RFC 6749 §5.1), verifying the ID token with
    /// `verifier` when there is one. `previous` supplies what a refresh response may omit.
    static func credentials(
        from json: JSONValue?, host: String, issuer: String?, now: Date, verifier: IDTokenVerifier?, previous: Credentials? = nil
    ) async throws -> Credentials {
        var (credentials, idToken) = try parseCredentials(from: json, host: host, issuer: issuer, now: now, previous: previous)
        if let idToken {
            let exp: Double?
            if let verifier {
                exp = try await verifier.verify(idToken).claims.expiresAt
            } else {
                exp = try JWTClaims(payload: CompactJWS(parsing: idToken).payload).expiresAt
            }
            credentials.idToken = IDToken(rawValue: idToken)
            credentials.idTokenExpiresAt = exp.map(Date.init(timeIntervalSince1970:))
        }
        if credentials.expiresAt == nil { credentials.expiresAt = credentials.idTokenExpiresAt }
        return credentials
    }

    /// The token response's fields, checked; the ID token still unverified and not yet set.
    static func parseCredentials(
        from json: JSONValue?, host: String, issuer: String?, now: Date, previous: Credentials?
    ) throws -> (credentials: Credentials, idToken: String?) {
        guard let object = json?.objectValue else {
            throw ServerError(.malformedResponse, "\(host) sent a token response that is not a JSON object")
        }
        func string(_ name: String) throws -> String? {
            guard let value = object[name], value != .null else { return nil }
            guard let text = value.stringValue, !text.isEmpty else {
                throw ServerError(.malformedResponse, "\(host) sent a token response whose \"\(name)\" is not a string")
            }
            return text
        }
        var credentials = previous ?? Credentials()
        credentials.issuer = issuer ?? credentials.issuer
        credentials.accessToken = try string("access_token")
        credentials.tokenType = try string("token_type") ?? credentials.tokenType
        credentials.scope = try string("scope") ?? credentials.scope
        if let refreshToken = try string("refresh_token") { credentials.refreshToken = refreshToken }
        guard credentials.accessToken != nil || object["id_token"] != nil else {
            throw ServerError(.malformedResponse, "\(host) sent a token response without an access token")
        }
        // expires_in: a number, or (some providers) a numeric string.
        if let value = object["expires_in"] {
            guard let seconds = value.int64Value ?? value.stringValue.flatMap({ Int64($0) }), seconds >= 0 else {
                throw ServerError(.malformedResponse, "\(host) sent a token response with an invalid \"expires_in\"")
            }
            credentials.expiresAt = now.addingTimeInterval(Double(seconds))
        } else {
            credentials.expiresAt = nil
        }
        return (credentials, try string("id_token"))
    }
}

/// How a client authenticates at the token endpoint.
enum ClientAuthentication: Sendable {
    /// `client_secret_basic`: HTTP Basic with the form-encoded ID and secret.
    case basic(id: String, secret: String)
    /// `client_secret_post`: `client_id` (and `client_secret`) in the body.
    case post(id: String, secret: String?)
    /// A public client: `client_id` in the body only.
    case none(id: String)
    /// `private_key_jwt` or `client_secret_jwt` (RFC 7523 §2.2): a signed assertion made per request.
    case assertion(id: String, ClientAssertionMaker)
    /// `private_key_jwt` with a federated assertion (RFC 7523 §2.2): the token `source` gave,
    /// fetched before the form is built and sent as it is, also when a DPoP nonce retry sends the
    /// request again; discarded from the source's cache when the provider refuses it.
    case federated(id: String, assertion: String, source: IdentitySource)
}

/// Makes the `DPoP` proofs (RFC 9449 §4) of a token request: signed by `key`, with the nonce the
/// server sent last (kept in `nonces`), issued at `now()`.
struct DPoPProofMaker: Sendable {
    let key: DPoPKey
    let nonces: DPoPNonces
    let now: @Sendable () -> Date

    /// A proof for `POST` `url` with `nonce`.
    func make(url: String, nonce: String?) throws -> String {
        try key.proof(method: "POST", url: url, nonce: nonce, accessToken: nil, now: now())
    }
}

/// Makes the JWT a client authenticates with (RFC 7523 §3, OpenID Connect Core §9): `iss` and
/// `sub` the client ID, `aud` as configured, a random `jti`, `iat` now, `exp` `lifetime` later
/// (1 s to 1 hour).
struct ClientAssertionMaker: Sendable {
    let signer: ClientAssertionSigner
    let audience: String
    let lifetime: Duration
    let now: @Sendable () -> Date

    func make(clientID: String) throws -> String {
        let issuedAt = Int64(now().timeIntervalSince1970.rounded(.down))
        let claims: [String: JSONValue] = [
            "iss": .string(clientID), "sub": .string(clientID), "aud": .string(audience),
            "jti": .string(Base64URL.encode(try SecureRandom.bytes(18))),
            "iat": .number("\(issuedAt)"), "exp": .number("\(issuedAt + min(max(1, lifetime.components.seconds), 3600))"),
        ]
        return try signer.sign(claims: claims)
    }
}
