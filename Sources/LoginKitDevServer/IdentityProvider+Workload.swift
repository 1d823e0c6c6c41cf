// Built with LoginKit's "DevServer" package trait only (Package.swift; docs/architecture.md, "Weight").
#if DevServer
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKitHTTP
import LoginKitJOSE

/// The workload issuer: a second issuer the provider serves at `<issuer>/workload`, with a key of
/// its own, that makes the short-lived identity tokens a platform gives its workloads (GitHub
/// Actions, a cloud metadata service, a Kubernetes projected service-account token). The provider
/// trusts it for federated client assertions, the JWT-bearer grant (RFC 7523 §2.1) and token
/// exchange (RFC 8693). HTTP lives in `WorkloadIssuerEndpoint`.
extension IdentityProvider {
    static let jwtBearerGrant = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    static let idTokenType = "urn:ietf:params:oauth:token-type:id_token"
    static let workloadPath = "/workload"
    /// The longest a workload identity token may live, from `iat` to `exp`, and the longest it may
    /// still live from now: one hour (a Kubernetes projected token's default lifetime).
    static let maximumWorkloadTokenLifetime: Double = 3600
    /// The client a JWT-bearer grant is issued to when the request names none and authenticates none.
    static let anonymousWorkloadClient = DevClient(id: "workload")

    /// Why a workload identity token was refused, in words for an `error_description`.
    struct WorkloadTokenRefusal: Error {
        let reason: String

        init(_ reason: String) {
            self.reason = reason
        }
    }

    /// `<issuer>/workload`.
    var workloadIssuer: String { issuer + Self.workloadPath }

    /// The claims of a workload identity token: `iss` the workload issuer, `sub`, `aud`, `iat`
    /// (`issuedAt`, else the provider's now), `exp` (`lifetime` later) and a fresh `jti`.
    func workloadTokenClaims(subject: String, audience: String, lifetime: Duration, issuedAt: Date?) -> [String: JSONValue] {
        let issued = Int((issuedAt ?? configuration.now()).timeIntervalSince1970)
        return [
            "iss": .string(workloadIssuer), "sub": .string(subject), "aud": .string(audience),
            "iat": .number("\(issued)"), "exp": .number("\(issued + lifetime.wholeSeconds)"),
            "jti": .string(Self.randomToken(bytes: 12)),
        ]
    }

    /// `claims` signed by the workload issuer's key, or with `signedWithForeignKey` by a key that
    /// has its `kid` but that it does not publish (a forgery). Signing fails only when OpenSSL does;
    /// what is returned then is no JWT, and is refused as malformed wherever it is presented.
    func mintWorkloadToken(claims: [String: JSONValue], signedWithForeignKey: Bool = false) -> String {
        let key = signedWithForeignKey ? foreignWorkloadKey : workloadSigningKey
        return (try? CompactJWS.sign(payload: Array(JSONValue.object(claims).serialized.utf8), with: key, extraHeader: ["typ": .string("JWT")]))
            ?? "unsigned-workload-token"
    }

