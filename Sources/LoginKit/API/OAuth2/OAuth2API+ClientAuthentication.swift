import LoginKitHTTP
import LoginKitJOSE

extension OAuth2API {
    /// The method this API authenticates with, once discovery is known: the configured one, or for
    /// `.automatic` the one chosen from the configuration and the provider's metadata.
    ///
    /// - Throws: what ``metadata()`` throws, and `LoginError` `.invalidConfiguration` when the
    ///   configured method lacks what it needs (a key for `private_key_jwt`, a secret for the others).
    package func clientAuthenticationMethodInUse() async throws -> ClientAuthenticationMethod {
        try Self.method(for: configuration, supported: await metadata().tokenEndpointAuthMethodsSupported) ?? .automatic
    }

    /// The configured method, or the automatic choice; `nil` for a public client (no secret, no key).
    static func method(for configuration: Configuration, supported: [String]?) throws -> ClientAuthenticationMethod? {
        let method = configuration.clientAuthenticationMethod
        switch method {
        case .privateKeyJWT:
            guard configuration.clientAssertionKey != nil else {
                throw LoginError(
                    .invalidConfiguration, "OAuth2API.Configuration.clientAuthenticationMethod is private_key_jwt but clientAssertionKey is not set")
            }
            return method
        case .basic, .post, .clientSecretJWT:
            guard configuration.clientSecret != nil else {
                throw LoginError(
                    .invalidConfiguration, "OAuth2API.Configuration.clientAuthenticationMethod is \(method.rawValue) but clientSecret is not set")
            }
            return method
        case .automatic:
            if configuration.clientAssertionKey != nil { return .privateKeyJWT }
            guard let secret = configuration.clientSecret else { return nil }
            // RFC 8414 §2: a provider that lists no methods supports client_secret_basic.
            let offered = Set(supported ?? [ClientAuthenticationMethod.basic.rawValue])
            let candidates: [ClientAuthenticationMethod] = secret.utf8.count >= 32 ? [.basic, .post, .clientSecretJWT] : [.basic, .post]
            return candidates.first { offered.contains($0.rawValue) } ?? .basic
        }
    }

    /// How requests to the provider authenticate the client, per the method in use.
    func authentication(_ metadata: Metadata) throws -> ClientAuthentication {
        let id = configuration.clientID
        guard let method = try Self.method(for: configuration, supported: metadata.tokenEndpointAuthMethodsSupported) else {
            return .none(id: id)
        }
        func assertion(_ signer: ClientAssertionSigner) throws -> ClientAuthentication {
            let audience: String
            switch configuration.clientAssertionAudience {
            case .tokenEndpoint:
                // Audience injection (rfc7523bis): a provider whose discovery names another's token
                // endpoint would get assertions valid there. The token endpoint must be the issuer's
                // own origin unless the configuration names it.
                if configuration.endpoints.token == nil, Self.urlOrigin(metadata.tokenEndpoint) != Self.urlOrigin(configuration.issuer) {
                    throw ServerError(
                        .misconfigured,
                        "\(host)'s discovery names a token endpoint on another origin than the issuer; a client assertion for it would be valid there. Set OAuth2API.Configuration.endpoints.token, or clientAssertionAudience to .issuer or .custom")
                }
                audience = metadata.tokenEndpoint
            case .issuer: audience = configuration.issuer
            case .custom(let value): audience = value
            }
            return .assertion(id: id, ClientAssertionMaker(signer: signer, audience: audience, lifetime: configuration.clientAssertionLifetime, now: now))
        }
        switch (method, configuration.clientSecret, configuration.clientAssertionKey) {
        case (.privateKeyJWT, _, let key?):
            return try assertion(.privateKey(key))
        case (.clientSecretJWT, let secret?, _):
            let signer: ClientAssertionSigner
            do {
                signer = try ClientAssertionSigner.clientSecret(secret)
            } catch {
                throw LoginError(.invalidConfiguration, "OAuth2API.Configuration.clientSecret cannot sign: \(error.message)", underlying: error)
            }
            return try assertion(signer)
        case (.post, let secret?, _):
            return .post(id: id, secret: secret)
        case (_, let secret?, _):
            return .basic(id: id, secret: secret)
        default:
            return .none(id: id)
        }
    }

    /// `scheme://host:port`, the port made explicit; `nil` for what is not an absolute URL.
    static func urlOrigin(_ url: String) -> String? {
        guard let parts = URLParts(url) else { return nil }
        return "\(parts.scheme)://\(parts.host.lowercased()):\(parts.port ?? (parts.scheme == "https" ? 443 : 80))"
    }
}
