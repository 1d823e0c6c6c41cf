// Built with LoginKit's "DevServer" package trait only (Package.swift; docs/architecture.md, "Weight").
#if DevServer
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKitHTTP
import LoginKitJOSE

/// The dev identity provider's logic and state: grants, tokens, refresh-token rotation with reuse
/// detection, device codes, revocation. HTTP lives in `IdentityProviderRoutes`.
final class IdentityProvider: Sendable {
    /// An OAuth error response (RFC 6749 §5.2), with the `DPoP-Nonce` to send when it asks for one.
    struct OAuthError: Error {
        let status: Int
        let code: String
        let description: String
        var dpopNonce: String? = nil
    }

    /// A refresh token issued: for whom, which scope, its family (for reuse detection), the DPoP key
    /// thumbprint it is bound to, and the authentication its tokens carry on (`acr`, `auth_time`).
    struct RefreshRecord {
        let username: String?
        let clientID: String
        let scope: String
        let family: String
        let expiresAt: Date
        var retired = false
        var jkt: String? = nil
        var acr: String? = nil
        var authTime: Date? = nil
    }

    /// An access token issued: until when, for whom (a user's subject or a client's ID), which scope,
    /// the DPoP key thumbprint it is bound to (`cnf.jkt`), how and when the user authenticated, and
    /// the TLS client certificate it is bound to (`cnf.x5t#S256`, RFC 8705 §3).
    struct AccessRecord: DevExpiring {
        var expiresAt: Date
        let subject: String
        let clientID: String
        let scope: String
        var jkt: String? = nil
        var acr: String? = nil
        var authTime: Date? = nil
        var x5t: String? = nil
    }

    /// A DPoP proof's `jti` seen, remembered until its `iat` leaves the accepted window.
    struct ProofUse: DevExpiring {
        let expiresAt: Date
    }

    struct DeviceRecord {
        let deviceCode: String
        let userCode: String
        let clientID: String
        let scope: String
        let expiresAt: Date
        var interval: Int
        var lastPoll: Date?
        var approvedUser: String?
        var approvedAt: Date?
        var denied = false
    }

    struct State {
        var issuer = ""
        var refreshTokens: [String: RefreshRecord] = [:]
        var revokedFamilies: Set<String> = []
        var accessTokens = ExpiringRecords<AccessRecord>()
        /// The DPoP nonce proofs must carry where the configuration requires one (RFC 9449 §8, §9).
        var dpopNonce = IdentityProvider.randomToken(bytes: 16)
        /// DPoP proofs' `jti`s already accepted (RFC 9449 §11.1), while their `iat` is in the window.
        var proofIDs = ExpiringRecords<ProofUse>()
        /// Client assertions' `jti`s already used (RFC 7523 §3), until their `exp`.
        var assertionIDs: [String: Date] = [:]
        /// Keys registered at run time for `private_key_jwt`, per client.
        var registeredKeys: [String: [JWK]] = [:]
        var deviceCodes: [String: DeviceRecord] = [:]
        var userCodes: [String: String] = [:]
        var configuration: IdentityProviderConfiguration
        var forgery: DevFault.IDTokenForgery?
    }

    let state: LockedState<State>
    let signingKey: SigningKey
    /// The workload issuer's key (`<issuer>/workload`, `IdentityProvider+Workload`): ES256, distinct
    /// from `signingKey`, published at `<issuer>/workload/jwks`.
    let workloadSigningKey: SigningKey
    /// The public half of `workloadSigningKey`, which verifies workload identity tokens.
    let workloadPublicKey: JWK
    /// A key with the workload key's `kid` that the workload issuer does not publish: what a token
    /// signed with it says is a forgery.
    let foreignWorkloadKey: SigningKey
    /// The bearer token the GitHub-style token endpoint takes (`ACTIONS_ID_TOKEN_REQUEST_TOKEN`).
    let gitHubRequestToken: String
    /// Pending sign-in forms, pushed requests and issued authorization codes
    /// (`IdentityProvider+AuthorizationCode`, `IdentityProvider+PAR`).
    let authorizationCodes = AuthorizationCodes()
    /// Where the DPoP, PAR and resource counters go.
    let monitor: DevServerMonitor
    /// The RFC 9449 §4.3 checks of every DPoP proof (`IdentityProvider+DPoP`).
    let dpopVerifier = DPoPProofVerifier(allowedAlgorithms: Set(IdentityProvider.dpopAlgorithms), window: IdentityProvider.dpopProofWindow)

