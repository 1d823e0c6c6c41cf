import LoginKitCurl
import LoginKitHTTP
import LoginKitJOSE

extension OAuth2API {
    /// Whom a client secret given apart from a configuration belongs to (the CLI's
    /// `LOGINKIT_CLIENT_SECRET`, with the client ID and issuer given beside it): each part `nil`
    /// when the giver named none.
    package struct ClientSecretOwner: Sendable, Hashable {
        /// The client ID the secret was given for.
        package var clientID: String?
        /// The issuer the secret was given for.
        package var issuer: String?

        /// The owner named by `clientID` and `issuer`, each optional.
        package init(clientID: String?, issuer: String?) {
            self.clientID = clientID
            self.issuer = issuer
        }

        /// Whether the secret may be sent as client `clientID` to `issuer`: every part the giver
        /// named is theirs (issuers compared with a trailing `/` aside).
        package func owns(clientID: String, issuer: String) -> Bool {
            func normalized(_ issuer: String) -> String { issuer.hasSuffix("/") ? String(issuer.dropLast()) : issuer }
            return (self.clientID.map { $0 == clientID } ?? true) && (self.issuer.map { normalized($0) == normalized(issuer) } ?? true)
        }
    }

    /// The method this API authenticates with, once discovery is known: the configured one, or for
    /// `.automatic` the one chosen from the configuration and the provider's metadata.
    ///
    /// - Throws: what ``metadata()`` throws, and `LoginError` `.invalidConfiguration` when the
    ///   configured method lacks what it needs (a key or an assertion source for `private_key_jwt`,
    ///   a secret for the `client_secret_…` methods), or both a key and a source are set.
    package func clientAuthenticationMethodInUse() async throws -> ClientAuthenticationMethod {
        try Self.method(for: configuration, supported: await metadata().tokenEndpointAuthMethodsSupported) ?? .automatic
    }

    /// What a profile logged in through this API records about its client's authentication:
    /// ``StoredProfile/clientAuthenticationAttribute`` = the method in use (`private_key_jwt` for a
    /// ``Configuration/clientAssertionSource`` too), or `none` for a public
    /// client (which then never sends a secret given for another, see
    /// ``StoredProfile/acceptsClientSecret(clientID:issuer:)``).
    ///
    /// - Throws: what ``clientAuthenticationMethodInUse()`` throws.
    package func clientAuthenticationAttributes() async throws -> [String: String] {
        let method = try Self.method(for: configuration, supported: await metadata().tokenEndpointAuthMethodsSupported)
        return [StoredProfile.clientAuthenticationAttribute: method?.rawValue ?? StoredProfile.publicClientAuthentication]
    }

    /// The configured method, or the automatic choice; `nil` for a public client (no secret of its
    /// own, no key, no assertion source, no TLS client authentication).
    static func method(for configuration: Configuration, supported: [String]?) throws -> ClientAuthenticationMethod? {
        // One assertion per request: signed by the key, or the source's token, never a choice made here.
        if configuration.clientAssertionKey != nil, configuration.clientAssertionSource != nil {
            throw LoginError(
                .invalidConfiguration,
                "OAuth2API.Configuration sets both clientAssertionKey and clientAssertionSource; set the one the provider knows the client by")
        }
        let method = configuration.clientAuthenticationMethod
        switch method {
        case .tlsClientAuth, .selfSignedTLSClientAuth:
            // The transport's certificate is the credential (RFC 8705 §2): nothing here to check.
            return method
        case .privateKeyJWT:
            guard configuration.clientAssertionKey != nil || configuration.clientAssertionSource != nil else {
                throw LoginError(
                    .invalidConfiguration,
                    "OAuth2API.Configuration.clientAuthenticationMethod is private_key_jwt but neither clientAssertionKey nor clientAssertionSource is set")
            }
            return method
        case .basic, .post, .clientSecretJWT:
            guard configuration.ownClientSecret != nil else {
                if configuration.clientSecret != nil {
                    throw LoginError(
                        .invalidConfiguration,
                        "OAuth2API.Configuration.clientAuthenticationMethod is \(method.rawValue) but the client secret was given for another client or issuer than client \"\(printableExcerpt(configuration.clientID, limit: 100))\" of \(printableExcerpt(configuration.issuer, limit: 200)); it is not sent"
                    )
                }
                throw LoginError(
                    .invalidConfiguration, "OAuth2API.Configuration.clientAuthenticationMethod is \(method.rawValue) but clientSecret is not set")
            }
            return method
        case .automatic:
            if configuration.clientAssertionKey != nil || configuration.clientAssertionSource != nil { return .privateKeyJWT }
            guard let secret = configuration.ownClientSecret else { return nil }
            // RFC 8414 §2: a provider that lists no methods supports client_secret_basic.
            let offered = Set(supported ?? [ClientAuthenticationMethod.basic.rawValue])
            let candidates: [ClientAuthenticationMethod] = secret.utf8.count >= 32 ? [.basic, .post, .clientSecretJWT] : [.basic, .post]
            return candidates.first { offered.contains($0.rawValue) } ?? .basic
        }
    }

