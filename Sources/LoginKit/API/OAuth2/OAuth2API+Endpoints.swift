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
    /// explicit endpoints winning over it. A client that authenticates with a TLS client
    /// certificate sends every request to the endpoints' `mtls_endpoint_aliases` where the document
    /// lists them (RFC 8705 §5).
    ///
    /// - Throws: `ServerError` `.misconfigured` when the discovery document has no token endpoint
    ///   and none is configured, or, for a TLS client authentication method, when its
    ///   `mtls_endpoint_aliases` is not an object or names an endpoint that is not an absolute https
    ///   URL (http only to a loopback host); `LoginError` `.invalidConfiguration` when discovery is
    ///   off and no token endpoint is configured.
    init(document: [String: JSONValue], configuration: OAuth2API.Configuration, host: String) throws {
        let explicit = configuration.endpoints
        let usesAliases = configuration.clientAuthenticationMethod.usesTLSClientCertificate
        let aliases = try Self.mtlsEndpointAliases(in: document, host: host, checked: usesAliases)
        func string(_ name: String) -> String? {
            (usesAliases ? aliases[name] : nil) ?? document[name]?.stringValue
        }
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
        mtlsEndpointAliases = aliases
    }

    /// The endpoints RFC 8705 §5 aliases that LoginKit calls.
    static let aliasedEndpoints: Set<String> = [
        "token_endpoint", "revocation_endpoint", "device_authorization_endpoint", "pushed_authorization_request_endpoint",
        "userinfo_endpoint",
    ]

    /// The URLs `document`'s `mtls_endpoint_aliases` gives ``aliasedEndpoints``; empty when it
    /// lists none. Unless `checked`, what is not a string there is left out; when `checked` (the
    /// client will send its certificate and its bound tokens there), an alias must be an absolute
    /// https URL, or http to a loopback host as a provider under test serves them.
    ///
    /// - Throws: `ServerError` `.misconfigured` when `checked` and `mtls_endpoint_aliases` is not an
    ///   object or an alias is no such URL, naming the endpoint.
    private static func mtlsEndpointAliases(in document: [String: JSONValue], host: String, checked: Bool) throws -> [String: String] {
        guard let member = document["mtls_endpoint_aliases"], member != .null else { return [:] }
        guard let object = member.objectValue else {
            guard !checked else {
                throw ServerError(.misconfigured, "\(host)'s mtls_endpoint_aliases is not a JSON object (RFC 8705 §5)")
            }
            return [:]
        }
        var aliases: [String: String] = [:]
        for (name, value) in object.sorted(by: { $0.key < $1.key }) where aliasedEndpoints.contains(name) {
            let url = value.stringValue
            if checked {
                guard let url, let parts = URLParts(url), parts.scheme == "https" || parts.isLoopback else {
                    let shown = url.map { TokenEndpoint.quoted(url: $0) } ?? "a value that is not a string"
                    throw ServerError(
                        .misconfigured,
                        "\(host)'s mtls_endpoint_aliases gives \(name) \(shown), which is not an absolute https URL (RFC 8705 §5)")
                }
            }
            aliases[name] = url
        }
        return aliases
    }
}
