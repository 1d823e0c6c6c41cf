#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif
public import LoginKitHTTP
import LoginKitJOSE

/// OAuth 2.0 / OpenID Connect: discovery, the `password`, `refresh_token`, `client_credentials`,
/// JWT-bearer (RFC 7523 §2.1) and device-code grants, token exchange (RFC 8693), resource indicators
/// (RFC 8707), revocation (RFC 7009); the client authenticates with `client_secret_basic`,
/// `client_secret_post`, `private_key_jwt` or `client_secret_jwt` (RFC 7523), chosen explicitly or
/// from discovery, with its platform's identity token (``Configuration/clientAssertionSource``), or
/// with a TLS client certificate (RFC 8705 `tls_client_auth`, `self_signed_tls_client_auth`, chosen
/// explicitly: ``Configuration/clientAuthenticationMethod``).
/// Tokens can be bound to a key (DPoP, RFC 9449: ``Configuration/dpopAlgorithm``), and browser
/// sign-ins pushed to the provider first (PAR, RFC 9126: ``Configuration/pushesAuthorizationRequests``).
///
/// The provider's metadata comes from `<issuer>/.well-known/openid-configuration`, fetched once and
/// checked (its `issuer` must equal the configured one, OIDC Discovery §4.3). ID tokens are verified
/// against the provider's `jwks_uri` before they are returned. A token response without an ID token
/// is valid (the ID token is then unavailable, the access token usable).
///
/// Concurrency contract: `Sendable`; share one instance. Discovery is fetched once, however many
/// callers ask at the same time.
public final class OAuth2API: DeviceAuthorizationAPI, ClientCredentialsAPI, PrefersTaskExecutor {
    /// Issuer, client and what to ask for.
    public struct Configuration: Sendable {
        /// The issuer URL; discovery is fetched from it.
        public var issuer: String
        /// The client ID.
        public var clientID: String
        /// The client secret, for confidential clients. Never stored in a profile.
        public var clientSecret: String?
        /// The client and issuer ``clientSecret`` was given for, when it came from outside this
        /// configuration (the CLI's `LOGINKIT_CLIENT_SECRET`): a configuration for another client or
        /// issuer sends no secret. Default `nil`: the secret is this configuration's own.
        package var clientSecretOwner: ClientSecretOwner?
        /// How the client authenticates at the token, revocation and device endpoints. Default
        /// `.automatic`: `private_key_jwt` with a ``clientAssertionKey`` or a
        /// ``clientAssertionSource``; with a secret, the first of
        /// `client_secret_basic`, `client_secret_post`, `client_secret_jwt` that discovery's
        /// `token_endpoint_auth_methods_supported` lists (`client_secret_basic` when it lists none).
        public var clientAuthenticationMethod: ClientAuthenticationMethod = .automatic
        /// The private key `private_key_jwt` signs client assertions with (RS256, PS256, ES256, …;
        /// load it with `SigningKey(pem:)` or `SigningKey(jwk:)`).
        public var clientAssertionKey: SigningKey?
        /// The `aud` of client assertions. Default `.tokenEndpoint` (OpenID Connect Core §9).
        public var clientAssertionAudience: ClientAssertionAudience = .tokenEndpoint
        /// How long a client assertion is valid. Default 60 s; each request gets a new one.
        public var clientAssertionLifetime: Duration = .seconds(60)
        /// Where the identity token comes from that the client authenticates with instead of a
        /// secret or a key: the token its platform gives it (GitHub Actions, a Kubernetes projected
        /// service-account token, a cloud metadata endpoint, a helper program), which the provider
        /// trusts for this client (workload identity federation in Entra ID and Google Cloud).
        /// Every request to the token, revocation, device authorization and pushed authorization
        /// endpoints sends it as the client assertion (`private_key_jwt`, chosen by `.automatic`),
        /// asked of the source before each request: a token that is about to expire, or a file the
        /// platform rewrote, is read again, without a restart, and a token the provider refuses
        /// (`invalid_client`) is asked for anew at the next request. The token is a bearer
        /// credential at the provider: it goes only to endpoints on the issuer's origin (scheme,
        /// host and port) or set in ``endpoints``; a discovered endpoint elsewhere is a
        /// `ServerError` `.misconfigured`, the source not asked. Not together with
        /// ``clientAssertionKey`` (`LoginError` `.invalidConfiguration`). Default `nil`.
        public var clientAssertionSource: IdentitySource?
        /// Where the identity token comes from that the client trades for its tokens with the
        /// JWT-bearer grant (RFC 7523 §2.1): when set, ``OAuth2API/clientCredentials(for:)`` (and
        /// so `AuthService.logInAsClient`, `ClientCredentialsTokens` and `ClientTokenRefresher`)
        /// sends the source's token as `assertion` in place of the client credentials grant, asking
        /// the source again for each new token (there is no refresh token), with the client
        /// authentication configured (none for a public client). The source is asked once the
        /// provider's metadata is known, and its token goes only to a token endpoint on the
        /// issuer's origin or set in ``endpoints`` (else `ServerError` `.misconfigured`). A rejected
        /// assertion is a `LoginError` `.invalidCredentials` that names the source, and is asked
        /// for anew at the next request. Default `nil`.
        public var assertionGrantSource: IdentitySource?
        /// The environment identity sources read (`.environment`, `.gitHubActions`). Default `nil`:
        /// this process's.
        package var environment: [String: String]?
        /// The scope asked for when a request names none (password, device and browser logins;
        /// client credentials without a target scope); `""` asks for none. Default `nil`: `openid`,
        /// plus `profile`, `email` and `offline_access` where the provider's discovery lists them in
        /// `scopes_supported` (all three when it lists none), chosen at the first request.
        public var scope: String?
        /// Whether ID tokens are verified against the provider's keys. Default `true`; turn off only
        /// for a provider that publishes no keys.
        public var verifiesIDTokens = true
        /// Signature algorithms accepted for ID tokens.
        public var allowedAlgorithms: Set<JWSAlgorithm> = JWSAlgorithm.standard
        /// Clock skew allowed when checking ID tokens. Default 60 s.
        public var leeway: Duration = .seconds(60)
        /// Endpoints given explicitly; each one set wins over discovery. Default: none.
        public var endpoints = Endpoints()
        /// Whether the discovery document is fetched. Default `true`; `false` for providers that
        /// publish none (GitHub), which then need at least `endpoints.token`.
        public var usesDiscovery = true
        /// The algorithm of the key tokens are bound to (DPoP, RFC 9449): `.es256`, `.es384`,
        /// `.edDSA`, `.rs256` or `.ps256`. Each login (password, browser, device, client
        /// credentials, token exchange) makes a new key with it, proves possession of it at the
        /// token endpoint, and keeps it with the credentials: their refreshes, and the requests
        /// made with them, carry proofs signed by it, whatever this setting says later. A provider
        /// whose discovery lists `dpop_signing_alg_values_supported` without it is refused
        /// (`LoginError` `.invalidConfiguration`). Default `nil`: bearer tokens, no key.
        public var dpopAlgorithm: JWSAlgorithm?
        /// Whether browser sign-ins push their parameters to the provider first (PAR, RFC 9126),
        /// so that the browser gets only the client ID and a `request_uri`. Default `nil`: when
        /// the provider's discovery advertises `pushed_authorization_request_endpoint` (and
        /// always when it sets `require_pushed_authorization_requests`). `true`: always, and a
        /// provider without the endpoint is a `ServerError` `.misconfigured`. `false`: never, and a
        /// provider that requires it is a `LoginError` `.invalidConfiguration`.
        public var pushesAuthorizationRequests: Bool?
        /// The RFC 8705 thumbprint (`x5t#S256`: `CertificateThumbprint.sha256`) of the TLS client
        /// certificate the transport presents. A token response whose access token is bound to
        /// another certificate (a JWT whose `cnf` names another `x5t#S256`) is refused: no request
        /// over this transport could use the token. Default `nil`: the thumbprint of the
        /// certificate the API's `CurlHTTPClient` presents (the bytes of `TLS.clientCertificate` it
        /// read when it was created), computed when such a token arrives; nothing is checked when
        /// it presents none.
        package var clientCertificateThumbprint: String?