    init(configuration: IdentityProviderConfiguration, monitor: DevServerMonitor) throws {
        state = LockedState(State(configuration: configuration))
        signingKey = try SigningKey.generate(.rs256, keyID: "dev-" + Self.randomToken(bytes: 6))
        let workloadKeyID = "workload-" + Self.randomToken(bytes: 6)
        let workloadKey = try SigningKey.generate(.es256, keyID: workloadKeyID)
        workloadSigningKey = workloadKey
        workloadPublicKey = try workloadKey.publicJWK()
        foreignWorkloadKey = try SigningKey.generate(.es256, keyID: workloadKeyID)
        gitHubRequestToken = Self.randomToken()
        self.monitor = monitor
    }

    var configuration: IdentityProviderConfiguration {
        get { state.withLock { $0.configuration } }
        set { state.withLock { $0.configuration = newValue } }
    }

    var issuer: String {
        get { state.withLock { $0.issuer } }
        set { state.withLock { $0.issuer = newValue } }
    }

    static func randomToken(bytes: Int = 24) -> String {
        Base64URL.encode((try? SecureRandom.bytes(bytes)) ?? (0..<bytes).map { _ in UInt8.random(in: 0...255) })
    }

    // MARK: Clients and users

    /// Authenticates the client from Basic credentials or form fields (never both), or, for a
    /// client registered for mutual TLS, from the TLS client `certificate` its request came with.
    /// Every endpoint that authenticates clients (token, PAR, device authorization, revocation)
    /// comes here: a client assertion is a classic one (RFC 7523 §3) or, from the workload
    /// issuer, a federated credential of the client named by `client_id`.
    func authenticateClient(
        basic: (String, String)?, fields: [String: String], certificate: PresentedCertificate? = nil
    ) throws(OAuthError) -> DevClient {
        let configuration = self.configuration
        let methods = [basic != nil, fields["client_secret"] != nil, fields["client_assertion"] != nil].filter { $0 }.count
        if methods > 1 {
            throw OAuthError(status: 400, code: "invalid_request", description: "use one client authentication method")
        }
        if let assertion = fields["client_assertion"] {
            guard fields["client_assertion_type"] == Self.assertionType else {
                throw OAuthError(status: 400, code: "invalid_request", description: "client_assertion_type must be \(Self.assertionType)")
            }
            return try authenticateAssertion(assertion, clientID: fields["client_id"])
        }
        let clientID = basic?.0 ?? fields["client_id"]
        guard let clientID, let client = configuration.clients.first(where: { $0.id == clientID }) else {
            throw OAuthError(status: 401, code: "invalid_client", description: "unknown client")
        }
        if client.authenticatesWithCertificate {
            guard methods == 0 else {
                throw OAuthError(
                    status: 401, code: "invalid_client", description: "this client authenticates with its TLS client certificate (RFC 8705), not a secret")
            }
            try authenticateCertificate(of: client, certificate: certificate)
            return client
        }
        if client.secret == nil, !keys(of: client).isEmpty {
            throw OAuthError(status: 401, code: "invalid_client", description: "this client authenticates with private_key_jwt")
        }
        if client.secret == nil, !client.federatedCredentials.isEmpty {
            throw OAuthError(
                status: 401, code: "invalid_client",
                description: "this client authenticates with a federated credential: a client assertion issued by the workload issuer")
        }
        if let secret = client.secret {
            let presented = basic?.1 ?? fields["client_secret"]
            guard presented == secret else { throw OAuthError(status: 401, code: "invalid_client", description: "client authentication failed") }
        }
        return client
    }

    func user(named username: String, password: String) -> DevUser? {
        configuration.users.first { $0.username == username && $0.password == password }
    }

    // MARK: Grants

    /// The refusal (`invalid_scope`) of a `scope` naming one the configuration's `supportedScopes`
    /// does not list; `nil` when it may be granted.
    func scopeRefusal(_ scope: String?) -> OAuthError? {
        guard let scope, let supported = configuration.supportedScopes else { return nil }
        let unsupported = scope.split(separator: " ").map(String.init).filter { !supported.contains($0) }
        guard !unsupported.isEmpty else { return nil }
        return OAuthError(status: 400, code: "invalid_scope", description: "not offered: \(unsupported.joined(separator: " "))")
    }

