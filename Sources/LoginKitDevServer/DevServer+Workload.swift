// Built with LoginKit's "DevServer" package trait only (Package.swift; docs/architecture.md, "Weight").
#if DevServer
#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif
package import LoginKitJOSE

/// The workload issuer the server also serves, at `<issuer>/workload`: its own key, discovery
/// document (`<issuer>/workload/.well-known/openid-configuration`) and key set
/// (`<issuer>/workload/jwks`), a GitHub-style token endpoint (``gitHubTokenURL``) and a
/// metadata-style one (``metadataTokenURL``). The identity provider trusts its tokens as federated
/// client assertions (``DevClient/federatedCredentials``), as JWT-bearer grant assertions (RFC
/// 7523 §2.1) and as token exchange subject and actor tokens, each for the provider's token
/// endpoint or issuer as audience.
extension DevServer {
    /// The `sub` of the GitHub-style endpoint's tokens.
    package static let gitHubSubject = "repo:example/app:ref:refs/heads/main"
    /// The `aud` of the GitHub-style endpoint's tokens when the request names no audience.
    package static let gitHubDefaultAudience = "https://github.com/example"
    /// The `sub` of the metadata-style endpoint's tokens.
    package static let metadataSubject = "vm:example-vm"
    /// A Kubernetes service account's subject, for tokens a test mints into a file, a program's
    /// output or an environment variable (``DevClient/workloadClient`` trusts it).
    package static let kubernetesSubject = "system:serviceaccount:default:app"

    /// `<issuer>/workload`: the `iss` of workload identity tokens.
    package var workloadIssuer: String {
        provider.workloadIssuer
    }

    /// The bearer token the GitHub-style endpoint takes (`ACTIONS_ID_TOKEN_REQUEST_TOKEN`), random
    /// per server.
    package var gitHubRequestToken: String {
        provider.gitHubRequestToken
    }

    /// `<issuer>/workload/github/token?api-version=2.0`: what `ACTIONS_ID_TOKEN_REQUEST_URL` holds
    /// on a runner (a client appends `&audience=…`).
    package var gitHubTokenURL: String {
        provider.workloadIssuer + "/github/token?api-version=2.0"
    }

    /// `<issuer>/workload/metadata/token`: the metadata-style endpoint (`?resource=…`, header
    /// `Metadata: true`; the token is the response's `access_token`).
    package var metadataTokenURL: String {
        provider.workloadIssuer + "/metadata/token"
    }

    /// A workload identity token: `iss` the workload issuer, `sub`, `aud`, `iat` (`issuedAt`, else
    /// the provider's now), `exp` `lifetime` after it, a fresh `jti`; signed by the workload
    /// issuer's key, or with `signedWithForeignKey` by a key with the same `kid` that it does not
    /// publish (a forgery every check refuses).
    package func mintWorkloadToken(
        subject: String, audience: String, lifetime: Duration = .seconds(300), issuedAt: Date? = nil, signedWithForeignKey: Bool = false
    ) -> String {
        provider.mintWorkloadToken(
            claims: workloadTokenClaims(subject: subject, audience: audience, lifetime: lifetime, issuedAt: issuedAt),
            signedWithForeignKey: signedWithForeignKey)
    }

    /// The claims ``mintWorkloadToken(subject:audience:lifetime:issuedAt:signedWithForeignKey:)``
    /// signs, for a test to change before ``mintWorkloadToken(claims:signedWithForeignKey:)``.
    package func workloadTokenClaims(
        subject: String, audience: String, lifetime: Duration = .seconds(300), issuedAt: Date? = nil
    ) -> [String: JSONValue] {
        provider.workloadTokenClaims(subject: subject, audience: audience, lifetime: lifetime, issuedAt: issuedAt)
    }

    /// `claims`, exactly as given, signed as a workload identity token (or, with
    /// `signedWithForeignKey`, by a key the workload issuer does not publish).
    package func mintWorkloadToken(claims: [String: JSONValue], signedWithForeignKey: Bool = false) -> String {
        provider.mintWorkloadToken(claims: claims, signedWithForeignKey: signedWithForeignKey)
    }

    /// `claims` signed by the server's own key — the main issuer's, which signs its ID and access
    /// tokens and is published at its `jwks_uri` — under the workload key's `kid`: a forgery that
    /// mixes the two issuers' keys up (kid confusion), which the provider refuses.
    package func mintWorkloadTokenWithIssuerKey(claims: [String: JSONValue]) -> String {
        provider.mintWorkloadTokenWithIssuerKey(claims: claims)
    }
}

extension IdentityProvider {
    /// `DevServer.mintWorkloadToken(subject:audience:lifetime:issuedAt:signedWithForeignKey:)`, for the
    /// provider's own callers.
    func mintWorkloadToken(
        subject: String, audience: String, lifetime: Duration = .seconds(300), issuedAt: Date? = nil, signedWithForeignKey: Bool = false
    ) -> String {
        mintWorkloadToken(
            claims: workloadTokenClaims(subject: subject, audience: audience, lifetime: lifetime, issuedAt: issuedAt),
            signedWithForeignKey: signedWithForeignKey)
    }
}
#endif