        /// A public client (no secret) or a confidential one of `issuer`; every other setting keeps
        /// its default (discovery on, ID tokens verified, `client_secret_basic`).
        public init(issuer: String, clientID: String, clientSecret: String? = nil) {
            self.issuer = issuer
            self.clientID = clientID
            self.clientSecret = clientSecret
        }
    }

    /// How the client authenticates (the names are discovery's `token_endpoint_auth_methods_supported`).
    public enum ClientAuthenticationMethod: String, Sendable, CaseIterable {
        /// The client ID and secret in an HTTP Basic `Authorization` header (RFC 6749 §2.3.1).
        case basic = "client_secret_basic"
        /// The client ID and secret as `client_id` and `client_secret` form fields.
        case post = "client_secret_post"
        /// A JWT signed with the client's private key (RFC 7523 §2.2, OpenID Connect Core §9);
        /// needs ``Configuration/clientAssertionKey``. Or the token an identity source gives
        /// (``Configuration/clientAssertionSource``), sent as the client assertion as it is.
        case privateKeyJWT = "private_key_jwt"
        /// A JWT signed HS256 with the client secret (OpenID Connect Core §9); needs a secret of at
        /// least 32 bytes.
        case clientSecretJWT = "client_secret_jwt"
        /// Mutual TLS with a certificate from a CA the provider trusts, registered by its subject
        /// (RFC 8705 §2.1). The certificate the transport presents authenticates the client
        /// (`CurlHTTPClient.TLS.clientCertificate` and `clientKey`): requests name the client with
        /// `client_id` and carry no secret, and go to the provider's `mtls_endpoint_aliases` where
        /// it lists them (RFC 8705 §5). The tokens may then be bound to the certificate (§3).
        /// Never chosen by ``automatic``.
        case tlsClientAuth = "tls_client_auth"
        /// Mutual TLS with a self-signed certificate the client registered with the provider
        /// (RFC 8705 §2.2); otherwise as ``tlsClientAuth``.
        case selfSignedTLSClientAuth = "self_signed_tls_client_auth"
        /// Chosen from the configuration and discovery (see ``Configuration/clientAuthenticationMethod``).
        case automatic
    }