    /// `claims` signed by the provider's own key — the main issuer's, which signs its ID and access
    /// tokens — under the workload key's `kid`: a forgery that mixes the two issuers' keys up, which
    /// every workload check refuses. Signing fails only when OpenSSL does; what is returned then is
    /// no JWT.
    func mintWorkloadTokenWithIssuerKey(claims: [String: JSONValue]) -> String {
        var header: [String: JSONValue] = ["alg": .string(signingKey.algorithm.rawValue), "typ": .string("JWT")]
        if let keyID = workloadSigningKey.keyID { header["kid"] = .string(keyID) }
        let signingInput =
            Base64URL.encode(Array(JSONValue.object(header).serialized.utf8)) + "." + Base64URL.encode(Array(JSONValue.object(claims).serialized.utf8))
        guard let signature = try? signingKey.sign(Array(signingInput.utf8)) else { return "unsigned-workload-token" }
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// The workload issuer's discovery document: its issuer, JWKS and signing algorithm.
    var workloadDiscoveryDocument: [String: JSONValue] {
        let issuer = workloadIssuer
        return [
            "issuer": .string(issuer),
            "jwks_uri": .string(issuer + "/jwks"),
            "response_types_supported": .array([.string("id_token")]),
            "subject_types_supported": .array([.string("public")]),
            "id_token_signing_alg_values_supported": .array([.string(workloadSigningKey.algorithm.rawValue)]),
            "claims_supported": .array(["iss", "sub", "aud", "iat", "exp", "jti"].map { .string($0) }),
        ]
    }

    /// The workload issuer's key set: its one public key.
    var workloadKeySet: JSONValue {
        JWKSet(keys: [workloadPublicKey]).json
    }

    /// The checks every workload identity token passes, whatever it is used for: `iss` the workload
    /// issuer, signed by its key (`alg` pinned to the key's, whatever the `kid` says), `exp` in the
    /// future, an `iat`, a whole lifetime (`exp - iat`) and a time left (`exp` from now) of an hour
    /// at most, `iat` and `nbf` not in the future (60 s of leeway), a `sub`. The audience is the
    /// caller's to check.
    func checkWorkloadToken(_ jws: CompactJWS, claims: JWTClaims) throws(WorkloadTokenRefusal) {
        let workloadIssuer = self.workloadIssuer
        guard claims.issuer == workloadIssuer else {
            let issuer = claims.issuer.map { printableExcerpt($0, limit: 100) } ?? "(none)"
            throw WorkloadTokenRefusal("the issuer \(issuer) is not trusted (only \(workloadIssuer) is)")
        }
        let algorithm = workloadSigningKey.algorithm
        guard jws.algorithmName == algorithm.rawValue, jws.hasValidSignature(key: workloadPublicKey, algorithm: algorithm) else {
            throw WorkloadTokenRefusal("the signature does not verify with the workload issuer's key")
        }
        let now = configuration.now().timeIntervalSince1970
        guard let expiry = claims.expiresAt else { throw WorkloadTokenRefusal("the token has no expiry (exp)") }
        guard expiry > now else { throw WorkloadTokenRefusal("the token has expired (exp)") }
        guard let issuedAt = claims.issuedAt else { throw WorkloadTokenRefusal("the token has no issue time (iat)") }
        // The whole lifetime, not only what is left of it: a token issued hours ago and still valid
        // is no short-lived one, whatever its remaining minutes.
        guard expiry - issuedAt <= Self.maximumWorkloadTokenLifetime else {
            throw WorkloadTokenRefusal("the token lives more than an hour from iat to exp: so long-lived a token is refused")
        }
        guard expiry - now <= Self.maximumWorkloadTokenLifetime else {
            throw WorkloadTokenRefusal("the token expires more than an hour from now (exp): so long-lived a token is refused")
        }
        if issuedAt > now + 60 { throw WorkloadTokenRefusal("the token was issued in the future (iat)") }
        if let notBefore = claims.notBefore, notBefore > now + 60 { throw WorkloadTokenRefusal("the token is not valid yet (nbf)") }
        guard claims.subject?.isEmpty == false else { throw WorkloadTokenRefusal("the token has no subject (sub)") }
    }

    /// Authenticates the client named by `clientID` with a workload identity token as its client
    /// assertion (a federated credential): the token passes ``checkWorkloadToken(_:claims:)``, its
    /// `sub` is the subject of one of the client's federated credentials of the workload issuer,
    /// and its one `aud` is that credential's audience (by default this provider's token endpoint
    /// or issuer). Refusals are `invalid_client` naming what was wrong.
    ///
    /// The `jti` is not checked against replay: the platform's token is a bearer credential that its
    /// workload presents again until it expires (after a DPoP nonce challenge, at each refresh), as
    /// Entra ID and Google treat it.
    func authenticateFederatedAssertion(_ jws: CompactJWS, claims: JWTClaims, clientID: String?) throws(OAuthError) -> DevClient {
        func refuse(_ why: String) -> OAuthError {
            OAuthError(status: 401, code: "invalid_client", description: "federated client assertion refused: \(why)")
        }
        guard let clientID else { throw refuse("send client_id: the client the workload identity is federated with") }
        guard let client = configuration.clients.first(where: { $0.id == clientID }) else { throw refuse("unknown client") }
        let workloadIssuer = self.workloadIssuer
        let trusted = client.federatedCredentials.filter { credential in
            (credential.issuer == DevFederatedCredential.workloadIssuer ? workloadIssuer : credential.issuer) == workloadIssuer
        }
        guard !trusted.isEmpty else {
            throw refuse("the client \(printableExcerpt(clientID, limit: 100)) does not trust the issuer \(workloadIssuer) (no federated credential of it)")
        }
        do throws(WorkloadTokenRefusal) {
            try checkWorkloadToken(jws, claims: claims)
        } catch {
            throw refuse(error.reason)
        }
        let matching = trusted.filter { $0.subject == claims.subject }
        guard !matching.isEmpty else {
            let subject = printableExcerpt(claims.subject ?? "", limit: 200)
            throw refuse("the subject \(subject) (sub) is not one of the client's federated credentials")
        }
        let defaultAudiences = assertionAudiences
        guard claims.audience.count == 1, let audience = claims.audience.first,
            matching.contains(where: { credential in (credential.audience.map { [$0] } ?? defaultAudiences).contains(audience) })
        else {
            throw refuse("the audience (aud) must be one value: the federated credential's, by default this provider's token endpoint or issuer")
        }
        return client
    }

    /// Whether a token request is a JWT-bearer grant that names no client and authenticates none:
    /// it is then issued to ``anonymousWorkloadClient``.
    func isAnonymousAssertionGrant(basic: (String, String)?, fields: [String: String]) -> Bool {
        fields["grant_type"] == Self.jwtBearerGrant && basic == nil
            && ["client_id", "client_secret", "client_assertion", "client_assertion_type"].allSatisfy { fields[$0] == nil }
    }

    /// The JWT-bearer grant (RFC 7523 §2.1): the `assertion` is a workload identity token
    /// (``checkWorkloadToken(_:claims:)``) whose one `aud` is this provider's token endpoint or
    /// issuer. Issues an RFC 9068 JWT access token whose `sub` is the assertion's, for `client`
    /// (authenticated, public and named, or ``anonymousWorkloadClient``), for the requested scope,
    /// resources or audience (the dev resource when none), bound to `jkt` when the request carried
    /// a DPoP proof; no refresh token: the workload presents a new assertion. A bad assertion is
    /// `invalid_grant` naming what was wrong.
    func jwtBearerGrant(client: DevClient, fields: [String: String], resources: [String], jkt: String? = nil) throws(OAuthError) -> [String: JSONValue] {
        func refuse(_ why: String) -> OAuthError {
            OAuthError(status: 400, code: "invalid_grant", description: "the assertion was refused: \(why)")
        }
        guard let assertion = fields["assertion"] else {
            throw OAuthError(status: 400, code: "invalid_request", description: "assertion is required")
        }
        guard let jws = try? CompactJWS(parsing: assertion), let claims = try? JWTClaims(payload: jws.payload) else {
            throw refuse("not a well-formed JWT")
        }
        do throws(WorkloadTokenRefusal) {
            try checkWorkloadToken(jws, claims: claims)
        } catch {
            throw refuse(error.reason)
        }
        guard claims.audience.count == 1, let audience = claims.audience.first, assertionAudiences.contains(audience) else {
            throw refuse("the audience (aud) must be this provider's token endpoint or its issuer, and nothing else")
        }
        guard let subject = claims.subject else { throw refuse("the token has no subject (sub)") }
        let scope = fields["scope"]
        if let refusal = scopeRefusal(scope) { throw refusal }
        var audiences = try targets(resources: resources, audience: fields["audience"])
        if audiences.isEmpty { audiences = [issuer + Self.resourcePath] }
        return issue(user: nil, clientID: client.id, scope: scope ?? "", family: nil, audiences: audiences, jkt: jkt, subject: subject)
    }
}
#endif
