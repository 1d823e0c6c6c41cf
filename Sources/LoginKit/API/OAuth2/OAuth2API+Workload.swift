import LoginKitHTTP

extension OAuth2API {
    /// `grant_type` of the JWT-bearer grant (RFC 7523 §2.1).
    static let jwtBearerGrantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"

    /// `source`'s token, fetched over this API's transport: from the environment
    /// ``Configuration/environment`` names when it is set, else this process's. Cached by the
    /// source itself, which asks again when the token nears expiry or its file changed.
    ///
    /// - Throws: what ``IdentitySource/token(transport:)`` throws.
    func identityToken(from source: IdentitySource) async throws -> String {
        if let environment = configuration.environment {
            return try await source.token(transport: httpTransport, environment: environment)
        }
        return try await source.token(transport: httpTransport)
    }

    /// Refuses to send `credential` (what names it in a message: "the client assertion from
    /// file:/…") — a source's token, which the provider accepts from whoever presents it until it
    /// expires — to `url` when `url` is the provider's (`origin` `.provider`: its discovery named
    /// it) and lies on another origin than the issuer's (scheme, host and port: ``urlOrigin(_:)``).
    /// A discovery document naming another host's revocation, device, PAR or token endpoint would
    /// otherwise hand that host a credential valid at the provider. An endpoint the configuration
    /// sets is the caller's choice and goes as it is; a `url` that is no absolute URL is left to
    /// the request, which refuses it before anything is sent. Checked before the source is asked.
    ///
    /// - Throws: `ServerError` `.misconfigured` naming the endpoint and the fix: `setting`, the
    ///   ``Endpoints`` member that sets it (`nil` for the pushed authorization request endpoint,
    ///   which none sets: pushing is then turned off).
    func requireIssuerOrigin(_ url: String, origin: TokenEndpoint.URLOrigin, setting: String?, sending credential: String) throws {
        guard case .provider(let field) = origin, let target = Self.urlOrigin(url), target != Self.urlOrigin(configuration.issuer) else { return }
        let fix =
            setting.map { "set OAuth2API.Configuration.endpoints.\($0) to it if the provider really serves that endpoint there" }
            ?? "set OAuth2API.Configuration.pushesAuthorizationRequests = false to sign in without pushing"
        throw ServerError(
            .misconfigured,
            "\(field) \(TokenEndpoint.quoted(url: url)) lies on another origin than the issuer \(printableExcerpt(configuration.issuer, limit: 200)); \(credential) is a bearer token the provider accepts from whoever presents it, so it goes only to the issuer's origin or to an endpoint the configuration sets, and nothing was sent: \(fix)"
        )
    }

    /// Refuses a token endpoint that may not receive `credential` (what names it in a message:
    /// "the subject token from exec:/…"), a source's token the caller is about to put in a request
    /// of its own, such as a token exchange's `subject_token` or `actor_token`: one that discovery
    /// named on another origin than the issuer's (``requireIssuerOrigin(_:origin:setting:sending:)``).
    /// Loads discovery, so that the caller asks its sources only once the endpoint is known to be
    /// one they may go to.
    ///
    /// - Throws: what ``metadata()`` throws; `ServerError` `.misconfigured` naming the endpoint and
    ///   `endpoints.token`.
    package func requireSourceTokenDestination(sending credential: String) async throws {
        let metadata = try await metadata()
        let tokenOrigin = origin(configuration.endpoints.token, setting: "token", field: "token_endpoint")
        try requireIssuerOrigin(metadata.tokenEndpoint, origin: tokenOrigin, setting: "token", sending: credential)
    }
}
