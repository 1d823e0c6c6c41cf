// Built with LoginKit's "DevServer" package trait only (Package.swift; docs/architecture.md, "Weight").
#if DevServer
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKitHTTP
import LoginKitJOSE

/// What server-side clients use: client assertions (`private_key_jwt`, `client_secret_jwt`; RFC
/// 7523), resource indicators (RFC 8707) with RFC 9068 JWT access tokens, token exchange (RFC 8693).
extension IdentityProvider {
    static let assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    static let tokenExchangeGrant = "urn:ietf:params:oauth:grant-type:token-exchange"
    static let accessTokenType = "urn:ietf:params:oauth:token-type:access_token"
    static let jwtTokenType = "urn:ietf:params:oauth:token-type:jwt"
    /// The longest an assertion may live: a client that signs hour-long assertions is refused.
    static let maximumAssertionLifetime: Double = 600

    /// A client with a secret, registered keys or a registered TLS client certificate.
    func isConfidential(_ client: DevClient) -> Bool {
        client.secret != nil || !keys(of: client).isEmpty || client.authenticatesWithCertificate
    }

    /// The client's keys: configured and registered at run time.
    func keys(of client: DevClient) -> [JWK] {
        client.publicKeys + state.withLock { $0.registeredKeys[client.id] ?? [] }
    }

    /// Registers `keys` for client `id`; `false` for an unknown client.
    func registerKeys(_ keys: [JWK], for id: String) -> Bool {
        // A public client stays public: keys only for a confidential one, at most 16 each.
        guard let client = configuration.clients.first(where: { $0.id == id }), isConfidential(client) else { return false }
        return state.withLock { state in
            guard (state.registeredKeys[id]?.count ?? 0) + keys.count <= 16 else { return false }
            state.registeredKeys[id, default: []] += keys
            return true
        }
    }

    /// Authenticates a client by its assertion (RFC 7523 §3): `iss` = `sub` = a known client (and
    /// the `client_id` field, when sent), `aud` this token endpoint or the issuer, unexpired and
    /// short-lived, a `jti` never seen, signed HS256 with the client's secret or by one of its keys.
    func authenticateAssertion(_ assertion: String, clientID: String?) throws(OAuthError) -> DevClient {
        func refuse(_ why: String) -> OAuthError { OAuthError(status: 401, code: "invalid_client", description: "client assertion refused: \(why)") }
        guard let jws = try? CompactJWS(parsing: assertion), let claims = try? JWTClaims(payload: jws.payload) else {
            throw refuse("not a well-formed JWT")
        }
        guard let issuer = claims.issuer, claims.subject == issuer, clientID == nil || clientID == issuer else {
            throw refuse("iss and sub must both be the client ID")
        }
        guard let client = configuration.clients.first(where: { $0.id == issuer }) else { throw refuse("unknown client") }
        let providerIssuer = self.issuer
        // One audience only (draft-ietf-oauth-rfc7523bis): this token endpoint or the issuer.
        guard claims.audience.count == 1, [providerIssuer + "/oauth/token", providerIssuer, providerIssuer + "/"].contains(claims.audience[0]) else {
            throw refuse("aud must be this token endpoint or the issuer, and nothing else")
        }
        let now = configuration.now().timeIntervalSince1970
        guard let expiry = claims.expiresAt, expiry > now else { throw refuse("expired or without exp") }
        guard expiry - now <= Self.maximumAssertionLifetime else { throw refuse("exp is more than 10 minutes ahead") }
        if let issuedAt = claims.issuedAt, issuedAt > now + 60 { throw refuse("iat is in the future") }
        if let notBefore = claims.notBefore, notBefore > now + 60 { throw refuse("not valid yet (nbf)") }
        guard let jti = claims["jti"]?.stringValue, !jti.isEmpty else { throw refuse("no jti") }
        try checkSignature(of: jws, client: client, refuse: refuse)
        let replayed = state.withLock { state -> Bool in
            let date = Date(timeIntervalSince1970: now)
            state.assertionIDs = state.assertionIDs.filter { $0.value > date }
            let key = client.id + "\n" + jti
            guard state.assertionIDs[key] == nil else { return true }
            state.assertionIDs[key] = Date(timeIntervalSince1970: expiry)
            return false
        }
        guard !replayed else { throw refuse("this jti was already used (replay)") }
        return client
    }

