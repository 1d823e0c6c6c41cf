#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKitHTTP
import LoginKitJOSE

/// A token exchange request (RFC 8693 §2.1): a token the caller holds (the subject's, and for
/// delegation the actor's) for one that another resource, audience or scope accepts.
///
/// The subject (or actor) token can be a workload's identity token from an ``IdentitySource``
/// (a projected service-account token file, GitHub Actions, a metadata endpoint, a program),
/// fetched when needed and cached until it nears expiry:
///
/// ```swift
/// let source = IdentitySource.file("/var/run/secrets/tokens/app")
/// let subject = try await source.token(transport: client)
/// let request = TokenExchangeRequest(subjectToken: subject, subjectTokenType: TokenExchangeRequest.jwtType)
/// let exchanged = try await api.exchangeToken(request)
/// ```
///
/// `description` (and so `String(reflecting:)`, `debugPrint` and `dump`) names the token types and
/// target, never the tokens (shown as `<redacted>`).
public struct TokenExchangeRequest: Sendable, CustomStringConvertible, CustomReflectable {
    /// The token that represents the party on whose behalf the request is made.
    public var subjectToken: String
    /// Its type URI. Default `urn:ietf:params:oauth:token-type:access_token`.
    public var subjectTokenType: String
    /// The acting party's token, for delegation.
    public var actorToken: String?
    /// Its type URI; required with an actor token. Default `…:access_token` then.
    public var actorTokenType: String?
    /// The type of token wanted (`requested_token_type`), when the caller cares.
    public var requestedTokenType: String?
    /// The resources, audience and scope the new token is for.
    public var target: TokenTarget

    /// An exchange of `subjectToken` for a token for `target`.
    public init(
        subjectToken: String, subjectTokenType: String = TokenExchangeRequest.accessTokenType, actorToken: String? = nil,
        actorTokenType: String? = nil, requestedTokenType: String? = nil, target: TokenTarget = TokenTarget()
    ) {
        self.subjectToken = subjectToken
        self.subjectTokenType = subjectTokenType
        self.actorToken = actorToken
        self.actorTokenType = actorToken != nil ? (actorTokenType ?? Self.accessTokenType) : actorTokenType
        self.requestedTokenType = requestedTokenType
        self.target = target
    }

    /// `urn:ietf:params:oauth:token-type:access_token`.
    public static let accessTokenType = "urn:ietf:params:oauth:token-type:access_token"
    /// `urn:ietf:params:oauth:token-type:refresh_token`.
    public static let refreshTokenType = "urn:ietf:params:oauth:token-type:refresh_token"
    /// `urn:ietf:params:oauth:token-type:id_token`.
    public static let idTokenType = "urn:ietf:params:oauth:token-type:id_token"
    /// `urn:ietf:params:oauth:token-type:jwt`.
    public static let jwtType = "urn:ietf:params:oauth:token-type:jwt"

    public var description: String {
        var parts = ["subject: <redacted> \(printableExcerpt(subjectTokenType, limit: 100))"]
        if actorToken != nil { parts.append("actor: <redacted> \(printableExcerpt(actorTokenType ?? "", limit: 100))") }
        if let requestedTokenType { parts.append("requested: \(printableExcerpt(requestedTokenType, limit: 100))") }
        parts.append("\(target)")
        return "TokenExchangeRequest(\(parts.joined(separator: ", ")))"
    }

    /// No children: `dump` and debuggers show the ``description``, never the tokens.
    public var customMirror: Mirror { Mirror(self, children: [:]) }

    /// The cache key: the SHA-256 of every part, the tokens by their own SHA-256 (never themselves),
    /// so that different requests never share a key.
    func cacheKey() throws -> String {
        func digest(_ token: String?) throws -> JSONValue {
            guard let token else { return .null }
            return .string(Base64URL.encode(try MessageDigest.sha256(Array(token.utf8))))
        }
        let parts: JSONValue = .array([
            try digest(subjectToken), .string(subjectTokenType), try digest(actorToken), actorTokenType.map(JSONValue.string) ?? .null,
            requestedTokenType.map(JSONValue.string) ?? .null, .string(target.cacheKey),
        ])
        return Base64URL.encode(try MessageDigest.sha256(Array(parts.serialized.utf8)))
    }
}

/// What a token exchange issued (RFC 8693 §2.2.1).
public struct ExchangedToken: Sendable, CustomStringConvertible {
    /// The token (in `accessToken`, as RFC 8693 names it even when it is another type), its
    /// expiry, scope and refresh token when the provider issued one.
    public let credentials: Credentials
    /// `issued_token_type`.
    public let issuedTokenType: String

    /// The issued token.
    public var token: String { credentials.accessToken ?? "" }

    public var description: String { "ExchangedToken(\(printableExcerpt(issuedTokenType, limit: 100)), \(credentials))" }
}

extension OAuth2API {
    /// Exchanges a token (RFC 8693): the client authenticates as for every grant.
    ///
    /// - Throws: `LoginError` `.invalidTarget` (`invalid_target`), `.subjectTokenRejected`
    ///   (`invalid_grant`), `.invalidScope`, `.invalidClient`, `.unauthorizedClient`;
    ///   `LoginError` `.invalidConfiguration` for a malformed target; `ServerError` for a response
    ///   without `access_token` or `issued_token_type`; `NetworkError`.
    public func exchangeToken(_ request: TokenExchangeRequest) async throws -> ExchangedToken {
        try request.target.validate()
        guard !request.subjectToken.isEmpty else { throw LoginError(.invalidConfiguration, "the subject token is empty") }
        var fields: [(String, String)] = [
            ("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange"),
            ("subject_token", request.subjectToken), ("subject_token_type", request.subjectTokenType),
        ]
        if let actorToken = request.actorToken {
            fields += [("actor_token", actorToken), ("actor_token_type", request.actorTokenType ?? TokenExchangeRequest.accessTokenType)]
        }
        if let requested = request.requestedTokenType { fields.append(("requested_token_type", requested)) }
        if let scope = request.target.scope { fields.append(("scope", scope)) }
        fields += request.target.formFields
        return try await Telemetry.tokenRequest(grantType: fields[0].1, issuer: configuration.issuer) {
            try await sendExchange(fields)
        }
    }