    /// The `aud` a client assertion names.
    public enum ClientAssertionAudience: Sendable, Hashable {
        /// The token endpoint's URL, also for requests to the revocation and device endpoints
        /// (OpenID Connect Core §9; Okta, Auth0, Entra ID).
        case tokenEndpoint
        /// The issuer identifier (RFC 7523 §3 allows it; some servers want it).
        case issuer
        /// A value the provider documents.
        case custom(String)
    }

    /// The provider metadata LoginKit uses.
    package struct Metadata: Sendable {
        /// The issuer, as configured and as the discovery document confirmed.
        package let issuer: String
        /// `token_endpoint`.
        package let tokenEndpoint: String
        /// `jwks_uri`, when published.
        package let jwksURI: String?
        /// `device_authorization_endpoint`, when offered.
        package let deviceAuthorizationEndpoint: String?
        /// `revocation_endpoint`, when offered.
        package let revocationEndpoint: String?
        /// `authorization_endpoint`, when offered (browser login).
        package internal(set) var authorizationEndpoint: String? = nil
        /// `userinfo_endpoint`, when offered.
        package internal(set) var userinfoEndpoint: String? = nil
        /// `scopes_supported`, when listed (see ``OAuth2API/defaultScope(supported:)``).
        package internal(set) var scopesSupported: [String]? = nil
        /// `code_challenge_methods_supported`, when listed.
        package internal(set) var codeChallengeMethodsSupported: [String]? = nil
        /// `authorization_response_iss_parameter_supported` (RFC 9207): authorization responses carry `iss`.
        package internal(set) var authorizationResponseIssParameterSupported = false
        /// `token_endpoint_auth_methods_supported`, when listed.
        package internal(set) var tokenEndpointAuthMethodsSupported: [String]? = nil
        /// `pushed_authorization_request_endpoint` (RFC 9126 §5), when offered.
        package internal(set) var pushedAuthorizationRequestEndpoint: String? = nil
        /// `require_pushed_authorization_requests` (RFC 9126 §5): authorization requests must be pushed.
        package internal(set) var requiresPushedAuthorizationRequests = false
        /// `dpop_signing_alg_values_supported` (RFC 9449 §5.1), when listed.
        package internal(set) var dpopSigningAlgValuesSupported: [String]? = nil
        /// `mtls_endpoint_aliases` (RFC 8705 §5): the URLs the provider serves an endpoint at with
        /// mutual TLS, by the endpoint's metadata name (`token_endpoint`, `revocation_endpoint`,
        /// `device_authorization_endpoint`, `pushed_authorization_request_endpoint`,
        /// `userinfo_endpoint`); empty when it lists none. With a TLS client authentication method
        /// they replace the endpoints above (each one configured explicitly still wins).
        package internal(set) var mtlsEndpointAliases: [String: String] = [:]
    }

