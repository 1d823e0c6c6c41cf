import LoginKitHTTP
import LoginKitJOSE

extension OAuth2API: AuthorizationCodeAPI {
    /// The parameters LoginKit sets itself; ``AuthorizationOptions/extraParameters`` may not repeat them.
    static let reservedAuthorizationParameters: Set<String> = [
        "response_type", "client_id", "redirect_uri", "scope", "state", "nonce", "code_challenge",
        "code_challenge_method", "dpop_jkt", "request_uri",
    ]

    /// A fresh authorization request (RFC 6749 §4.1.1, RFC 7636 §4.3, OIDC Core §3.1.2.1):
    /// `response_type=code`, a new PKCE `S256` challenge, a new `state` and, when the scope has
    /// `openid`, a new `nonce` (32 bytes from a CSPRNG each), with ``Configuration/dpopAlgorithm`` a
    /// new DPoP key whose thumbprint is sent as `dpop_jkt` (RFC 9449 §10), then `login_hint`,
    /// `prompt`, `max_age`, `acr_values` and the extra parameters, on the discovered (or configured)
    /// authorization endpoint. When the request is pushed (RFC 9126, see
    /// ``Configuration/pushesAuthorizationRequests``), those parameters go to the provider's
    /// pushed authorization request endpoint, and the URL carries only `client_id` and the
    /// `request_uri` it answered.
    ///
    /// - Throws: `ServerError` `.misconfigured` when there is no authorization endpoint, the
    ///   discovered one is not `https` (loopback excepted), the provider lists PKCE methods without
    ///   `S256`, or the request must be pushed and the provider advertises no endpoint for it;
    ///   `LoginError` `.invalidConfiguration` for a configured authorization endpoint that is
    ///   not `https` (loopback excepted), for an extra parameter LoginKit sets itself, a negative
    ///   `maxAge`, a DPoP algorithm the provider does not list, or a provider that requires pushed
    ///   requests when ``Configuration/pushesAuthorizationRequests`` is `false`; the pushed
    ///   request's refusal, typed as the token endpoint's; discovery's errors;
    ///   `TokenVerificationError` `.cryptoFailure` when the random generator fails.
    package func authorizationRequest(redirectURI: String, options: AuthorizationOptions) async throws
        -> AuthorizationRequest
    {
        let provider = try await self.metadata()
        let host = URLParts(configuration.issuer)?.host ?? configuration.issuer
        guard let endpoint = provider.authorizationEndpoint else {
            throw ServerError(
                .misconfigured, "\(host) advertises no authorization_endpoint; set OAuth2API.Configuration.endpoints.authorization")
        }
        guard let parts = URLParts(endpoint), parts.scheme == "https" || parts.isLoopback else {
            let shown = TokenEndpoint.quoted(url: endpoint)
            if configuration.endpoints.authorization != nil {
                throw LoginError(
                    .invalidConfiguration, "OAuth2API.Configuration.endpoints.authorization \(shown) is not an https URL")
            }
            throw ServerError(.misconfigured, "\(host)'s authorization_endpoint \(shown) is not an https URL")
        }
        if let methods = provider.codeChallengeMethodsSupported, !methods.isEmpty, !methods.contains("S256") {
            throw ServerError(.misconfigured, "\(host) does not offer PKCE with S256, which LoginKit always uses")
        }
        for (name, _) in options.extraParameters where Self.reservedAuthorizationParameters.contains(name) {
            throw LoginError(
                .invalidConfiguration,
                "the authorization parameter \"\(printableExcerpt(name))\" is set by LoginKit itself; remove it from extraParameters"
            )
        }
        if let maxAge = options.maxAge, maxAge < 0 {
            throw LoginError(.invalidConfiguration, "AuthorizationOptions.maxAge is \(maxAge); it is a number of seconds, 0 or more")
        }
        let pushEndpoint = try pushedAuthorizationRequestEndpoint(provider)
        let proofKey = try newProofKey(provider)
        let scope = options.scope ?? askedScope(provider)
        let pkce = try PKCE.generate()
        let state = try randomURLSafeToken()
        let nonce = try scope.split(separator: " ").contains("openid") ? randomURLSafeToken() : nil

        var parameters: [(String, String)] = [
            ("response_type", "code"), ("client_id", configuration.clientID), ("redirect_uri", redirectURI),
        ]
        if !scope.isEmpty { parameters.append(("scope", scope)) }
        parameters += [("state", state), ("code_challenge", pkce.challenge), ("code_challenge_method", pkce.method)]
        if let nonce { parameters.append(("nonce", nonce)) }
        if let proofKey { parameters.append(("dpop_jkt", proofKey.thumbprint)) }
        if let loginHint = options.loginHint { parameters.append(("login_hint", loginHint)) }
        if let prompt = options.prompt { parameters.append(("prompt", prompt)) }
        if let maxAge = options.maxAge { parameters.append(("max_age", String(maxAge))) }
        if let acrValues = options.acrValues { parameters.append(("acr_values", acrValues)) }
        parameters += options.extraParameters.map { ($0.name, $0.value) }

        if let pushEndpoint {
            let requestURI = try await push(parameters, to: pushEndpoint, provider: provider, scope: scope, proofKey: proofKey)
            parameters = [("client_id", configuration.clientID), ("request_uri", requestURI)]
        }
        let base = String(endpoint.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
        let separator = !base.contains("?") ? "?" : (base.hasSuffix("?") || base.hasSuffix("&") ? "" : "&")
        return AuthorizationRequest(
            url: base + separator + FormURLEncoding.encode(parameters), redirectURI: redirectURI, state: state,
            nonce: nonce,
            codeVerifier: pkce.verifier, scope: scope, issuer: configuration.issuer,
            requiresIssuerInResponse: provider.authorizationResponseIssParameterSupported, advertisedScopes: provider.scopesSupported,
            proofKey: proofKey
        )
    }

    /// Exchanges `code` at the token endpoint (RFC 6749 §4.1.3) with the request's redirect URI and
    /// PKCE verifier (and a proof by its DPoP key, which the credentials keep), verifies the ID token
    /// as every grant does, then checks that its `nonce` is the request's (OIDC Core §3.1.3.7). A
    /// response without `scope` means the scope asked for (§5.1).
    ///
    /// - Throws: `LoginError` `.invalidCredentials` (provider error `invalid_grant`) when the provider
    ///   refuses the code: expired, used already, or the verifier does not match;
    ///   `TokenVerificationError` `.nonceMismatch`; the token endpoint's other errors.
    package func exchangeCode(_ code: String, for request: AuthorizationRequest) async throws -> Credentials {
        var credentials: Credentials
        do {
            credentials = try await tokenRequest(
                [
                    ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", request.redirectURI),
                    ("code_verifier", request.codeVerifier),
                ],
                grant: .other, proof: .key(request.proofKey)
            )
        } catch let error as LoginError where error.providerError == "invalid_grant" {
            throw LoginError(
                .invalidCredentials,
                "the provider refused the authorization code (expired, used already, or the PKCE verifier does not match); sign in again",
                providerError: error.providerError
            )
        }
        if let nonce = request.nonce, let idToken = credentials.idToken {
            guard let sent = try idToken.unverifiedClaims().nonce, constantTimeEquals(sent, nonce) else {
                throw TokenVerificationError(
                    .nonceMismatch,
                    "the ID token's nonce is not the one this sign-in sent: the response was replayed or substituted (OIDC Core §3.1.3.7)"
                )
            }
        }
        if credentials.scope == nil, !request.scope.isEmpty { credentials.scope = request.scope }
        return credentials
    }
}
