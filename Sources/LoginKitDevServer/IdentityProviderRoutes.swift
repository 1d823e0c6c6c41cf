// Built with LoginKit's "DevServer" package trait only (Package.swift; docs/architecture.md, "Weight").
#if DevServer
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPTypes
import Hummingbird
import LoginKitHTTP
import LoginKitJOSE
import NIOCore

/// The identity provider's HTTP endpoints: discovery, JWKS, token, pushed authorization requests,
/// device authorization and its verification page, revocation, the JSON login API, and (through
/// `AuthorizationEndpoint`, `ResourceEndpoint` and `WorkloadIssuerEndpoint`) authorization, the
/// protected resource and the workload issuer.
struct IdentityProviderRoutes {
    let provider: IdentityProvider

    /// The largest request body read: 64 KiB.
    static let maximumBody = 64 * 1024

    func register(on router: Router<DevRequestContext>) {
        AuthorizationEndpoint(provider: provider).register(on: router)
        ResourceEndpoint(provider: provider).register(on: router)
        UserInfoEndpoint(provider: provider).register(on: router)
        WorkloadIssuerEndpoint(provider: provider).register(on: router)
        router.get(".well-known/openid-configuration") { _, _ in
            Self.json(.ok, provider.discoveryDocument)
        }
        router.get(".well-known/jwks.json") { _, _ in
            Self.json(.ok, provider.keySet.objectValue ?? [:], cacheControl: "public, max-age=300")
        }
        // Registers public keys for a client's private_key_jwt: a JWKS document (public keys only).
        router.post("test/clients/:id/jwks") { request, context in
            let id = try context.parameters.require("id")
            let body = try await request.body.collect(upTo: Self.maximumBody)
            guard let keys = try? JWKSet(jsonText: Array(body.readableBytesView)).keys, !keys.isEmpty, provider.registerKeys(keys, for: id) else {
                return Self.json(.badRequest, ["error": .string("invalid_request"), "error_description": .string("send a JWKS of public keys for a known client")])
            }
            return Self.json(.ok, ["registered": .number("\(keys.count)")])
        }
        router.post("oauth/token") { request, _ in
            try await handleToken(request)
        }
        router.post("oauth/par") { request, _ in
            try await handlePushedRequest(request)
        }
        router.post("oauth/device_authorization") { request, _ in
            try await withClient(request) { client, fields in
                Self.json(.ok, try provider.deviceAuthorization(client: client, scope: fields["scope"]))
            }
        }
        router.post("oauth/revoke") { request, _ in
            try await withClient(request) { _, fields in
                guard let token = fields["token"] else {
                    throw IdentityProvider.OAuthError(status: 400, code: "invalid_request", description: "token is required")
                }
                provider.revoke(token: token)  // RFC 7009 §2.2: 200 whether or not the token was valid
                return Response(status: .ok, headers: [.cacheControl: "no-store"])
            }
        }
        router.get("device") { request, _ in
            Self.html(Self.devicePage(userCode: request.uri.queryParameters["user_code"].map(String.init) ?? "", message: nil))
        }
        router.post("device") { request, _ in
            let body = try await request.body.collect(upTo: Self.maximumBody)
            let (fields, _) = FormURLEncoding.decodeFields(String(buffer: body))
            let userCode = fields["user_code"] ?? ""
            let approve = fields["action"] != "deny"
            if approve {
                guard let username = fields["username"], let password = fields["password"],
                    provider.user(named: username, password: password) != nil
                else { return Self.html(Self.devicePage(userCode: userCode, message: "Wrong username or password."), status: .unauthorized) }
                let done = provider.decideDevice(userCode: userCode, username: username, approve: true)
                return Self.html(Self.devicePage(userCode: userCode, message: done ? "Approved. You can return to your device." : "Unknown or expired code."))
            }
            let done = provider.decideDevice(userCode: userCode, username: nil, approve: false)
            return Self.html(Self.devicePage(userCode: userCode, message: done ? "Denied." : "Unknown or expired code."))
        }
        router.post("login") { request, _ in
            let body = try await request.body.collect(upTo: Self.maximumBody)
            guard let value = try? JSONValue.parse(Array(body.readableBytesView)),
                let id = value["id"]?.stringValue, let password = value["password"]?.stringValue
            else { return Self.json(.badRequest, ["error": .string("invalid_request"), "error_description": .string("send {\"id\": …, \"password\": …}")]) }
            do {
                let clientID = value["client_id"]?.stringValue ?? "loginkit-cli"
                return Self.json(.ok, try provider.jsonLogin(username: id, password: password, clientID: clientID))
            } catch {
                return Self.oauthError(error)
            }
        }
    }