    /// The configuration.
    package let configuration: Configuration
    /// The `DPoP-Nonce` each origin sent last, for the proofs of this API's token requests and of
    /// the requests made with its credentials.
    package let dpopNonces = DPoPNonces()
    let endpoint: TokenEndpoint
    private let transport: any HTTPTransport
    let now: @Sendable () -> Date
    private let metadataLoader: MetadataLoader
    /// The scope chosen from discovery when the configuration names none, once discovery is loaded:
    /// what ``source`` reports, so that a profile remembers the scope its login asked for.
    private let chosenScope = LockedState<String?>(nil)

    /// An API for `configuration`'s issuer over `transport`.
    public convenience init(configuration: Configuration, transport: any HTTPTransport) {
        self.init(configuration: configuration, transport: transport, now: { Date() })
    }

    /// An API whose expiries and ID-token checks take the time from `now`.
    package init(configuration: Configuration, transport: any HTTPTransport, now: @escaping @Sendable () -> Date) {
        self.configuration = configuration
        self.transport = transport
        self.endpoint = TokenEndpoint(transport: transport)
        self.now = now
        self.metadataLoader = MetadataLoader()
    }

    /// The transport this API sends over: requests made with its credentials go over it too.
    package var httpTransport: any HTTPTransport { transport }

    /// The transport's executor (`PrefersTaskExecutor`), if it has one: `AuthService` runs its
    /// shared refresh there.
    package var preferredTaskExecutor: (any TaskExecutor)? {
        (endpoint.transport as? any PrefersTaskExecutor)?.preferredTaskExecutor
    }

    /// The issuer, the client and the scope: the configuration's, else the one chosen from
    /// discovery once it is loaded.
    public var source: CredentialSource {
        CredentialSource(
            kind: .oauth2, endpoint: configuration.issuer, clientID: configuration.clientID,
            scope: configuration.scope ?? chosenScope.withLock { $0 })
    }

    var host: String { URLParts(configuration.issuer)?.host ?? configuration.issuer }

    /// Whose URL an endpoint is: the configuration's when `explicit` (its `endpoints.<setting>`) is
    /// set, which wins over discovery; otherwise the provider's `field` in its discovery document.
    func origin(_ explicit: String?, setting: String, field: String) -> TokenEndpoint.URLOrigin {
        explicit != nil ? .configuration("OAuth2API.Configuration.endpoints.\(setting)") : .provider("\(host)'s \(field)")
    }

