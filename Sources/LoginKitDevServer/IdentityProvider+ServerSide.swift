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

    /// A client with a secret, registered keys, a registered TLS client certificate or federated credentials.
    func isConfidential(_ client: DevClient) -> Bool {
        client.secret != nil || !keys(of: client).isEmpty || client.authenticatesWithCertificate || !client.federatedCredentials.isEmpty
    }

    /// The audiences an assertion for this provider may name (one of them, and nothing else,
    /// draft-ietf-oauth-rfc7523bis): its token endpoint or its issuer.
    var assertionAudiences: [String] {
        let issuer = self.issuer
        return [issuer + Self.tokenPath, issuer, issuer + "/"]
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
    /// An assertion whose `iss` is the workload issuer is a federated credential of the client
    /// named by `client_id` instead (``authenticateFederatedAssertion(_:claims:clientID:)``).
    func authenticateAssertion(_ assertion: String, clientID: String?) throws(OAuthError) -> DevClient {
        func refuse(_ why: String) -> OAuthError { OAuthError(status: 401, code: "invalid_client", description: "client assertion refused: \(why)") }
        guard let jws = try? CompactJWS(parsing: assertion), let claims = try? JWTClaims(payload: jws.payload) else {
            throw refuse("not a well-formed JWT")
        }
        guard let issuer = claims.issuer else { throw refuse("no iss") }
        if issuer == workloadIssuer {
            return try authenticateFederatedAssertion(jws, claims: claims, clientID: clientID)
        }
        guard claims.subject == issuer, clientID == nil || clientID == issuer else {
            guard configuration.clients.contains(where: { $0.id == issuer }) else {
                throw refuse(
                    "the issuer \(printableExcerpt(issuer, limit: 100)) is not trusted: iss must be the client ID (and sub the same) "
                        + "or this provider's workload issuer \(workloadIssuer)")
            }
            throw refuse("iss and sub must both be the client ID")
        }
        guard let client = configuration.clients.first(where: { $0.id == issuer }) else { throw refuse("unknown client") }
        // One audience only (draft-ietf-oauth-rfc7523bis): this token endpoint or the issuer.
        guard claims.audience.count == 1, assertionAudiences.contains(claims.audience[0]) else {
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

    /// RFC 8693 §2: exchanges a live access token this provider issued, or a workload identity token
    /// of the workload issuer (type `…:jwt` or `…:id_token`, for this provider's token endpoint or
    /// issuer) — the subject's, and the actor's for delegation — for a JWT access token for the
    /// requested resources or audience, bound to `jkt` when the request carried a DPoP proof.
    func tokenExchangeGrant(client: DevClient, fields: [String: String], resources: [String], jkt: String? = nil) throws(OAuthError) -> [String: JSONValue] {
        guard isConfidential(client) else {
            throw OAuthError(status: 400, code: "unauthorized_client", description: "public clients cannot exchange tokens")
        }
        guard let subjectToken = fields["subject_token"], let subjectType = fields["subject_token_type"] else {
            throw OAuthError(status: 400, code: "invalid_request", description: "subject_token and subject_token_type are required")
        }
        let acceptedTypes = [Self.accessTokenType, Self.jwtTokenType, Self.idTokenType]
        guard acceptedTypes.contains(subjectType) else {
            throw OAuthError(status: 400, code: "invalid_request", description: "unsupported subject_token_type")
        }
        if let requested = fields["requested_token_type"], ![Self.accessTokenType, Self.jwtTokenType].contains(requested) {
            throw OAuthError(status: 400, code: "invalid_request", description: "unsupported requested_token_type")
        }
        let now = configuration.now()
        let subject = try exchangeParty(subjectToken, type: subjectType, role: "subject", now: now)
        var actor: String?
        if let actorToken = fields["actor_token"] {
            guard let actorType = fields["actor_token_type"], acceptedTypes.contains(actorType) else {
                throw OAuthError(status: 400, code: "invalid_request", description: "actor_token_type is required with actor_token")
            }
            actor = try exchangeParty(actorToken, type: actorType, role: "actor", now: now).subject
        } else if fields["actor_token_type"] != nil {
            throw OAuthError(status: 400, code: "invalid_request", description: "actor_token_type without actor_token")
        }
        var audiences = try targets(resources: resources, audience: fields["audience"])
        if audiences.isEmpty { audiences = [client.id] }
        let scope: String
        if let grantedScope = subject.scope {
            scope = fields["scope"] ?? grantedScope
            guard Set(scope.split(separator: " ")).isSubset(of: Set(grantedScope.split(separator: " "))) else {
                throw OAuthError(status: 400, code: "invalid_scope", description: "an exchange cannot widen the subject token's scope")
            }
        } else {
            // A workload identity token grants no scope of its own: the scopes offered may be asked for.
            scope = fields["scope"] ?? ""
            if let refusal = scopeRefusal(scope) { throw refusal }
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

    /// Who a subject or actor token of an exchange stands for: the subject, the scope it was granted
    /// (`nil` for a workload identity token, which carries none), and how the user authenticated.
    struct ExchangeParty {
        let subject: String
        let scope: String?
        let acr: String?
        let authTime: Date?
    }

    /// The party `token` (of `type`, the exchange's `role`) stands for: a live access token this
    /// provider issued (of type `…:access_token` or `…:jwt`), or a workload identity token of type `…:jwt` or `…:id_token` for this
    /// provider (``checkWorkloadToken(_:claims:)``, `aud` its token endpoint or issuer).
    private func exchangeParty(_ token: String, type: String, role: String, now: Date) throws(OAuthError) -> ExchangeParty {
        if type != Self.idTokenType, let record = state.withLock({ $0.accessTokens[token] }), record.expiresAt > now {
            return ExchangeParty(subject: record.subject, scope: record.scope, acr: record.acr, authTime: record.authTime)
        }
        let invalid = OAuthError(status: 400, code: "invalid_grant", description: "the \(role) token is not valid")
        guard type != Self.accessTokenType, let jws = try? CompactJWS(parsing: token), let claims = try? JWTClaims(payload: jws.payload),
            claims.issuer == workloadIssuer
        else { throw invalid }
        do throws(WorkloadTokenRefusal) {
            try checkWorkloadToken(jws, claims: claims)
            guard claims.audience.count == 1, assertionAudiences.contains(claims.audience[0]) else {
                throw WorkloadTokenRefusal("the audience must be this provider's token endpoint or its issuer, and nothing else")
            }
        } catch {
            throw OAuthError(status: 400, code: "invalid_grant", description: "the \(role) token is not valid: \(error.reason)")
        }
        guard let subject = claims.subject, !subject.isEmpty else {
            throw OAuthError(status: 400, code: "invalid_grant", description: "the \(role) token is not valid: it has no subject (sub)")
        }
        return ExchangeParty(subject: subject, scope: nil, acr: nil, authTime: nil)
    }
}
#endif