    /// The token endpoint: the client authenticated (a JWT-bearer grant may name none), then the
    /// `DPoP` header checked (its key binds the tokens every grant issues), then the grant. Every
    /// response carries the DPoP nonce when the token endpoint requires one.
    private func handleToken(_ request: Request) async throws -> Response {
        let proofs = Self.dpopProofs(in: request.headers)
        if provider.presentedCertificate(in: request.headers) != nil { provider.monitor.count(.certificateTokenRequest) }
        var response = try await withClient(request, allowsAnonymousAssertionGrant: true) { client, fields, resources in
            let jkt = try provider.tokenRequestProof(proofs, path: IdentityProvider.tokenPath, enforcesPolicy: true)
            switch fields["grant_type"] {
            case "authorization_code":
                return Self.json(.ok, try provider.authorizationCodeGrant(client: client, fields: fields, jkt: jkt))
            case "password":
                return Self.json(
                    .ok,
                    try provider.passwordGrant(
                        client: client, username: fields["username"], password: fields["password"], scope: fields["scope"], jkt: jkt))
            case "refresh_token":
                return Self.json(
                    .ok, try provider.refreshGrant(client: client, refreshToken: fields["refresh_token"], scope: fields["scope"], jkt: jkt))
            case "client_credentials":
                return Self.json(
                    .ok,
                    try provider.clientCredentialsGrant(
                        client: client, scope: fields["scope"], resources: resources, audience: fields["audience"], jkt: jkt))
            case "urn:ietf:params:oauth:grant-type:token-exchange":
                return Self.json(.ok, try provider.tokenExchangeGrant(client: client, fields: fields, resources: resources, jkt: jkt))
            case "urn:ietf:params:oauth:grant-type:device_code":
                return Self.json(.ok, try provider.deviceCodeGrant(client: client, deviceCode: fields["device_code"], jkt: jkt))
            case "urn:ietf:params:oauth:grant-type:jwt-bearer":
                return Self.json(.ok, try provider.jwtBearerGrant(client: client, fields: fields, resources: resources, jkt: jkt))
            case nil:
                throw IdentityProvider.OAuthError(status: 400, code: "invalid_request", description: "grant_type is required")
            case let other?:
                throw IdentityProvider.OAuthError(status: 400, code: "unsupported_grant_type", description: "\(other) is not supported")
            }
        }
        Self.setDPoPNonce(provider.dpopNonce(at: .authorizationServer), on: &response)
        return response
    }

    /// `POST /oauth/par` (RFC 9126): the client authenticated as at the token endpoint, a `DPoP`
    /// header checked when sent (its key binds the code), 201 with the `request_uri`.
    private func handlePushedRequest(_ request: Request) async throws -> Response {
        provider.monitor.count(.parRequest)
        guard provider.configuration.par != .absent else {
            return Self.json(
                .notFound, ["error": .string("invalid_request"), "error_description": .string("this provider takes no pushed authorization requests")])
        }
        let proofs = Self.dpopProofs(in: request.headers)
        var response = try await withClient(request) { client, fields in
            let jkt = try provider.tokenRequestProof(proofs, path: IdentityProvider.parPath, enforcesPolicy: false)
            return Self.json(.created, try provider.pushAuthorizationRequest(client: client, fields: fields, jkt: jkt))
        }
        Self.setDPoPNonce(provider.dpopNonce(at: .authorizationServer), on: &response)
        return response
    }

    /// The values of the request's `DPoP` header fields, each field on its own.
    static func dpopProofs(in headers: HTTPFields) -> [String] {
        headers.filter { $0.name.canonicalName == "dpop" }.map(\.value)
    }

    /// Sets `DPoP-Nonce` (RFC 9449 §8) on `response` when there is a `nonce`.
    static func setDPoPNonce(_ nonce: String?, on response: inout Response) {
        guard let nonce, let name = HTTPField.Name("DPoP-Nonce") else { return }
        response.headers[name] = nonce
    }

