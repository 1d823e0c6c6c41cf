import LoginKitHTTP
import LoginKitJOSE

extension OAuth2API {
    /// Endpoints given explicitly, for providers with no or partial discovery: GitHub (no discovery
    /// at all), OAuth2-only servers, providers that serve a device endpoint without advertising it.
    /// Each one set wins over what discovery says.
    public struct Endpoints: Sendable, Hashable {
        /// The authorization endpoint (browser login).
        public var authorization: String?
        /// The token endpoint. Required when discovery is off.
        public var token: String?
        /// The device authorization endpoint (RFC 8628).
        public var deviceAuthorization: String?
        /// The revocation endpoint (RFC 7009).
        public var revocation: String?
        /// The JWKS URI that ID tokens are verified against.
        public var jwks: String?
        /// The userinfo endpoint.
        public var userinfo: String?

        /// Endpoints to use instead of (or without) discovery; each one left `nil` comes from discovery.
        public init(
            authorization: String? = nil, token: String? = nil, deviceAuthorization: String? = nil,
            revocation: String? = nil,
            jwks: String? = nil, userinfo: String? = nil
        ) {
            self.authorization = authorization
            self.token = token
            self.deviceAuthorization = deviceAuthorization
            self.revocation = revocation
            self.jwks = jwks
            self.userinfo = userinfo
        }
    }

    /// The scope to ask for when the caller names none: `openid`, then `profile`, `email` and
    /// `offline_access` where `supported` (discovery's `scopes_supported`) lists them, all three when
    /// it lists none (`nil` or empty). A provider refuses the whole login (`invalid_scope`) when it
    /// is asked for a scope it does not offer, as Google does for `offline_access`.
    package static func defaultScope(supported: [String]?) -> String {
        let optional = ["profile", "email", "offline_access"]
        guard let supported, !supported.isEmpty else { return (["openid"] + optional).joined(separator: " ") }
        let offered = Set(supported)
        return (["openid"] + optional.filter { offered.contains($0) }).joined(separator: " ")
    }
}

extension OAuth2API.Metadata {
    /// The metadata from a discovery `document` (empty when discovery is off), the configuration's
    /// explicit endpoints winning over it.
    ///
    /// - Throws: `ServerError` `.misconfigured` when the discovery document has no token endpoint
    ///   and none is configured; `LoginError` `.invalidConfiguration` when discovery is off and no
    ///   token endpoint is configured.
    init(document: [String: JSONValue], configuration: OAuth2API.Configuration, host: String) throws {
        let explicit = configuration.endpoints
        func string(_ name: String) -> String? { document[name]?.stringValue }
        func strings(_ name: String) -> [String]? { document[name]?.arrayValue?.compactMap(\.stringValue) }
        guard let tokenEndpoint = explicit.token ?? string("token_endpoint") else {
            guard configuration.usesDiscovery else {
                throw LoginError(
                    .invalidConfiguration,
                    "OAuth2API.Configuration.usesDiscovery is false and no token endpoint is configured; set OAuth2API.Configuration.endpoints.token"
                )
            }
            throw ServerError(
                .misconfigured, "\(host)'s discovery document has no token_endpoint; set OAuth2API.Configuration.endpoints.token")
        }
        self.init(
            issuer: configuration.issuer, tokenEndpoint: tokenEndpoint, jwksURI: explicit.jwks ?? string("jwks_uri"),
            deviceAuthorizationEndpoint: explicit.deviceAuthorization ?? string("device_authorization_endpoint"),
            revocationEndpoint: explicit.revocation ?? string("revocation_endpoint")
        )
        authorizationEndpoint = explicit.authorization ?? string("authorization_endpoint")
        userinfoEndpoint = explicit.userinfo ?? string("userinfo_endpoint")
        scopesSupported = strings("scopes_supported")
        codeChallengeMethodsSupported = strings("code_challenge_methods_supported")
        authorizationResponseIssParameterSupported =
            document["authorization_response_iss_parameter_supported"]?.boolValue ?? false
        tokenEndpointAuthMethodsSupported = strings("token_endpoint_auth_methods_supported")
        pushedAuthorizationRequestEndpoint = string("pushed_authorization_request_endpoint")
        requiresPushedAuthorizationRequests = document["require_pushed_authorization_requests"]?.boolValue ?? false
        dpopSigningAlgValuesSupported = strings("dpop_signing_alg_values_supported")
    }
}
