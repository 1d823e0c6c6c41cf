import Foundation
import LoginKit
import LoginKitJOSE
import LoginKitTestSupport
import Testing

/// Where the Authlib server and its Python are.
enum AuthlibServer {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized.path
    static let python = root + "/.venv-oidc/bin/python"
}

/// LoginKit's server-side client against an authorization server it has no code for: Authlib's
/// (scripts/authlib-server.py, in the .venv-oidc that `make test` makes), which checks client
/// assertions with its own RFC 7523 code, issues RFC 9068 JWT access tokens for the requested
/// resources and exchanges its tokens (RFC 8693). Skipped without the venv, unless
/// LOGINKIT_REQUIRE_OIDC_PROVIDER=1 (make test) makes that a failure.
@Suite(
    .enabled(
        if: FileManager.default.isExecutableFile(atPath: AuthlibServer.python)
            || ProcessInfo.processInfo.environment["LOGINKIT_REQUIRE_OIDC_PROVIDER"] == "1",
        "needs .venv-oidc (scripts/oidc-provider-venv.sh)"),
    .timeLimit(.minutes(2)))
struct ThirdPartyServerSideTests {
    static let root = AuthlibServer.root
    static let python = AuthlibServer.python
    static let secret = "third-party-secret-long-enough-for-hs256-0123456789"

    /// Runs `body` with the Authlib server, its clients `rsa-client`, `ec-client` (keys) and
    /// `secret-client` (secret), and an HTTP client.
    func withAuthlib(keys: [String: SigningKey], _ body: (String, CurlHTTPClient) async throws -> Void) async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.python), "run scripts/oidc-provider-venv.sh (make test does)")
        try await withTemporaryDirectory { directory in
            var clients: [JSONValue] = [.object(["client_id": .string("secret-client"), "client_secret": .string(Self.secret)])]
            for (id, key) in keys.sorted(by: { $0.key < $1.key }) {
                clients.append(.object(["client_id": .string(id), "jwks": .object(["keys": .array([try key.publicJWK().json])])]))
            }
            try JSONValue.array(clients).serialized.write(toFile: directory + "/clients.json", atomically: true, encoding: .utf8)
            let server = try ChildProcess(Self.python, [Self.root + "/scripts/authlib-server.py", directory + "/clients.json"])
            defer { server.kill() }
            var lines = server.lines.makeAsyncIterator()
            let line = try #require(await lines.next(), "the Authlib server did not start")
            let issuer = String(line.dropFirst("issuer: ".count))
            try await CurlHTTPClient.withClient { client in try await body(issuer, client) }
        }
    }

    func api(_ issuer: String, _ client: CurlHTTPClient, clientID: String, key: SigningKey? = nil, method: OAuth2API.ClientAuthenticationMethod = .automatic)
        -> OAuth2API
    {
        var configuration = OAuth2API.Configuration(issuer: issuer, clientID: clientID, clientSecret: key == nil ? Self.secret : nil)
        configuration.clientAssertionKey = key
        configuration.clientAuthenticationMethod = method
        configuration.scope = ""
        return OAuth2API(configuration: configuration, transport: client)
    }

    @Test func privateKeyJWTWithRS256AndES256ResourcesAndTokenExchange() async throws {
        let rsa = try SigningKey.generate(.rs256, keyID: "rsa-1")
        let ec = try SigningKey.generate(.es256, keyID: "ec-1")
        try await withAuthlib(keys: ["rsa-client": rsa, "ec-client": ec]) { issuer, client in
            for (id, key) in [("rsa-client", rsa), ("ec-client", ec)] {
                let api = api(issuer, client, clientID: id, key: key)
                #expect(try await api.clientAuthenticationMethodInUse() == .privateKeyJWT)
                // Two requests: two assertions (Authlib refuses a reused jti).
                for _ in 0..<2 { #expect(try await api.clientCredentials(scope: nil).accessToken != nil) }

                // Resource indicators through the per-target cache: the JWT access token names them.
                let tokens = ClientCredentialsTokens(api: api, store: InMemoryTokenStore(), baseProfile: id)
                let billing = try await tokens.accessToken(for: TokenTarget(resources: ["https://billing.example/"]))
                let claims = try JWTClaims(payload: CompactJWS(parsing: billing).payload)
                #expect(claims.audience == ["https://billing.example/"])
                #expect(claims.issuer == issuer)
                #expect(try await tokens.accessToken(for: TokenTarget(resources: ["https://billing.example/"])) == billing)

                // Token exchange of that token for another audience.
                let exchanged = try await api.exchangeToken(TokenExchangeRequest(subjectToken: billing, target: TokenTarget(audience: "https://ledger.example/")))
                #expect(exchanged.issuedTokenType == TokenExchangeRequest.accessTokenType)
                #expect(try JWTClaims(payload: CompactJWS(parsing: exchanged.token).payload).audience == ["https://ledger.example/"])
                let refused = await thrown { try await api.exchangeToken(TokenExchangeRequest(subjectToken: "not-issued-here")) }
                #expect((refused as? LoginError)?.code == .subjectTokenRejected)
            }
            // A key the server does not know for the client, and the wrong audience, are refused.
            let stranger = api(issuer, client, clientID: "ec-client", key: try SigningKey.generate(.es256, keyID: "ec-1"))
            #expect((await thrown { try await stranger.clientCredentials(scope: nil) } as? LoginError)?.code == .invalidClient)
            var elsewhere = api(issuer, client, clientID: "ec-client", key: ec).configuration
            elsewhere.clientAssertionAudience = .custom("https://elsewhere.example/token")
            let wrongAudience = OAuth2API(configuration: elsewhere, transport: client)
            #expect((await thrown { try await wrongAudience.clientCredentials(scope: nil) } as? LoginError)?.code == .invalidClient)
        }
    }

    @Test(arguments: [OAuth2API.ClientAuthenticationMethod.basic, .post, .clientSecretJWT, .automatic])
    func secretMethods(_ method: OAuth2API.ClientAuthenticationMethod) async throws {
        try await withAuthlib(keys: [:]) { issuer, client in
            let api = api(issuer, client, clientID: "secret-client", method: method)
            let credentials = try await api.clientCredentials(scope: nil)
            #expect(credentials.accessToken != nil)
            var wrong = api.configuration
            wrong.clientSecret = String(Self.secret.reversed())
            let refused = await thrown { try await OAuth2API(configuration: wrong, transport: client).clientCredentials(scope: nil) }
            #expect((refused as? LoginError)?.code == .invalidClient)
        }
    }
}