    // MARK: Discovery

    /// The provider's metadata, fetched on first use.
    ///
    /// - Throws: `ServerError` (`.misconfigured` for an issuer mismatch or no advertised token
    ///   endpoint), `LoginError` `.invalidConfiguration` (an issuer that is not an absolute http(s) URL,
    ///   discovery off without `endpoints.token`), `NetworkError`.
    package func metadata() async throws -> Metadata {
        try await loaded().metadata
    }

    private func loaded() async throws -> MetadataLoader.Loaded {
        try await metadataLoader.load { try await self.fetchMetadata() }
    }

    private func fetchMetadata() async throws -> (metadata: Metadata, verifier: IDTokenVerifier?) {
        let document = try await configuration.usesDiscovery ? discoveryDocument() : [:]
        let metadata = try Metadata(document: document, configuration: configuration, host: host)
        if configuration.scope == nil { chosenScope.withLock { $0 = Self.defaultScope(supported: metadata.scopesSupported) } }
        var verifier: IDTokenVerifier?
        // No JWKS: an OAuth2-only provider. An ID token it sends anyway is refused in tokenRequest.
        if configuration.verifiesIDTokens, let jwksURI = metadata.jwksURI {
            var rules = IDTokenVerifier.Configuration(issuer: configuration.issuer, audience: configuration.clientID)
            rules.allowedAlgorithms = configuration.allowedAlgorithms
            rules.leeway = configuration.leeway
            verifier = IDTokenVerifier(configuration: rules, keys: JWKSSource(url: jwksURI, transport: transport, now: now), now: now)
        }
        return (metadata, verifier)
    }

    /// The discovery document, its `issuer` checked (OIDC Discovery §4.3).
    private func discoveryDocument() async throws -> [String: JSONValue] {
        let issuer = configuration.issuer.hasSuffix("/") ? String(configuration.issuer.dropLast()) : configuration.issuer
        let url = issuer + "/.well-known/openid-configuration"
        let (response, json, _) = try await endpoint.send(
            url, origin: .configuration("OAuth2API.Configuration.issuer"), method: .get, headers: [.accept: "application/json"], body: nil)
        if let error = TokenEndpoint.error(for: response, json: json, grant: .other, host: host) { throw error }
        guard let document = json?.objectValue else {
            throw ServerError(.malformedResponse, "\(host)'s discovery document is not JSON")
        }
        guard document["issuer"]?.stringValue == configuration.issuer else {
            throw ServerError(
                .misconfigured,
                "\(host)'s discovery document names issuer \"\(printableExcerpt(document["issuer"]?.stringValue ?? "none", limit: 200))\", not \"\(configuration.issuer)\"; set OAuth2API.Configuration.issuer to the provider's issuer exactly"
            )
        }
        return document
    }

    // MARK: Scope

    /// The scope asked for when the caller names none: ``Configuration/scope`` when set, else
    /// ``defaultScope(supported:)`` for what the provider's discovery lists. Empty: none.
    ///
    /// - Throws: what discovery throws (see ``metadata()``).
    package func requestedScope() async throws -> String {
        askedScope(try await metadata())
    }

    /// ``requestedScope()`` with the provider's `metadata` at hand.
    func askedScope(_ metadata: Metadata) -> String {
        configuration.scope ?? Self.defaultScope(supported: metadata.scopesSupported)
    }

    /// The `scope` parameter a token request sends.
    enum RequestScope {
        /// None.
        case omitted
        /// This one, as given.
        case given(String)
        /// The API's (``OAuth2API/requestedScope()``); none when it is empty.
        case configured
    }

    // MARK: Grants