    private func checkSignature(of jws: CompactJWS, client: DevClient, refuse: (String) -> OAuthError) throws(OAuthError) {
        if jws.algorithmName == "HS256" {
            guard let secret = client.secret, secret.utf8.count >= 32,
                let expected = try? HMACSHA256.authenticationCode(jws.signingInput, key: Array(secret.utf8)),
                HMACSHA256.constantTimeEqual(expected, jws.signature)
            else { throw refuse("the HS256 signature does not verify with the client's secret") }
            return
        }
        guard let algorithm = JWSAlgorithm(rawValue: jws.algorithmName) else { throw refuse("alg \(printableExcerpt(jws.algorithmName)) is not accepted") }
        let candidates = keys(of: client).filter { jws.keyID == nil || $0.keyID == nil || $0.keyID == jws.keyID }
        guard candidates.contains(where: { jws.hasValidSignature(key: $0, algorithm: algorithm) }) else {
            throw refuse("the signature does not verify with a key registered for the client")
        }
    }

    /// The audiences a request names (RFC 8707 `resource`s, then `audience`), each checked: an
    /// absolute URI without fragment for a resource, and listed in `resourceServers` when set.
    func targets(resources: [String], audience: String?) throws(OAuthError) -> [String] {
        for resource in resources {
            let scheme = resource.prefix { $0 != ":" }
            guard scheme.count < resource.count, scheme.first?.isLetter == true,
                scheme.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) }), !resource.contains("#"),
                !resource.contains(where: \.isWhitespace)
            else { throw OAuthError(status: 400, code: "invalid_target", description: "a resource must be an absolute URI without a fragment") }
        }
        if audience?.isEmpty == true { throw OAuthError(status: 400, code: "invalid_target", description: "the audience is empty") }
        let all = resources + (audience.map { [$0] } ?? [])
        if let known = configuration.resourceServers, let unknown = all.first(where: { !known.contains($0) }) {
            throw OAuthError(status: 400, code: "invalid_target", description: "unknown resource or audience \(printableExcerpt(unknown, limit: 100))")
        }
        return all
    }

    /// An RFC 9068 access token: `typ: at+jwt`, `iss`, `sub`, `aud`, `client_id`, `scope`, `iat`,
    /// `exp`, `jti`, `act` for a delegated exchange, `cnf.jkt` for a DPoP-bound token (RFC 9449
    /// §6.1), `cnf.x5t#S256` for a request that came with a TLS client certificate (RFC 8705 §3.1,
    /// ``requestCertificateThumbprint``), and the user's `acr` and `auth_time` when known. The
    /// caller records it.
    func jwtAccessToken(
        subject: String, clientID: String, scope: String, audiences: [String], actor: String?,
        jkt: String? = nil, acr: String? = nil, authTime: Date? = nil
    ) -> String {
        let configuration = self.configuration
        let now = Int(configuration.now().timeIntervalSince1970)
        var claims: [String: JSONValue] = [
            "iss": .string(issuer), "sub": .string(subject), "client_id": .string(clientID),
            "aud": audiences.count == 1 ? .string(audiences[0]) : .array(audiences.map { .string($0) }),
            "iat": .number("\(now)"), "exp": .number("\(now + configuration.accessTokenLifetime.wholeSeconds)"),
            "jti": .string(Self.randomToken(bytes: 12)),
        ]
        if !scope.isEmpty { claims["scope"] = .string(scope) }
        if let actor { claims["act"] = .object(["sub": .string(actor)]) }
        var confirmation: [String: JSONValue] = [:]
        if let jkt { confirmation["jkt"] = .string(jkt) }
        if let x5t = Self.requestCertificateThumbprint { confirmation["x5t#S256"] = .string(x5t) }
        if !confirmation.isEmpty { claims["cnf"] = .object(confirmation) }
        if let acr { claims["acr"] = .string(acr) }
        if let authTime { claims["auth_time"] = .number("\(Int(authTime.timeIntervalSince1970))") }
        let token =
            (try? CompactJWS.sign(payload: Array(JSONValue.object(claims).serialized.utf8), with: signingKey, extraHeader: ["typ": .string("at+jwt")]))
            ?? "at." + Self.randomToken()
        return token
    }

    /// RFC 8693 §2: exchanges a live access token this provider issued (the subject's, and the
    /// actor's for delegation) for a JWT access token for the requested resources or audience,
    /// bound to `jkt` when the request carried a DPoP proof.
    func tokenExchangeGrant(client: DevClient, fields: [String: String], resources: [String], jkt: String? = nil) throws(OAuthError) -> [String: JSONValue] {
        guard isConfidential(client) else {
            throw OAuthError(status: 400, code: "unauthorized_client", description: "public clients cannot exchange tokens")
        }
        guard let subjectToken = fields["subject_token"], let subjectType = fields["subject_token_type"] else {
            throw OAuthError(status: 400, code: "invalid_request", description: "subject_token and subject_token_type are required")
        }
        let acceptedTypes = [Self.accessTokenType, Self.jwtTokenType]
        guard acceptedTypes.contains(subjectType) else {
            throw OAuthError(status: 400, code: "invalid_request", description: "unsupported subject_token_type")
        }
        if let requested = fields["requested_token_type"], !acceptedTypes.contains(requested) {
            throw OAuthError(status: 400, code: "invalid_request", description: "unsupported requested_token_type")
        }
        let now = configuration.now()
        func live(_ token: String) -> AccessRecord? {
            state.withLock { $0.accessTokens[token] }.flatMap { $0.expiresAt > now ? $0 : nil }
        }
        guard let subject = live(subjectToken) else {
            throw OAuthError(status: 400, code: "invalid_grant", description: "the subject token is not valid")
        }
        var actor: String?
        if let actorToken = fields["actor_token"] {
            guard let actorType = fields["actor_token_type"], acceptedTypes.contains(actorType) else {
                throw OAuthError(status: 400, code: "invalid_request", description: "actor_token_type is required with actor_token")
            }
            guard let record = live(actorToken) else { throw OAuthError(status: 400, code: "invalid_grant", description: "the actor token is not valid") }
            actor = record.subject
        } else if fields["actor_token_type"] != nil {
            throw OAuthError(status: 400, code: "invalid_request", description: "actor_token_type without actor_token")
        }
        var audiences = try targets(resources: resources, audience: fields["audience"])
        if audiences.isEmpty { audiences = [client.id] }
        let scope = fields["scope"] ?? subject.scope
        guard Set(scope.split(separator: " ")).isSubset(of: Set(subject.scope.split(separator: " "))) else {
            throw OAuthError(status: 400, code: "invalid_scope", description: "an exchange cannot widen the subject token's scope")
        }
        let token = jwtAccessToken(
            subject: subject.subject, clientID: client.id, scope: scope, audiences: audiences, actor: actor,
            jkt: jkt, acr: subject.acr, authTime: subject.authTime)
        let lifetime = configuration.accessTokenLifetime.wholeSeconds
        state.withLock {
            $0.accessTokens.insert(
                AccessRecord(
                    expiresAt: now.addingTimeInterval(Double(lifetime)), subject: subject.subject, clientID: client.id, scope: scope,
                    jkt: jkt, acr: subject.acr, authTime: subject.authTime, x5t: Self.requestCertificateThumbprint),
                for: token, now: now)
        }
        var response: [String: JSONValue] = [
            "access_token": .string(token), "issued_token_type": .string(fields["requested_token_type"] ?? Self.accessTokenType),
            "token_type": .string(jkt == nil ? "Bearer" : "DPoP"), "expires_in": .number("\(lifetime)"),
        ]
        if !scope.isEmpty { response["scope"] = .string(scope) }
        return response
    }
}
#endif