    /// How a request to `url` (whose URL it is: `origin`; the ``Endpoints`` member that names it
    /// explicitly: `setting`, `nil` for none) authenticates the client, per the method in use. With
    /// ``Configuration/clientAssertionSource`` and `private_key_jwt`, the source's token is fetched
    /// here, before the request's form is built, and only for a `url` on the issuer's origin or set
    /// in the configuration (``requireIssuerOrigin(_:origin:setting:sending:)``).
    ///
    /// - Throws: `LoginError` `.invalidConfiguration` (see ``method(for:supported:)``),
    ///   `ServerError` `.misconfigured` for a discovered token endpoint outside the issuer (a signed
    ///   assertion) or an endpoint on another origin (a source's token), and what the source's
    ///   ``IdentitySource/token(transport:)`` throws.
    func authentication(
        _ metadata: Metadata, to url: String, origin: TokenEndpoint.URLOrigin, setting: String?
    ) async throws -> ClientAuthentication {
        let id = configuration.clientID
        guard let method = try Self.method(for: configuration, supported: metadata.tokenEndpointAuthMethodsSupported) else {
            return .none(id: id)
        }
        func assertion(_ signer: ClientAssertionSigner) throws -> ClientAuthentication {
            let audience: String
            switch configuration.clientAssertionAudience {
            case .tokenEndpoint:
                // Audience injection (rfc7523bis): a provider whose discovery names another's token
                // endpoint would get assertions valid there. Realms and tenants share hosts, so the
                // token endpoint must lie under the issuer itself unless the configuration names it.
                if configuration.endpoints.token == nil, !Self.isUnderIssuer(metadata.tokenEndpoint, issuer: configuration.issuer) {
                    throw ServerError(
                        .misconfigured,
                        "\(host)'s discovery names a token endpoint outside the issuer \(printableExcerpt(configuration.issuer, limit: 200)); a client assertion for it could be valid at another provider or realm. Set OAuth2API.Configuration.endpoints.token, or clientAssertionAudience to .issuer or .custom"
                    )
                }
                audience = metadata.tokenEndpoint
            case .issuer: audience = configuration.issuer
            case .custom(let value): audience = value
            }
            return .assertion(id: id, ClientAssertionMaker(signer: signer, audience: audience, lifetime: configuration.clientAssertionLifetime, now: now))
        }
        switch (method, configuration.ownClientSecret, configuration.clientAssertionKey) {
        case (.tlsClientAuth, _, _), (.selfSignedTLSClientAuth, _, _):
            // The certificate authenticates the client on the TLS connection: the form names the
            // client and carries no secret, whatever else is configured (RFC 8705 §2).
            return .none(id: id)
        case (.privateKeyJWT, _, let key?):
            return try assertion(.privateKey(key))
        case (.privateKeyJWT, _, _):
            guard let source = configuration.clientAssertionSource else { return .none(id: id) }
            // The platform's token names the audience the provider trusts it for: nothing of ours
            // to sign. It is a bearer credential there until it expires: the issuer's origin only.
            try requireIssuerOrigin(url, origin: origin, setting: setting, sending: "the client assertion from \(source.displayName)")
            let token = try await identityToken(from: source)
            return .federated(id: id, assertion: token, source: source)
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

    /// Refuses a token response whose access token is bound to another TLS client certificate
    /// than the one this client presents (RFC 8705 §3: a JWT whose `cnf` names `x5t#S256`): no
    /// request over this transport could use it. The presented certificate is
    /// ``Configuration/clientCertificateThumbprint``'s, else the one the API's `CurlHTTPClient`
    /// presents. An opaque token, a token bound to none, or a client that presents no certificate:
    /// nothing to check.
    ///
    /// - Throws: `ServerError` `.malformedResponse` (bound to another certificate, or a `cnf` whose
    ///   `x5t#S256` is not a string); `TokenVerificationError` when the presented certificate's
    ///   thumbprint cannot be computed — the binding is then refused, not assumed.
    func requireCertificateBinding(of accessToken: String?) throws {
        // No access token, or one bound to no certificate (opaque, or a JWT without
        // `cnf.x5t#S256`): nothing to compare. A malformed `cnf` throws (ServerError).
        guard let accessToken, let bound = try Self.certificateThumbprint(boundTo: accessToken, host: host) else { return }  // throws ServerError (typed): a malformed cnf
        // A client that presents no certificate cannot use a bound token either, but that is the
        // resource server's refusal to make; a certificate whose thumbprint cannot be computed
        // throws (TokenVerificationError): the binding is refused, never assumed.
        guard let presented = try configuration.clientCertificateThumbprint ?? presentedCertificateThumbprint() else { return }  // throws TokenVerificationError (typed): an unreadable certificate
        guard bound == presented else {
            throw ServerError(
                .malformedResponse,
                "\(host) issued an access token bound to another certificate (cnf x5t#S256 \"\(printableExcerpt(bound, limit: 64))\") than the TLS client certificate this client presents (\(presented)); no request with it could use the token"
            )
        }
    }

    /// The `x5t#S256` of `accessToken`'s `cnf` claim (RFC 8705 §3.1) when it is a JWT that has
    /// one, read without verification (the token is the resource server's to verify). `nil` for a
    /// token that is not a JWS with a JSON payload: an opaque token, which only its issuer and
    /// the resource server can read, so there is nothing for the client to compare.
    ///
    /// - Throws: `ServerError` `.malformedResponse` for a `cnf.x5t#S256` that is not a string.
    static func certificateThumbprint(boundTo accessToken: String, host: String) throws(ServerError) -> String? {  // nil: opaque, or bound to none
        // Not a JWS with a JSON payload: an opaque token, legitimately unreadable to the client
        // (RFC 8705 §3 leaves its format to the provider), so its parse errors are not errors here.
        guard let jws = try? CompactJWS(parsing: accessToken), let payload = try? JSONValue.parse(jws.payload) else { return nil }
        guard let member = payload["cnf"]?["x5t#S256"] else { return nil }
        guard let thumbprint = member.stringValue else {
            throw ServerError(.malformedResponse, "\(host) issued an access token whose cnf x5t#S256 is not a string")
        }
        return thumbprint
    }

    /// The thumbprint of the certificate the API's `CurlHTTPClient` presents: of the bytes it read
    /// when it was created and sends on every connection, not of the file as it is now; `nil` for
    /// another transport or no certificate.
    ///
    /// - Throws: `TokenVerificationError` when the bytes hold no certificate OpenSSL can read.
    private func presentedCertificateThumbprint() throws(TokenVerificationError) -> String? {  // nil: another transport, or no certificate
        // Another transport presents what its owner configured, which LoginKit cannot see: the
        // thumbprint is then ``Configuration/clientCertificateThumbprint``'s to give.
        guard let client = httpTransport as? CurlHTTPClient else { return nil }
        return try client.withPresentedCertificate { pem throws(TokenVerificationError) in try CertificateThumbprint.sha256(pem: pem) }
    }

    /// `scheme://host:port`, the port made explicit; `nil` for what is not an absolute URL.
    static func urlOrigin(_ url: String) -> String? {
        guard let parts = URLParts(url) else { return nil }
        return "\(parts.scheme)://\(parts.host.lowercased()):\(parts.port ?? (parts.scheme == "https" ? 443 : 80))"
    }

    /// Whether `url` lies under `issuer`: the same origin, a path that continues the issuer's
    /// (`<issuer>/…`, the issuer's trailing `/` aside) and no `.` or `..` segment after it. Two realms
    /// or tenants on one host (`https://id.example/realms/a`, `…/realms/b`) are told apart.
    static func isUnderIssuer(_ url: String, issuer: String) -> Bool {
        guard let target = URLParts(url), let base = URLParts(issuer), let origin = urlOrigin(url), origin == urlOrigin(issuer) else { return false }
        // Compared as bytes: the provider compares paths byte for byte, not as Unicode text.
        var prefix = Array(base.pathAndQuery.utf8)
        if prefix.last != UInt8(ascii: "/") { prefix.append(UInt8(ascii: "/")) }
        let path = Array(target.pathAndQuery.utf8)
        guard path.starts(with: prefix) else { return false }
        let rest = path[prefix.count...].prefix { $0 != UInt8(ascii: "?") }
        return !rest.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).contains(where: isDotSegment)
    }

    /// `.`, `..` or another run of dots, any of them written `%2e`: a segment that climbs or stays.
    private static func isDotSegment(_ segment: ArraySlice<UInt8>) -> Bool {
        var rest = segment
        guard !rest.isEmpty else { return false }
        while let first = rest.first {
            if first == UInt8(ascii: ".") {
                rest = rest.dropFirst()
            } else if first == UInt8(ascii: "%"), rest.dropFirst().first == UInt8(ascii: "2"), rest.dropFirst(2).first.map({ $0 | 0x20 }) == UInt8(ascii: "e") {
                rest = rest.dropFirst(3)
            } else {
                return false
            }
        }
        return true
    }
}

extension OAuth2API.ClientAuthenticationMethod {
    /// `tls_client_auth` or `self_signed_tls_client_auth`: the client authenticates with the TLS
    /// client certificate its transport presents, and calls the provider's `mtls_endpoint_aliases`.
    var usesTLSClientCertificate: Bool {
        self == .tlsClientAuth || self == .selfSignedTLSClientAuth
    }
}

extension OAuth2API.Configuration {
    /// ``clientSecret``, unless ``clientSecretOwner`` names another client or issuer: a secret is
    /// only ever sent as the client, and to the issuer, it was given for.
    var ownClientSecret: String? {
        guard let owner = clientSecretOwner, !owner.owns(clientID: clientID, issuer: issuer) else { return clientSecret }
        return nil
    }
}

extension StoredProfile {
    /// The attribute that records how the profile's client authenticates: an
    /// `OAuth2API.ClientAuthenticationMethod` raw value (`client_secret_basic`, `client_secret_post`,
    /// `client_secret_jwt`, `private_key_jwt`, `tls_client_auth`, `self_signed_tls_client_auth`) or
    /// ``publicClientAuthentication``.
    package static let clientAuthenticationAttribute = "client_auth"