    /// The DPoP key a token request proves possession of.
    enum RequestProof {
        /// A new key when ``Configuration/dpopAlgorithm`` is set, none otherwise: a login.
        case newKeyWhenConfigured
        /// This key, or none: a refresh (the credentials' key), a code exchange or a device poll
        /// (the key the sign-in started with).
        case key(DPoPKey?)
    }

    func tokenRequest(
        _ fields: [(String, String)], scope: RequestScope = .omitted, grant: TokenEndpoint.Grant, previous: Credentials? = nil,
        proof: RequestProof
    ) async throws -> Credentials {
        try await Telemetry.tokenRequest(grantType: fields.first { $0.0 == "grant_type" }?.1, issuer: configuration.issuer) {
            try await sendTokenRequest(fields, scope: scope, grant: grant, previous: previous, proof: proof)
        }
    }

    private func sendTokenRequest(
        _ fields: [(String, String)], scope: RequestScope, grant: TokenEndpoint.Grant, previous: Credentials?, proof: RequestProof
    ) async throws -> Credentials {
        let (metadata, verifier) = try await loaded()
        let proofKey: DPoPKey?
        switch proof {
        case .newKeyWhenConfigured: proofKey = try newProofKey(metadata)
        case .key(let key): proofKey = key
        }
        let asked: String?
        switch scope {
        case .omitted: asked = nil
        case .given(let given): asked = given
        case .configured:
            let chosen = askedScope(metadata)
            asked = chosen.isEmpty ? nil : chosen
        }
        var fields = fields
        let tokenOrigin = origin(configuration.endpoints.token, setting: "token", field: "token_endpoint")
        // The JWT-bearer grant's assertion is asked of its source here, once discovery is known,
        // so that it has not aged while discovery loaded; like a source's client assertion, it goes
        // to the issuer's origin only (or to a token endpoint the configuration sets).
        var assertion: (token: String, source: IdentitySource)?
        if case .jwtBearer(let source) = grant {
            try requireIssuerOrigin(metadata.tokenEndpoint, origin: tokenOrigin, setting: "token", sending: "the assertion from \(source.displayName)")
            let token = try await identityToken(from: source)
            fields.insert(("assertion", token), at: min(1, fields.count))
            assertion = (token, source)
        }
        // Right after grant_type.
        if let asked { fields.insert(("scope", asked), at: min(1, fields.count)) }
        let clientAuthentication = try await authentication(metadata, to: metadata.tokenEndpoint, origin: tokenOrigin, setting: "token")
        let (response, json, _) = try await endpoint.postForm(
            metadata.tokenEndpoint, origin: tokenOrigin, fields: fields, authentication: clientAuthentication, proof: proofMaker(proofKey))
        let scopes = TokenEndpoint.ScopeContext(asked: asked, advertised: metadata.scopesSupported)
        if let error = TokenEndpoint.error(for: response, json: json, grant: grant, host: host, scopes: scopes) {
            // A refused assertion (replayed, revoked, its file rotated early) is not sent again:
            // the next request asks the source anew.
            if let assertion, (error as? LoginError)?.code == .invalidCredentials {
                IdentitySource.discard(assertion.token, for: assertion.source)
            }
            throw error
        }
        try TokenEndpoint.requireJSON(response, host: host)
        try requireProofForDPoPToken(json, proofKey: proofKey)
        var credentials = try await TokenEndpoint.credentials(
            from: json, host: host, issuer: configuration.issuer, now: now(), verifier: verifier, previous: previous
        )
        try requireCertificateBinding(of: credentials.accessToken)
        credentials.proofKey = proofKey
        // A provider with no JWKS (OAuth2-only) that sends a new ID token anyway: nothing can verify it.
        if configuration.verifiesIDTokens, verifier == nil, let idToken = credentials.idToken, idToken != previous?.idToken {
            throw LoginError(
                .verifierRequired,
                "\(host) sent an ID token but publishes no jwks_uri to verify it with; set OAuth2API.Configuration.endpoints.jwks, or OAuth2API.Configuration.verifiesIDTokens = false"
            )
        }
        return credentials
    }