    /// The resource owner password grant; tokens bound to `jkt` when the request carried a DPoP proof.
    func passwordGrant(client: DevClient, username: String?, password: String?, scope: String?, jkt: String? = nil) throws(OAuthError) -> [String: JSONValue] {
        guard let username, let password else {
            throw OAuthError(status: 400, code: "invalid_request", description: "username and password are required")
        }
        if let refusal = scopeRefusal(scope) { throw refusal }
        guard let user = user(named: username, password: password) else {
            throw OAuthError(status: 400, code: "invalid_grant", description: "the username or password is wrong")
        }
        return issue(
            user: user, clientID: client.id, scope: scope ?? "openid profile", family: Self.randomToken(bytes: 9),
            jkt: jkt, acr: Self.passwordACR, authTime: configuration.now())
    }

    /// The client credentials grant (confidential clients); the token bound to `jkt` when the request
    /// carried a DPoP proof.
    func clientCredentialsGrant(
        client: DevClient, scope: String?, resources: [String] = [], audience: String? = nil, jkt: String? = nil
    ) throws(OAuthError) -> [String: JSONValue] {
        guard isConfidential(client) else {
            throw OAuthError(status: 400, code: "unauthorized_client", description: "public clients cannot use client_credentials")
        }
        if let refusal = scopeRefusal(scope) { throw refusal }
        return issue(
            user: nil, clientID: client.id, scope: scope ?? "", family: nil, audiences: try targets(resources: resources, audience: audience),
            jkt: jkt)
    }

    /// The refresh grant, with rotation and reuse detection. A refresh token bound to a DPoP key is
    /// refreshed only with a proof by that key (`jkt`), and a refusal for that revokes nothing: a
    /// stolen bound token is useless, and must not let its holder end the owner's session. The new
    /// tokens are bound to `jkt` when there is one.
    func refreshGrant(client: DevClient, refreshToken: String?, scope: String?, jkt: String? = nil) throws(OAuthError) -> [String: JSONValue] {
        guard let refreshToken else { throw OAuthError(status: 400, code: "invalid_request", description: "refresh_token is required") }
        let now = configuration.now()
        let outcome = state.withLock { state -> Result<(RefreshRecord, DevUser?), OAuthError> in
            guard var record = state.refreshTokens[refreshToken], record.clientID == client.id else {
                return .failure(OAuthError(status: 400, code: "invalid_grant", description: "unknown refresh token"))
            }
            if state.revokedFamilies.contains(record.family) || record.expiresAt <= now {
                return .failure(OAuthError(status: 400, code: "invalid_grant", description: "the refresh token is no longer valid"))
            }
            if let bound = record.jkt, bound != jkt {
                let description = jkt == nil ? "DPoP key mismatch: this refresh token is DPoP-bound; send a proof by its key" : "DPoP key mismatch"
                return .failure(OAuthError(status: 400, code: "invalid_grant", description: description))
            }
            if record.retired {
                if state.configuration.revokesFamilyOnReuse { state.revokedFamilies.insert(record.family) }
                return .failure(OAuthError(status: 400, code: "invalid_grant", description: "the refresh token was already used"))
            }
            if state.configuration.rotatesRefreshTokens {
                record.retired = true
                state.refreshTokens[refreshToken] = record
            }
            let user = record.username.flatMap { name in state.configuration.users.first { $0.username == name } }
            return .success((record, user))
        }
        let (record, user) = try outcome.get()
        if let scope, !Set(scope.split(separator: " ")).isSubset(of: Set(record.scope.split(separator: " "))) {
            throw OAuthError(status: 400, code: "invalid_scope", description: "a refresh cannot widen the scope")
        }
        var response = issue(
            user: user, clientID: client.id, scope: scope ?? record.scope, family: record.family, newRefreshToken: configuration.rotatesRefreshTokens,
            jkt: jkt, acr: record.acr, authTime: record.authTime)
        if !configuration.rotatesRefreshTokens { response["refresh_token"] = nil }
        return response
    }

