// Built with LoginKit's "DevServer" package trait only (Package.swift; docs/architecture.md, "Weight").
#if DevServer
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKitHTTP

extension DevServer {
    /// Whether `token` is an access token this server issued that has neither expired (by the
    /// provider's clock, ``expireAccessTokens()`` included) nor been revoked: the check a resource
    /// server of a test makes (a git or registry server in front of the dev provider). DPoP binding
    /// is not checked; `/api/resource` checks it.
    package func isValidAccessToken(_ token: String) -> Bool {
        provider.isLiveAccessToken(token)
    }
}

extension IdentityProvider {
    /// Whether `token` names an access token record that has not expired.
    func isLiveAccessToken(_ token: String) -> Bool {
        let now = configuration.now()
        guard let record = state.withLock({ $0.accessTokens[token] }) else { return false }
        return record.expiresAt > now
    }
}
#endif
