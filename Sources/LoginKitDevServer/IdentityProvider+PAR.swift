// Built with LoginKit's "DevServer" package trait only (Package.swift; docs/architecture.md, "Weight").
#if DevServer
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKitJOSE

/// Pushed authorization requests (RFC 9126): the client posts the authorization parameters,
/// authenticated as at the token endpoint, and gets a `request_uri` the authorization endpoint takes
/// once, within a minute, from the same client. HTTP lives in `IdentityProviderRoutes`.
extension IdentityProvider {
    static let parPath = "/oauth/par"
    static let requestURIPrefix = "urn:ietf:params:oauth:request_uri:"
    /// How long a pushed request waits for the browser.
    static let pushedRequestLifetime = 60
    /// Client authentication fields, never kept with a pushed request.
    static let clientAuthenticationFields = ["client_secret", "client_assertion", "client_assertion_type"]

    /// Checks and keeps a pushed request of `client` (RFC 9126 §2.1): the same checks the
    /// authorization endpoint makes, no `request_uri` inside, and the code bound to `jkt` (the
    /// request's DPoP proof, RFC 9449 §10.1) unless `dpop_jkt` names another key.
    func pushAuthorizationRequest(client: DevClient, fields: [String: String], jkt: String?) throws(OAuthError) -> [String: JSONValue] {
        guard fields["request_uri"] == nil else {
            throw OAuthError(status: 400, code: "invalid_request", description: "a pushed request cannot carry request_uri")
        }
        if let clientID = fields["client_id"], clientID != client.id {
            throw OAuthError(status: 400, code: "invalid_request", description: "client_id is not the authenticated client")
        }
        guard let redirectURI = fields["redirect_uri"], Self.redirectURI(redirectURI, isRegisteredIn: client.redirectURIs) else {
            throw OAuthError(status: 400, code: "invalid_request", description: "redirect_uri is missing or not registered for the client")
        }
        var pushed = fields
        for name in Self.clientAuthenticationFields { pushed[name] = nil }
        pushed["client_id"] = client.id
        if let jkt {
            if let named = fields["dpop_jkt"], named != jkt {
                throw OAuthError(status: 400, code: "invalid_dpop_proof", description: "dpop_jkt is not the thumbprint of the DPoP proof's key")
            }
            pushed["dpop_jkt"] = jkt
        }
        _ = try authorizationParameters(pushed)
        let now = configuration.now()
        let requestURI = Self.requestURIPrefix + Self.randomToken()
        let request = AuthorizationCodes.PushedRequest(
            clientID: client.id, fields: pushed, expiresAt: now.addingTimeInterval(Double(Self.pushedRequestLifetime)))
        guard authorizationCodes.push(request, as: requestURI, now: now) else {
            throw OAuthError(status: 503, code: "temporarily_unavailable", description: "too many pushed requests are pending; try again later")
        }
        return ["request_uri": .string(requestURI), "expires_in": .number("\(Self.pushedRequestLifetime)")]
    }
}
#endif