    /// Parses the form body, authenticates the client, runs `body`; OAuth errors become §5.2 responses.
    private func withClient(
        _ request: Request, _ body: (DevClient, [String: String]) throws -> Response
    ) async throws -> Response {
        try await withClient(request) { client, fields, _ in try body(client, fields) }
    }

    /// Like the above, with the repeatable `resource` parameter (RFC 8707) collected. With
    /// `allowsAnonymousAssertionGrant` (the token endpoint) a JWT-bearer grant that names no client
    /// and authenticates none runs for `IdentityProvider.anonymousWorkloadClient`.
    private func withClient(
        _ request: Request, allowsAnonymousAssertionGrant: Bool = false, _ body: (DevClient, [String: String], [String]) throws -> Response
    ) async throws -> Response {
        let buffer = try await request.body.collect(upTo: Self.maximumBody)
        let text = String(buffer: buffer)
        var (fields, duplicates) = FormURLEncoding.decodeFields(text)
        let resources = FormURLEncoding.decode(text).filter { $0.0 == "resource" }.map(\.1)
        duplicates.remove("resource")
        fields["resource"] = nil
        do {
            guard duplicates.isEmpty else {
                throw IdentityProvider.OAuthError(status: 400, code: "invalid_request", description: "repeated parameter \(duplicates.sorted().joined(separator: ", "))")
            }
            // The TLS client certificate the proxy passed on authenticates a client registered for
            // it, and binds the access tokens issued while `body` runs (RFC 8705).
            let certificate = provider.presentedCertificate(in: request.headers)
            let basic = Self.basicCredentials(request.headers[.authorization])
            let client: DevClient
            if allowsAnonymousAssertionGrant, provider.isAnonymousAssertionGrant(basic: basic, fields: fields) {
                client = IdentityProvider.anonymousWorkloadClient
            } else {
                client = try provider.authenticateClient(basic: basic, fields: fields, certificate: certificate)
            }
            return try IdentityProvider.withRequestCertificate(certificate) { try body(client, fields, resources) }
        } catch let error as IdentityProvider.OAuthError {
            return Self.oauthError(error)
        }
    }

    static func basicCredentials(_ header: String?) -> (String, String)? {
        guard let header, header.lowercased().hasPrefix("basic ") else { return nil }
        guard let data = Data(base64Encoded: String(header.dropFirst(6))), let text = String(data: data, encoding: .utf8),
            let colon = text.firstIndex(of: ":")
        else { return nil }
        return (FormURLEncoding.decode("a=" + text[..<colon]).first?.1 ?? "", FormURLEncoding.decode("a=" + text[text.index(after: colon)...]).first?.1 ?? "")
    }

    static func oauthError(_ error: any Error) -> Response {
        guard let error = error as? IdentityProvider.OAuthError else {
            return json(.internalServerError, ["error": .string("server_error")])
        }
        var response = json(.init(code: error.status), ["error": .string(error.code), "error_description": .string(error.description)])
        if error.status == 401 { response.headers[.wwwAuthenticate] = "Basic realm=\"loginkit-dev\"" }
        setDPoPNonce(error.dpopNonce, on: &response)
        return response
    }

    static func json(_ status: HTTPResponse.Status, _ object: [String: JSONValue], cacheControl: String = "no-store") -> Response {
        Response(
            status: status,
            headers: [.contentType: "application/json", .cacheControl: cacheControl],
            body: .init(byteBuffer: ByteBuffer(string: JSONValue.object(object).serialized))
        )
    }

    static func html(_ text: String, status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.contentType: "text/html; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    static func devicePage(userCode: String, message: String?) -> String {
        let safeCode = userCode.filter { $0.isLetter || $0.isNumber || $0 == "-" }
        return """
            <!doctype html><html><head><meta charset="utf-8"><title>LoginKit dev — device login</title></head>
            <body><h1>Sign in a device</h1>\(message.map { "<p>\($0)</p>" } ?? "")
            <form method="post" action="/device">
            <label>Code <input name="user_code" value="\(safeCode)"></label><br>
            <label>Username <input name="username"></label><br>
            <label>Password <input name="password" type="password"></label><br>
            <button name="action" value="approve">Approve</button> <button name="action" value="deny">Deny</button>
            </form></body></html>
            """
    }
}
#endif
