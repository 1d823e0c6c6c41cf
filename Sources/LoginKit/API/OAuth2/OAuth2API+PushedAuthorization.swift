import LoginKitHTTP
import LoginKitJOSE

extension OAuth2API {
    /// The endpoint an authorization request is pushed to (RFC 9126), per
    /// ``Configuration/pushesAuthorizationRequests`` and the provider's metadata; `nil`: not pushed.
    ///
    /// - Throws: `LoginError` `.invalidConfiguration` when the provider requires pushed requests and
    ///   the configuration says never; `ServerError` `.misconfigured` when the request must be pushed
    ///   (the configuration says always, or the provider requires it) and the provider advertises no
    ///   `pushed_authorization_request_endpoint`.
    func pushedAuthorizationRequestEndpoint(_ provider: Metadata) throws -> String? {
        switch configuration.pushesAuthorizationRequests {
        case false?:
            guard !provider.requiresPushedAuthorizationRequests else {
                throw LoginError(
                    .invalidConfiguration,
                    "\(host) requires pushed authorization requests (require_pushed_authorization_requests) but OAuth2API.Configuration.pushesAuthorizationRequests is false; set it to nil or true"
                )
            }
            return nil
        case true?:
            guard let endpoint = provider.pushedAuthorizationRequestEndpoint else {
                throw ServerError(
                    .misconfigured,
                    "\(host) advertises no pushed_authorization_request_endpoint, which OAuth2API.Configuration.pushesAuthorizationRequests = true needs; set it to nil to sign in without pushing"
                )
            }
            return endpoint
        case nil:
            if let endpoint = provider.pushedAuthorizationRequestEndpoint { return endpoint }
            guard !provider.requiresPushedAuthorizationRequests else {
                throw ServerError(
                    .misconfigured, "\(host) requires pushed authorization requests but advertises no pushed_authorization_request_endpoint")
            }
            return nil
        }
    }

    /// Pushes the authorization request `parameters` to `url` (RFC 9126 §2.1), the client
    /// authenticated as at the token endpoint and, with `proofKey`, a `DPoP` proof (RFC 9449 §10.1);
    /// returns the `request_uri` the provider answered (201, or any 2xx).
    ///
    /// - Throws: the provider's refusal, typed as the token endpoint's (`LoginError` `.invalidClient`,
    ///   `.invalidScope`…, `ServerError`); `ServerError` `.malformedResponse` for an answer without a
    ///   usable `request_uri`; `ServerError` `.misconfigured` for a `url` on another origin than the
    ///   issuer's when the client authenticates with a source's token (nothing sent); `NetworkError`.
    func push(
        _ parameters: [(String, String)], to url: String, provider: Metadata, scope: String, proofKey: DPoPKey?
    ) async throws -> String {
        let parOrigin = TokenEndpoint.URLOrigin.provider("\(host)'s pushed_authorization_request_endpoint")
        let authentication = try await authentication(provider, to: url, origin: parOrigin, setting: nil)
        // `client_id` once: HTTP Basic leaves it in the form (RFC 9126 §2.1's example); every other
        // client authentication adds it itself.
        var fields = parameters
        if case .basic = authentication {} else { fields.removeAll { $0.0 == "client_id" } }
        let (response, json, _) = try await endpoint.postForm(
            url, origin: parOrigin, fields: fields, authentication: authentication, proof: proofMaker(proofKey))
        let scopes = TokenEndpoint.ScopeContext(asked: scope.isEmpty ? nil : scope, advertised: provider.scopesSupported)
        if let error = TokenEndpoint.error(for: response, json: json, grant: .other, host: host, scopes: scopes) { throw error }
        try TokenEndpoint.requireJSON(response, host: host)
        // A URI (RFC 3986): printable ASCII, and short enough for the browser's address bar.
        guard let requestURI = json?["request_uri"]?.stringValue, (1...2048).contains(requestURI.utf8.count),
            requestURI.utf8.allSatisfy({ (0x21...0x7E).contains($0) })
        else {
            throw ServerError(.malformedResponse, "\(host)'s pushed authorization response has no usable request_uri (RFC 9126 §2.2)")
        }
        return requestURI
    }
}