    func deviceAuthorization(client: DevClient, scope: String?) throws(OAuthError) -> [String: JSONValue] {
        if let refusal = scopeRefusal(scope) { throw refusal }
        let configuration = self.configuration
        let deviceCode = Self.randomToken()
        let alphabet = Array("BCDFGHJKLMNPQRSTVWXZ")
        let letters = (0..<8).map { _ in alphabet[Int.random(in: 0..<alphabet.count)] }
        let userCode = String(letters[0..<4]) + "-" + String(letters[4..<8])
        let record = DeviceRecord(
            deviceCode: deviceCode, userCode: userCode, clientID: client.id, scope: scope ?? "openid profile",
            expiresAt: configuration.now().addingTimeInterval(Double(configuration.deviceCodeLifetime.wholeSeconds)),
            interval: configuration.deviceInterval.wholeSeconds
        )
        let issuer = state.withLock { state in
            state.deviceCodes[deviceCode] = record
            state.userCodes[userCode] = deviceCode
            return state.issuer
        }
        return [
            "device_code": .string(deviceCode), "user_code": .string(userCode),
            "verification_uri": .string(configuration.deviceVerificationURI ?? issuer + "/device"),
            "verification_uri_complete": .string((configuration.deviceVerificationURI ?? issuer + "/device") + "?user_code=" + userCode),
            "expires_in": .number("\(configuration.deviceCodeLifetime.wholeSeconds)"),
            "interval": .number("\(record.interval)"),
        ]
    }

    /// Approves (or denies) a pending user code on behalf of `username`.
    func decideDevice(userCode: String, username: String?, approve: Bool) -> Bool {
        state.withLock { state in
            guard let deviceCode = state.userCodes[userCode.uppercased()], var record = state.deviceCodes[deviceCode] else { return false }
            if approve {
                guard let username, state.configuration.users.contains(where: { $0.username == username }) else { return false }
                record.approvedUser = username
                record.approvedAt = state.configuration.now()
            } else {
                record.denied = true
            }
            state.deviceCodes[deviceCode] = record
            return true
        }
    }

    /// The device code grant's poll; the tokens bound to `jkt` when the poll carried a DPoP proof.
    func deviceCodeGrant(client: DevClient, deviceCode: String?, jkt: String? = nil) throws(OAuthError) -> [String: JSONValue] {
        guard let deviceCode else { throw OAuthError(status: 400, code: "invalid_request", description: "device_code is required") }
        let now = configuration.now()
        let outcome = state.withLock { state -> Result<(DevUser?, String, Date?), OAuthError> in
            guard var record = state.deviceCodes[deviceCode], record.clientID == client.id else {
                return .failure(OAuthError(status: 400, code: "invalid_grant", description: "unknown device code"))
            }
            if record.expiresAt <= now {
                return .failure(OAuthError(status: 400, code: "expired_token", description: "the device code expired"))
            }
            if record.denied {
                state.deviceCodes[deviceCode] = nil
                return .failure(OAuthError(status: 400, code: "access_denied", description: "the user denied the request"))
            }
            if let username = record.approvedUser {
                state.deviceCodes[deviceCode] = nil
                state.userCodes[record.userCode] = nil
                return .success((state.configuration.users.first { $0.username == username }, record.scope, record.approvedAt))
            }
            defer { state.deviceCodes[deviceCode] = record }
            if let lastPoll = record.lastPoll, now.timeIntervalSince(lastPoll) < Double(record.interval) {
                record.interval += 5
                record.lastPoll = now
                return .failure(OAuthError(status: 400, code: "slow_down", description: "polling too fast"))
            }
            record.lastPoll = now
            return .failure(OAuthError(status: 400, code: "authorization_pending", description: "waiting for the user"))
        }
        let (user, scope, approvedAt) = try outcome.get()
        guard let user else { throw OAuthError(status: 400, code: "invalid_grant", description: "the user no longer exists") }
        return issue(
            user: user, clientID: client.id, scope: scope, family: Self.randomToken(bytes: 9), jkt: jkt, acr: Self.passwordACR,
            authTime: approvedAt ?? now)
    }

    func revoke(token: String) {
        state.withLock { state in
            if let record = state.refreshTokens[token] { state.revokedFamilies.insert(record.family) }
            state.accessTokens[token] = nil
        }
    }