    /// ``clientAuthenticationAttribute``'s value for a public client: `none`.
    package static let publicClientAuthentication = "none"

    /// The `grant` attribute values of a service's own logins, which hold no refresh token and are
    /// renewed by the grant again: `client_credentials`, and `jwt_bearer` (RFC 7523 §2.1, its
    /// assertion asked of the identity source again).
    package static let clientGrants: Set<String> = ["client_credentials", "jwt_bearer"]

    /// Whether a client secret given apart from this profile (the CLI's `LOGINKIT_CLIENT_SECRET`),
    /// for `clientID` at `issuer` (each `nil` when the giver named none), may be sent when this
    /// profile is refreshed or revoked.
    ///
    /// Only for an OpenID Connect profile of that client and issuer, whose login recorded a
    /// secret method. A profile that recorded `none` (a public client), `private_key_jwt` or a TLS
    /// client certificate method takes none; one that recorded nothing takes one only for a
    /// client-credentials or JWT-bearer login, or when the secret names its client.
    package func acceptsClientSecret(clientID: String?, issuer: String?) -> Bool {
        Self.acceptsClientSecret(source: source, attributes: attributes, from: OAuth2API.ClientSecretOwner(clientID: clientID, issuer: issuer))
    }

    /// ``acceptsClientSecret(clientID:issuer:)`` for a profile's `source` and `attributes`.
    package static func acceptsClientSecret(source: CredentialSource, attributes: [String: String], from owner: OAuth2API.ClientSecretOwner) -> Bool {
        guard source.kind == .oauth2, let clientID = source.clientID, owner.owns(clientID: clientID, issuer: source.endpoint) else { return false }
        guard let recorded = attributes[clientAuthenticationAttribute] else {
            return attributes["grant"].map { clientGrants.contains($0) } ?? false || owner.clientID != nil
        }
        let secretMethods: Set<OAuth2API.ClientAuthenticationMethod> = [.basic, .post, .clientSecretJWT]
        return OAuth2API.ClientAuthenticationMethod(rawValue: recorded).map { secretMethods.contains($0) } ?? false
    }
}