    public func logIn(for id: User.ID, with password: String) async throws -> Credentials {
        try await tokenRequest(
            [("grant_type", "password"), ("username", id.rawValue), ("password", password)], scope: .configured, grant: .password,
            proof: .newKeyWhenConfigured)
    }

    public func refresh(_ credentials: Credentials) async throws -> Credentials {
        guard let refreshToken = credentials.refreshToken else {
            throw LoginRequiredError(.cannotRefresh, profile: nil, "the credentials have no refresh token; log in again")
        }
        var previous = credentials
        previous.expiresAt = nil
        // The key the tokens are bound to, whatever the configuration says now: a bound refresh
        // token is refreshed with a proof by its key only (RFC 9449 §5).
        return try await tokenRequest(
            [("grant_type", "refresh_token"), ("refresh_token", refreshToken)], grant: .refresh, previous: previous,
            proof: .key(credentials.proofKey))
    }

    public func clientCredentials(scope: String? = nil) async throws -> Credentials {
        try await clientCredentials(for: TokenTarget(scope: scope))
    }

    /// Credentials for the client itself, for `target`'s resources, audience and scope (when the
    /// target names none, the configuration's scope, or the one chosen from discovery): the client
    /// credentials grant, or with ``Configuration/assertionGrantSource`` the JWT-bearer grant
    /// (RFC 7523 §2.1) with the source's token, asked of the source for this request once the
    /// provider's metadata is known, and sent only to a token endpoint on the issuer's origin (or
    /// one ``Configuration/endpoints`` sets).
    ///
    /// - Throws: `LoginError` `.invalidConfiguration` for a resource that is not an absolute URI
    ///   without a fragment; `LoginError` `.invalidTarget` when the provider refuses the target;
    ///   `LoginError` `.invalidCredentials` when it refuses the source's assertion (which the
    ///   source then fetches again at the next request); `ServerError` `.misconfigured` for a
    ///   discovered token endpoint on another origin than the issuer's, the source not asked; what
    ///   the source throws (see ``IdentitySource/token(transport:)``), and what the other grants
    ///   throw.
    public func clientCredentials(for target: TokenTarget) async throws -> Credentials {
        try target.validate()
        let scope = target.scope.map(RequestScope.given) ?? .configured
        guard let source = configuration.assertionGrantSource else {
            return try await tokenRequest(
                [("grant_type", "client_credentials")] + target.formFields, scope: scope, grant: .clientCredentials, proof: .newKeyWhenConfigured)
        }
        return try await tokenRequest(
            [("grant_type", Self.jwtBearerGrantType)] + target.formFields, scope: scope, grant: .jwtBearer(source: source),
            proof: .newKeyWhenConfigured)
    }

    @discardableResult
    public func revoke(_ credentials: Credentials) async throws -> Bool {
        let metadata = try await metadata()
        guard let revocationEndpoint = metadata.revocationEndpoint else { return false }
        let revocationOrigin = origin(configuration.endpoints.revocation, setting: "revocation", field: "revocation_endpoint")
        let clientAuthentication = try await authentication(metadata, to: revocationEndpoint, origin: revocationOrigin, setting: "revocation")
        let tokens = [(credentials.refreshToken, "refresh_token"), (credentials.accessToken, "access_token")]
        for case let (token?, hint) in tokens {
            let (response, json, _) = try await endpoint.postForm(
                revocationEndpoint, origin: revocationOrigin, fields: [("token", token), ("token_type_hint", hint)],
                authentication: clientAuthentication
            )
            // RFC 7009 §2.2: 200 for valid and invalid tokens alike; 503 may come back with Retry-After.
            if let error = TokenEndpoint.error(for: response, json: json, grant: .other, host: host),
                (error as? ServerError)?.providerError != "unsupported_token_type"
            {
                throw error
            }
        }
        return true
    }