    /// The JSON login API: `{"id_token": …}` for a valid id and password.
    func jsonLogin(username: String, password: String, clientID: String) throws(OAuthError) -> [String: JSONValue] {
        guard let user = user(named: username, password: password) else {
            throw OAuthError(status: 401, code: "invalid_credentials", description: "the id or password is wrong")
        }
        var response = issue(user: user, clientID: clientID, scope: "openid profile", family: Self.randomToken(bytes: 9))
        response["access_token"] = nil
        response["token_type"] = nil
        return response
    }

    // MARK: Issuing

    /// Issues an access token (and a refresh token for a user when `family` is given, and an ID
    /// token when the scope has `openid`). With `jkt` the tokens are DPoP-bound: token type `DPoP`,
    /// the access token an RFC 9068 JWT with `cnf.jkt`, and the refresh token refreshable only with
    /// a proof by that key. A request that came with a TLS client certificate
    /// (``requestCertificateThumbprint``) gets an RFC 9068 JWT bound to it (`cnf.x5t#S256`, token
    /// type `Bearer` unless DPoP-bound). `acr` and `authTime` say how and when the user authenticated.
    /// The tokens' subject is the user's, else `subject` (a workload's), else the client's ID.
    func issue(
        user: DevUser?, clientID: String, scope: String, family: String?, newRefreshToken: Bool = true, nonce: String? = nil, audiences: [String] = [],
        jkt: String? = nil, acr: String? = nil, authTime: Date? = nil, subject: String? = nil
    ) -> [String: JSONValue] {
        let configuration = self.configuration
        let subject = user?.subject ?? subject ?? clientID
        let now = configuration.now()
        let x5t = Self.requestCertificateThumbprint
        // Asked for a resource or audience, or bound: an RFC 9068 JWT access token naming the
        // audience (the dev resource when none was asked for) and, when bound, the key or certificate.
        let accessToken =
            audiences.isEmpty && jkt == nil && x5t == nil
            ? "at." + Self.randomToken()
            : jwtAccessToken(
                subject: subject, clientID: clientID, scope: scope,
                audiences: audiences.isEmpty ? [self.issuer + Self.resourcePath] : audiences, actor: nil, jkt: jkt, acr: acr, authTime: authTime)
        var response: [String: JSONValue] = [
            "access_token": .string(accessToken),
            "token_type": .string(jkt == nil ? "Bearer" : "DPoP"),
            "expires_in": .number("\(configuration.accessTokenLifetime.wholeSeconds)"),
            "scope": .string(scope),
        ]
        let scopes = Set(scope.split(separator: " "))
        var refreshToken: String?
        if family != nil, newRefreshToken, user != nil {
            let token = "rt." + Self.randomToken()
            refreshToken = token
            response["refresh_token"] = .string(token)
        }
        let issuer = state.withLock { state in
            state.accessTokens.insert(
                AccessRecord(
                    expiresAt: now.addingTimeInterval(Double(configuration.accessTokenLifetime.wholeSeconds)),
                    subject: subject, clientID: clientID, scope: scope, jkt: jkt, acr: acr, authTime: authTime,
                    x5t: x5t),
                for: accessToken, now: now)
            if let refreshToken, let family {
                state.refreshTokens[refreshToken] = RefreshRecord(
                    username: user?.username, clientID: clientID, scope: scope, family: family,
                    expiresAt: now.addingTimeInterval(Double(configuration.refreshTokenLifetime.wholeSeconds)),
                    jkt: jkt, acr: acr, authTime: authTime
                )
            }
            return state.issuer
        }
        if let user, scopes.contains("openid") {
            let seconds = Int(now.timeIntervalSince1970)
            var claims: [String: JSONValue] = [
                "iss": .string(issuer), "sub": .string(user.subject), "aud": .string(clientID),
                "iat": .number("\(seconds)"), "auth_time": .number("\(Int((authTime ?? now).timeIntervalSince1970))"),
                "exp": .number("\(seconds + configuration.idTokenLifetime.wholeSeconds)"),
            ]
            if let acr { claims["acr"] = .string(acr) }
            if configuration.idTokenCarriesProfileClaims {
                claims["preferred_username"] = .string(user.username)
                if let nickname = user.nickname { claims["nickname"] = .string(nickname) }
                if let birthdate = user.birthdate { claims["birthdate"] = .string(birthdate) }
                if let email = user.email { claims["email"] = .string(email) }
            }
            if let nonce { claims["nonce"] = .string(nonce) }
            let forgery = state.withLock { state in
                defer { state.forgery = nil }
                return state.forgery
            }
            if let idToken = signIDToken(claims, forgery: forgery) { response["id_token"] = .string(idToken) }
        }
        return response
    }

