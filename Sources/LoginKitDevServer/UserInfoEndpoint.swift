// Built with LoginKit's "DevServer" package trait only (Package.swift; docs/architecture.md, "Weight").
#if DevServer
import HTTPTypes
import Hummingbird
import LoginKitJOSE

extension IdentityProvider {
    /// Where the userinfo endpoint is served (discovery's `userinfo_endpoint`).
    static let userinfoPath = "/userinfo"

    /// What `/userinfo` answers for an access token of `record`: `sub`, `preferred_username`,
    /// `name` and `nickname` (the user's nickname), `email` — whatever the scope, and whether or
    /// not the ID tokens carry them. `nil` for a token that is no user's (a client's own).
    func userInfo(for record: AccessRecord) -> [String: JSONValue]? {
        let configuration = self.configuration
        guard let user = configuration.users.first(where: { $0.subject == record.subject }) else { return nil }
        var claims: [String: JSONValue] = [
            "sub": .string(configuration.userinfoSubjectOverride ?? user.subject), "preferred_username": .string(user.username),
        ]
        if let nickname = user.nickname {
            claims["name"] = .string(nickname)
            claims["nickname"] = .string(nickname)
        }
        if let email = user.email { claims["email"] = .string(email) }
        return claims
    }
}

/// `GET /userinfo` (OpenID Connect Core §5.3): the user's claims for a live access token, checked
/// as `/api/resource` checks it — `Authorization: Bearer`, or `DPoP` with a proof by the token's key
/// (`htu` the issuer's `/userinfo`, `ath`, the nonce when one is required), the TLS client
/// certificate a certificate-bound token needs — and with the same authentication requirements,
/// if the configuration sets any. 200 with a JSON object; 401 with a
/// `WWW-Authenticate` challenge otherwise.
struct UserInfoEndpoint {
    let provider: IdentityProvider

    func register(on router: Router<DevRequestContext>) {
        router.get("userinfo") { request, _ in
            handle(request)
        }
    }

    private func handle(_ request: Request) -> Response {
        var response: Response
        do throws(IdentityProvider.ResourceRefusal) {
            let record = try provider.authorizeResource(
                authorization: request.headers[values: .authorization], proofs: IdentityProviderRoutes.dpopProofs(in: request.headers),
                method: request.method.rawValue, path: request.uri.path, certificate: provider.presentedCertificate(in: request.headers))
            guard let claims = provider.userInfo(for: record) else {
                throw IdentityProvider.ResourceRefusal(
                    status: 401, scheme: record.jkt == nil ? "Bearer" : "DPoP", code: "invalid_token",
                    description: "the access token is a client's own, not a user's")
            }
            response = IdentityProviderRoutes.json(.ok, claims)
        } catch {
            response = ResourceEndpoint.response(refusing: error)
        }
        IdentityProviderRoutes.setDPoPNonce(provider.dpopNonce(at: .resource), on: &response)
        return response
    }
}
#endif
