// Built with LoginKit's "DevServer" package trait only (Package.swift; docs/architecture.md, "Weight").
#if DevServer
import HTTPTypes
import Hummingbird
import NIOCore

/// `GET /oauth/authorize` (the sign-in form) and `POST /oauth/authorize` (its submission); the logic
/// is in `IdentityProvider+AuthorizationCode`.
struct AuthorizationEndpoint {
    let provider: IdentityProvider

    func register(on router: Router<DevRequestContext>) {
        router.get("oauth/authorize") { request, _ in
            Self.response(provider.startAuthorization(query: request.uri.query ?? ""))
        }
        router.post("oauth/authorize") { request, _ in
            let body = try await request.body.collect(upTo: IdentityProviderRoutes.maximumBody)
            return Self.response(provider.decideAuthorization(form: String(buffer: body)))
        }
    }

    static func response(_ step: IdentityProvider.AuthorizationStep) -> Response {
        switch step {
        case .page(let status, let html):
            var response = IdentityProviderRoutes.html(html, status: .init(code: status))
            response.headers[.cacheControl] = "no-store"
            return response
        case .redirect(let status, let location):
            return Response(status: .init(code: status), headers: [.location: location, .cacheControl: "no-store"])
        }
    }
}
#endif
