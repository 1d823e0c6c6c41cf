// Built with LoginKit's "DevServer" package trait only (Package.swift; docs/architecture.md, "Weight").
#if DevServer
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPTypes
import Hummingbird
import LoginKitJOSE

/// The workload issuer's HTTP endpoints under `/workload`: its discovery document and key set, and
/// two token endpoints shaped as the platforms' that hand workloads their identity tokens:
///
/// - `GET /workload/github/token[?api-version=2.0][&audience=AUD]` with `Authorization: bearer
///   <DevServer.gitHubRequestToken>`, as GitHub Actions' `ACTIONS_ID_TOKEN_REQUEST_URL`: 200
///   `{"count":1,"value":"<jwt>"}` for `DevServer.gitHubSubject`, `aud` the audience asked for
///   (`DevServer.gitHubDefaultAudience` when none); 401 without that bearer.
/// - `GET /workload/metadata/token[?resource=AUD]` with `Metadata: true`, as Azure's instance
///   metadata service: 200 `{"access_token":"<jwt>","expires_in":"300","token_type":"Bearer",…}` for
///   `DevServer.metadataSubject`, `aud` the resource (the provider's issuer when none); 400
///   `{"error":"bad_request"}` without the header.
///
/// Each token issued is counted (`DevServerMonitor.workloadTokensIssued`). The logic is in
/// `IdentityProvider+Workload`.
struct WorkloadIssuerEndpoint {
    let provider: IdentityProvider

    /// How long the tokens of the two token endpoints live: 300 s.
    static let tokenLifetime: Duration = .seconds(300)

    func register(on router: Router<DevRequestContext>) {
        router.get("workload/.well-known/openid-configuration") { _, _ in
            IdentityProviderRoutes.json(.ok, provider.workloadDiscoveryDocument)
        }
        router.get("workload/jwks") { _, _ in
            IdentityProviderRoutes.json(.ok, provider.workloadKeySet.objectValue ?? [:], cacheControl: "public, max-age=300")
        }
        router.get("workload/github/token") { request, _ in
            gitHubToken(request)
        }
        router.get("workload/metadata/token") { request, _ in
            metadataToken(request)
        }
    }

    /// The GitHub-style endpoint: the request token checked, then a token for the audience asked for.
    private func gitHubToken(_ request: Request) -> Response {
        let authorization = request.headers[.authorization] ?? ""
        let scheme = authorization.prefix(7).lowercased()
        let presented = Array(authorization.dropFirst(7).utf8)
        guard scheme == "bearer ", HMACSHA256.constantTimeEqual(presented, Array(provider.gitHubRequestToken.utf8)) else {
            var response = IdentityProviderRoutes.json(
                .unauthorized, ["message": .string("Bad credentials: send Authorization: bearer with the request token (ACTIONS_ID_TOKEN_REQUEST_TOKEN)")])
            response.headers[.wwwAuthenticate] = "Bearer realm=\"loginkit-dev-workload\""
            return response
        }
        let audience = Self.parameter("audience", of: request) ?? DevServer.gitHubDefaultAudience
        var claims = provider.workloadTokenClaims(
            subject: DevServer.gitHubSubject, audience: audience, lifetime: Self.tokenLifetime, issuedAt: nil)
        claims["repository"] = .string("example/app")
        claims["ref"] = .string("refs/heads/main")
        claims["actor"] = .string("example")
        provider.monitor.count(.workloadTokenIssued)
        return IdentityProviderRoutes.json(.ok, ["count": .number("1"), "value": .string(provider.mintWorkloadToken(claims: claims))])
    }

    /// The metadata-style endpoint: the `Metadata: true` header required, then a token for the resource.
    private func metadataToken(_ request: Request) -> Response {
        let metadata = request.headers.first { $0.name.canonicalName == "metadata" }?.value
        guard metadata?.lowercased() == "true" else {
            return IdentityProviderRoutes.json(
                .badRequest, ["error": .string("bad_request"), "error_description": .string("Required metadata header not specified")])
        }
        let audience = Self.parameter("resource", of: request) ?? provider.issuer
        let issuedAt = provider.configuration.now()
        let claims = provider.workloadTokenClaims(
            subject: DevServer.metadataSubject, audience: audience, lifetime: Self.tokenLifetime, issuedAt: issuedAt)
        provider.monitor.count(.workloadTokenIssued)
        let lifetime = Self.tokenLifetime.wholeSeconds
        // The instance metadata service writes its numbers as strings.
        return IdentityProviderRoutes.json(
            .ok,
            [
                "access_token": .string(provider.mintWorkloadToken(claims: claims)), "token_type": .string("Bearer"),
                "expires_in": .string("\(lifetime)"), "expires_on": .string("\(Int(issuedAt.timeIntervalSince1970) + lifetime)"),
                "resource": .string(audience),
            ])
    }

    /// The query parameter `name`, percent-decoded; `nil` when absent or empty.
    private static func parameter(_ name: String, of request: Request) -> String? {
        guard let value = request.uri.queryParameters[Substring(name)], !value.isEmpty else { return nil }
        return String(value)
    }
}
#endif
