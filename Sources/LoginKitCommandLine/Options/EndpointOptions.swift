// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
import ArgumentParser
import LoginKit

/// `--authorization-endpoint`, `--token-endpoint`, … and `--no-discovery`: endpoints given
/// explicitly, for providers with no or partial discovery (GitHub, OAuth2-only servers, a device
/// endpoint served but not advertised). Each one given wins over discovery.
struct EndpointOptions: ParsableArguments {
    @Option(name: .customLong("authorization-endpoint"), help: "The authorization endpoint (browser login); wins over discovery.")
    var authorizationEndpoint: String?
    @Option(name: .customLong("token-endpoint"), help: "The token endpoint; wins over discovery, required with --no-discovery.")
    var tokenEndpoint: String?
    @Option(name: .customLong("device-authorization-endpoint"), help: "The device authorization endpoint (RFC 8628); wins over discovery.")
    var deviceAuthorizationEndpoint: String?
    @Option(name: .customLong("revocation-endpoint"), help: "The revocation endpoint (RFC 7009); wins over discovery.")
    var revocationEndpoint: String?
    @Option(name: .customLong("jwks-uri"), help: "The JWKS URI that ID tokens are verified against; wins over discovery.")
    var jwksURI: String?
    @Option(name: .customLong("userinfo-endpoint"), help: "The userinfo endpoint; wins over discovery.")
    var userinfoEndpoint: String?
    @Flag(name: .customLong("no-discovery"), help: "Do not fetch the issuer's discovery document (for providers that publish none, such as GitHub); needs --token-endpoint.")
    var noDiscovery = false

    func validate() throws {
        if noDiscovery && tokenEndpoint == nil {
            throw ValidationError("--no-discovery needs --token-endpoint (and --authorization-endpoint for a browser login)")
        }
    }

    /// The flags given, for "applies to … only" messages.
    var given: [String] {
        var flags: [String] = []
        if authorizationEndpoint != nil { flags.append("--authorization-endpoint") }
        if tokenEndpoint != nil { flags.append("--token-endpoint") }
        if deviceAuthorizationEndpoint != nil { flags.append("--device-authorization-endpoint") }
        if revocationEndpoint != nil { flags.append("--revocation-endpoint") }
        if jwksURI != nil { flags.append("--jwks-uri") }
        if userinfoEndpoint != nil { flags.append("--userinfo-endpoint") }
        if noDiscovery { flags.append("--no-discovery") }
        return flags
    }

    /// Sets the endpoints given (each wins over what `configuration` had) and turns discovery off
    /// with `--no-discovery`.
    func apply(to configuration: inout OAuth2API.Configuration) {
        var endpoints = configuration.endpoints
        if let authorizationEndpoint { endpoints.authorization = authorizationEndpoint }
        if let tokenEndpoint { endpoints.token = tokenEndpoint }
        if let deviceAuthorizationEndpoint { endpoints.deviceAuthorization = deviceAuthorizationEndpoint }
        if let revocationEndpoint { endpoints.revocation = revocationEndpoint }
        if let jwksURI { endpoints.jwks = jwksURI }
        if let userinfoEndpoint { endpoints.userinfo = userinfoEndpoint }
        configuration.endpoints = endpoints
        if noDiscovery { configuration.usesDiscovery = false }
    }
}

/// Explicit endpoints kept in a profile's `attributes`, so that `token` and `logout` reach the same
/// endpoints (refresh, revocation) with nothing but `--profile`: the library's `CredentialSource`
/// remembers the issuer, not the endpoints. Keys: `endpoint.authorization`, `endpoint.token`,
/// `endpoint.device_authorization`, `endpoint.revocation`, `endpoint.jwks`, `endpoint.userinfo`,
/// `discovery` = `off`, and the login's choices a later login makes again: `dpop_alg` (the DPoP
/// key's algorithm, never the key, which the credentials hold) and `par` = `always` or `never`.
/// URLs and names only, never a secret.
enum EndpointAttributes {
    /// The attributes that record `configuration`'s explicit endpoints, discovery switch, DPoP
    /// algorithm and pushed-request choice; empty when it has none.
    static func attributes(of configuration: OAuth2API.Configuration) -> [String: String] {
        let endpoints = configuration.endpoints
        var attributes: [String: String] = [:]
        attributes["endpoint.authorization"] = endpoints.authorization
        attributes["endpoint.token"] = endpoints.token
        attributes["endpoint.device_authorization"] = endpoints.deviceAuthorization
        attributes["endpoint.revocation"] = endpoints.revocation
        attributes["endpoint.jwks"] = endpoints.jwks
        attributes["endpoint.userinfo"] = endpoints.userinfo
        if !configuration.usesDiscovery { attributes["discovery"] = "off" }
        attributes["dpop_alg"] = configuration.dpopAlgorithm?.rawValue
        attributes["par"] = configuration.pushesAuthorizationRequests.map { $0 ? "always" : "never" }
        return attributes
    }

    /// Sets the endpoints, discovery switch, DPoP algorithm and pushed-request choice that
    /// `attributes` record.
    static func apply(_ attributes: [String: String], to configuration: inout OAuth2API.Configuration) {
        var endpoints = configuration.endpoints
        if let value = attributes["endpoint.authorization"] { endpoints.authorization = value }
        if let value = attributes["endpoint.token"] { endpoints.token = value }
        if let value = attributes["endpoint.device_authorization"] { endpoints.deviceAuthorization = value }
        if let value = attributes["endpoint.revocation"] { endpoints.revocation = value }
        if let value = attributes["endpoint.jwks"] { endpoints.jwks = value }
        if let value = attributes["endpoint.userinfo"] { endpoints.userinfo = value }
        configuration.endpoints = endpoints
        if attributes["discovery"] == "off" { configuration.usesDiscovery = false }
        if let algorithm = attributes["dpop_alg"].flatMap(JWSAlgorithm.init(rawValue:)) { configuration.dpopAlgorithm = algorithm }
        switch attributes["par"] {
        case "always": configuration.pushesAuthorizationRequests = true
        case "never": configuration.pushesAuthorizationRequests = false
        default: break
        }
    }

    /// Adds what ``attributes(of:)`` records of `configuration`, and `extra`, to the profile `name`
    /// that a login just saved through `api`, under the store's lock. Nothing is written when there
    /// are none, or when the profile now holds another provider's or client's login.
    ///
    /// - Throws: `TokenStoreError`.
    static func record(
        _ configuration: OAuth2API.Configuration, extra: [String: String] = [:], source: CredentialSource, in store: any TokenStore, profile name: String
    ) async throws {
        let recorded = Self.attributes(of: configuration).merging(extra) { _, new in new }
        guard !recorded.isEmpty else { return }
        try await store.withExclusiveAccess(to: name) { transaction in
            guard var profile = transaction[name], profile.source.kind == source.kind,
                profile.source.endpoint == source.endpoint, profile.source.clientID == source.clientID
            else { return }
            profile.attributes.merge(recorded) { _, new in new }
            transaction[name] = profile
        }
    }
}
#endif