    private func sendExchange(_ fields: [(String, String)]) async throws -> ExchangedToken {
        let metadata = try await metadata()
        // A new key per exchange, as per login, when the configuration binds tokens (RFC 9449 §5).
        let proofKey = try newProofKey(metadata)
        let tokenOrigin = origin(configuration.endpoints.token, setting: "token", field: "token_endpoint")
        let clientAuthentication = try await authentication(metadata, to: metadata.tokenEndpoint, origin: tokenOrigin, setting: "token")
        let (response, json, _) = try await endpoint.postForm(
            metadata.tokenEndpoint, origin: tokenOrigin, fields: fields, authentication: clientAuthentication, proof: proofMaker(proofKey))
        let scopes = TokenEndpoint.ScopeContext(asked: fields.first { $0.0 == "scope" }?.1, advertised: metadata.scopesSupported)
        if let error = TokenEndpoint.error(for: response, json: json, grant: .tokenExchange, host: host, scopes: scopes) { throw error }
        try TokenEndpoint.requireJSON(response, host: host)
        try requireProofForDPoPToken(json, proofKey: proofKey)
        // The issued token need not be an access token or a JWT: nothing here verifies it (an ID
        // token issued this way is the caller's to verify); only the response's shape is checked.
        var (credentials, _) = try TokenEndpoint.parseCredentials(from: json, host: host, issuer: configuration.issuer, now: now(), previous: nil)
        guard credentials.accessToken != nil, let issuedType = json?["issued_token_type"]?.stringValue, !issuedType.isEmpty else {
            throw ServerError(.malformedResponse, "\(host) sent a token exchange response without access_token or issued_token_type (RFC 8693 §2.2.1)")
        }
        try requireCertificateBinding(of: credentials.accessToken)
        credentials.issuedAt = now()
        credentials.proofKey = proofKey
        return ExchangedToken(credentials: credentials, issuedTokenType: issuedType)
    }
}

/// Token exchange with a cache: one exchange per (subject, actor, requested type, target) while its
/// result stays valid beyond `margin`, shared by concurrent callers (one request for many).
///
/// The cache lives in memory, keyed by the tokens' SHA-256 (never the tokens), and holds at most
/// `capacity` results (expired ones go first, then the oldest). Results without an expiry are not
/// cached.
public final class TokenExchanger: Sendable {
    /// The API that exchanges.
    package let api: OAuth2API
    /// How long before expiry a cached result stops being served. Default 60 s (at most half its lifetime).
    package let margin: Duration
    /// The most results kept.
    package let capacity: Int
    private let clock: any AuthClock
    private struct Cache {
        var entries: [String: (token: ExchangedToken, stored: UInt64)] = [:]
        var counter: UInt64 = 0
        /// Bumped by `removeAll()`: an exchange that began before is not cached when it ends.
        var generation: UInt64 = 0
    }
    private let cache = LockedState(Cache())
    private let flights = SingleFlight<String, ExchangedToken>()

    /// An exchanger over `api`.
    public init(api: OAuth2API, clock: any AuthClock = SystemClock(), margin: Duration = .seconds(60), capacity: Int = 1024) {
        self.api = api
        self.clock = clock
        self.margin = margin
        self.capacity = max(1, capacity)
    }

    /// The exchanged token for `request`: cached, or exchanged once for all concurrent callers.
    ///
    /// - Throws: what ``OAuth2API/exchangeToken(_:)`` throws.
    public func exchange(_ request: TokenExchangeRequest) async throws -> ExchangedToken {
        try request.target.validate()
        let key = try request.cacheKey()
        if let cached = cached(key) { return cached }
        return try await flights.run(key) { [self] in
            if let cached = cached(key) { return cached }
            let generation = cache.withLock { $0.generation }
            let token = try await api.exchangeToken(request)
            if token.credentials.expiresAt != nil { remember(token, key: key, startedIn: generation) }
            return token
        }
    }

    /// Forgets every cached result (after the subject logs out, for instance); exchanges under way
    /// now are not cached when they end.
    public func removeAll() {
        cache.withLock { cache in
            cache.entries.removeAll()
            cache.generation += 1
        }
    }

    private func cached(_ key: String) -> ExchangedToken? {
        let now = clock.now
        return cache.withLock { cache in
            guard let entry = cache.entries[key] else { return nil }
            guard Self.isFresh(entry.token.credentials, now: now, margin: margin) else {
                cache.entries[key] = nil
                return nil
            }
            return entry.token
        }
    }

    private func remember(_ token: ExchangedToken, key: String, startedIn generation: UInt64) {
        let now = clock.now
        cache.withLock { cache in
            guard cache.generation == generation else { return }
            if cache.entries[key] == nil {
                cache.entries.makeRoom(capacity: capacity, isStale: { !Self.isFresh($0.token.credentials, now: now, margin: margin) }, age: \.stored)
            }
            cache.counter += 1
            cache.entries[key] = (token, cache.counter)
        }
    }

    /// Valid beyond the margin, which is at most half the token's lifetime.
    static func isFresh(_ credentials: Credentials, now: Date, margin: Duration) -> Bool {
        guard let due = credentials.replacementTime(margin: margin) else { return false }
        return now < due
    }
}
