// Built with LoginKit's "DevServer" package trait only (Package.swift; docs/architecture.md, "Weight").
#if DevServer
import HTTPTypes
import Hummingbird
import LoginKitJOSE
import NIOCore

/// `GET|POST /api/resource`: a protected resource for the tests and the demo (RFC 6750, RFC 9449
/// §7, RFC 9470). 200 with what the token says; 401 with a `WWW-Authenticate` challenge otherwise.
/// The logic is in `IdentityProvider+Resource`.
struct ResourceEndpoint {
    let provider: IdentityProvider

    func register(on router: Router<DevRequestContext>) {
        router.get("api/resource") { request, _ in
            try await handle(request)
        }
        router.post("api/resource") { request, _ in
            try await handle(request)
        }
    }

    /// Reads the body (at most `IdentityProviderRoutes.maximumBody`), authorizes the request (`htu`
    /// is the issuer's base URL and the request's path, or the mutual TLS proxy's for a request that
    /// came with a TLS client certificate), and answers with the token's subject, client, scope,
    /// type, key thumbprint, certificate thumbprint (`x5t#S256`) and `acr`, and the body's size.
    private func handle(_ request: Request) async throws -> Response {
        provider.monitor.count(.resourceRequest)
        let body = try await request.body.collect(upTo: IdentityProviderRoutes.maximumBody)
        var response: Response
        do throws(IdentityProvider.ResourceRefusal) {
            let record = try provider.authorizeResource(
                authorization: request.headers[values: .authorization], proofs: IdentityProviderRoutes.dpopProofs(in: request.headers),
                method: request.method.rawValue, path: request.uri.path, certificate: provider.presentedCertificate(in: request.headers))
            var reply: [String: JSONValue] = [
                "sub": .string(record.subject), "client_id": .string(record.clientID), "scope": .string(record.scope),
                "method": .string(request.method.rawValue), "token_type": .string(record.jkt == nil ? "Bearer" : "DPoP"),
                "body_bytes": .number("\(body.readableBytes)"),
            ]
            if let jkt = record.jkt { reply["jkt"] = .string(jkt) }
            if let x5t = record.x5t { reply["x5t#S256"] = .string(x5t) }
            if let acr = record.acr { reply["acr"] = .string(acr) }
            response = IdentityProviderRoutes.json(.ok, reply)
        } catch {
            response = Self.response(refusing: error)
        }
        IdentityProviderRoutes.setDPoPNonce(provider.dpopNonce(at: .resource), on: &response)
        return response
    }

    /// The refusal as a response: its status, a JSON body with the error, and the challenge (RFC
    /// 6750 §3): the refusal's scheme with `error`, `error_description` and the step-up parameters,
    /// or, when no usable credentials came, a `Bearer` and a `DPoP` challenge without an error.
    static func response(refusing refusal: IdentityProvider.ResourceRefusal) -> Response {
        var response = IdentityProviderRoutes.json(
            .init(code: refusal.status), ["error": .string(refusal.code), "error_description": .string(refusal.description)])
        if let scheme = refusal.scheme {
            var parameters = [("error", refusal.code), ("error_description", refusal.description)]
            if let acrValues = refusal.acrValues { parameters.append(("acr_values", acrValues)) }
            if let maxAge = refusal.maxAge { parameters.append(("max_age", "\(maxAge)")) }
            let rendered = parameters.map { name, value in "\(name)=\(quoted(value))" }
            response.headers[values: .wwwAuthenticate] = [scheme + " " + rendered.joined(separator: ", ")]
        } else {
            let algorithms = IdentityProvider.dpopAlgorithms.map(\.rawValue).joined(separator: " ")
            response.headers[values: .wwwAuthenticate] = ["Bearer realm=\"loginkit-dev\"", "DPoP algs=\(quoted(algorithms))"]
        }
        IdentityProviderRoutes.setDPoPNonce(refusal.dpopNonce, on: &response)
        return response
    }

    /// `value` as an RFC 9110 quoted-string of the characters RFC 6750 §3 allows in its parameters
    /// (printable ASCII; `"` and `\` become `'`, anything else a space).
    static func quoted(_ value: String) -> String {
        let safe = value.unicodeScalars.map { scalar -> Character in
            switch scalar.value {
            case 0x22, 0x5C: "'"
            case 0x20...0x7E: Character(scalar)
            default: " "
            }
        }
        return "\"" + String(safe) + "\""
    }
}
#endif