    // MARK: Device authorization (RFC 8628)

    package func startDeviceAuthorization(scope: String? = nil) async throws -> DeviceAuthorization {
        let metadata = try await metadata()
        guard let url = metadata.deviceAuthorizationEndpoint else {
            throw ServerError(
                .misconfigured, "\(host) offers no device authorization endpoint; set OAuth2API.Configuration.endpoints.deviceAuthorization if it has one")
        }
        // Made (and the algorithm checked) before the user is shown a code to enter.
        let proofKey = try newProofKey(metadata)
        let asked = scope ?? askedScope(metadata)
        let deviceOrigin = origin(configuration.endpoints.deviceAuthorization, setting: "deviceAuthorization", field: "device_authorization_endpoint")
        let clientAuthentication = try await authentication(metadata, to: url, origin: deviceOrigin, setting: "deviceAuthorization")
        let (response, json, _) = try await endpoint.postForm(
            url, origin: deviceOrigin, fields: asked.isEmpty ? [] : [("scope", asked)], authentication: clientAuthentication)
        let scopes = TokenEndpoint.ScopeContext(asked: asked.isEmpty ? nil : asked, advertised: metadata.scopesSupported)
        if let error = TokenEndpoint.error(for: response, json: json, grant: .other, host: host, scopes: scopes) { throw error }
        guard let object = json?.objectValue,
            let deviceCode = object["device_code"]?.stringValue, let userCode = object["user_code"]?.stringValue,
            let verificationURI = object["verification_uri"]?.stringValue ?? object["verification_url"]?.stringValue,
            let expiresIn = object["expires_in"]?.int64Value, expiresIn > 0
        else { throw ServerError(.malformedResponse, "\(host)'s device authorization response is incomplete") }
        let interval = max(1, object["interval"]?.int64Value ?? 5)  // RFC 8628 §3.2: default 5 s
        let verificationURIComplete = object["verification_uri_complete"]?.stringValue
        // Hosts show these to the user as they are: a newline or an escape sequence in them would forge
        // terminal output or log lines. No URI and no code a person types has control characters.
        let shown = [userCode, verificationURI, verificationURIComplete ?? ""]
        guard !shown.contains(where: { $0.unicodeScalars.contains { [.control, .format].contains($0.properties.generalCategory) } }) else {
            throw ServerError(.malformedResponse, "\(host)'s device authorization response holds control characters in its user code or URI")
        }
        var authorization = DeviceAuthorization(
            deviceCode: deviceCode, userCode: userCode, verificationURI: verificationURI,
            verificationURIComplete: verificationURIComplete,
            expiresAt: now().addingTimeInterval(Double(expiresIn)), interval: .seconds(interval)
        )
        authorization.proofKey = proofKey
        return authorization
    }

    package func pollDeviceAuthorization(_ authorization: DeviceAuthorization) async throws -> DevicePollResult {
        do {
            return .authorized(try await tokenRequest(
                [("grant_type", "urn:ietf:params:oauth:grant-type:device_code"), ("device_code", authorization.deviceCode)],
                grant: .deviceCode, proof: .key(authorization.proofKey)
            ))
        } catch let error as ServerError where error.providerError == "authorization_pending" {
            return .pending
        } catch let error as ServerError where error.providerError == "slow_down" {
            return .slowDown
        }
    }
}

/// Loads the provider metadata once; concurrent first callers share one fetch, a failure is not cached.
actor MetadataLoader {
    typealias Loaded = (metadata: OAuth2API.Metadata, verifier: IDTokenVerifier?)
    private var loaded: Loaded?
    private nonisolated let fetches = SingleFlight<Int, Loaded>()

    func load(_ fetch: @escaping @Sendable () async throws -> Loaded) async throws -> Loaded {
        if let loaded { return loaded }
        let result = try await fetches.run(0, fetch)
        loaded = result
        return result
    }
}