    /// The next ID token issued gets `forgery` (a fault for tests of verification).
    func forgeNextIDToken(_ forgery: DevFault.IDTokenForgery) {
        state.withLock { $0.forgery = forgery }
    }

    /// `claims` signed with the provider's key, or forged as `forgery` says.
    private func signIDToken(_ claims: [String: JSONValue], forgery: DevFault.IDTokenForgery?) -> String? {
        var claims = claims
        let header: [String: JSONValue] = ["typ": .string("JWT")]
        let now = Int(configuration.now().timeIntervalSince1970)
        switch forgery {
        case nil:
            break
        case .expired:
            claims["iat"] = .number("\(now - 7200)")
            claims["exp"] = .number("\(now - 3600)")
        case .wrongIssuer:
            claims["iss"] = .string("https://impostor.example")
        case .wrongAudience:
            claims["aud"] = .string("another-client")
        case .unknownKey:
            // An EC key: made in milliseconds, where RSA key generation could outlast a short client timeout.
            guard let stranger = try? SigningKey.generate(.es256, keyID: "dev-unknown-" + Self.randomToken(bytes: 4)) else { return nil }
            return try? CompactJWS.sign(payload: Array(JSONValue.object(claims).serialized.utf8), with: stranger, extraHeader: header)
        case .algNone:
            let head = Base64URL.encode(Array(JSONValue.object(["alg": .string("none"), "typ": .string("JWT")]).serialized.utf8))
            return head + "." + Base64URL.encode(Array(JSONValue.object(claims).serialized.utf8)) + "."
        }
        return try? CompactJWS.sign(payload: Array(JSONValue.object(claims).serialized.utf8), with: signingKey, extraHeader: header)
    }

    var discoveryDocument: [String: JSONValue] {
        let issuer = self.issuer
        let configuration = self.configuration
        let scopes = configuration.supportedScopes ?? ["openid", "profile", "offline_access"]
        var document: [String: JSONValue] = [
            "issuer": .string(issuer),
            "token_endpoint": .string(issuer + "/oauth/token"),
            "jwks_uri": .string(issuer + "/.well-known/jwks.json"),
            "device_authorization_endpoint": .string(issuer + "/oauth/device_authorization"),
            "revocation_endpoint": .string(issuer + "/oauth/revoke"),
            "authorization_endpoint": .string(issuer + "/oauth/authorize"),
            "userinfo_endpoint": .string(issuer + Self.userinfoPath),
            "code_challenge_methods_supported": .array([.string("S256")]),
            "authorization_response_iss_parameter_supported": .bool(true),
            "response_types_supported": .array([.string("code")]),
            "subject_types_supported": .array([.string("public")]),
            "id_token_signing_alg_values_supported": .array([.string("RS256")]),
            "grant_types_supported": .array([
                "authorization_code", "password", "refresh_token", "client_credentials", "urn:ietf:params:oauth:grant-type:device_code",
                Self.tokenExchangeGrant, Self.jwtBearerGrant,
            ].map { .string($0) }),
            "token_endpoint_auth_methods_supported": .array(
                ["client_secret_basic", "client_secret_post", "private_key_jwt", "client_secret_jwt", "none"].map { .string($0) }),
            "token_endpoint_auth_signing_alg_values_supported": .array(
                (JWSAlgorithm.allCases.map(\.rawValue) + ["HS256"]).map { .string($0) }),
            "scopes_supported": .array(scopes.map { .string($0) }),
            "acr_values_supported": .array(Self.supportedACRValues.map { .string($0) }),
        ]
        if configuration.dpop != .disabled {
            document["dpop_signing_alg_values_supported"] = .array(Self.dpopAlgorithms.map { .string($0.rawValue) })
        }
        if configuration.par != .absent {
            document["pushed_authorization_request_endpoint"] = .string(issuer + Self.parPath)
            document["require_pushed_authorization_requests"] = .bool(configuration.par == .required)
        }
        addMutualTLSMetadata(to: &document)
        return document
    }

    var keySet: JSONValue {
        (try? JWKSet(keys: [signingKey.publicJWK()]).json) ?? .object(["keys": .array([])])
    }
}
#endif
