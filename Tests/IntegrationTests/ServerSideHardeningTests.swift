import Foundation
@testable import LoginKit
import LoginKitDevServer
import LoginKitHTTP
import LoginKitJOSE
import LoginKitMocks
import LoginKitTestSupport
import Testing

/// The server-side clients' defences against hostile or mistaken input, each pinned by a test.
@Suite(.timeLimit(.minutes(2)))
struct ServerSideHardeningTests {
    /// An OAuth2API over a mock transport, discovery off: every token response is the test's.
    func mockAPI(_ transport: MockHTTPTransport, clock: ManualClock, clientID: String = "svc") -> OAuth2API {
        var configuration = OAuth2API.Configuration(issuer: "https://id.example", clientID: clientID, clientSecret: "s")
        configuration.usesDiscovery = false
        configuration.endpoints.token = "https://id.example/token"
        configuration.scope = ""
        return OAuth2API(configuration: configuration, transport: transport, now: { clock.now })
    }

    func tokenResponse(_ fields: [String: JSONValue]) -> (HTTPResponse, Data) {
        (HTTPResponse(status: .ok, headerFields: [.contentType: "application/json"]), Data(JSONValue.object(fields).serialized.utf8))
    }

    @Test func aProfileOfAnotherClientIsNeitherServedNorOverwritten() async throws {
        try await withFixture(clientID: "loginkit-service", clientSecret: "dev-secret") { fixture in
            let store = InMemoryTokenStore()
            // A user's login in the base profile: never the empty target's.
            _ = try await fixture.service().logIn(for: demo, with: "demo")
            let userLogin = try await fixture.store.profile(named: "default")
            let first = ClientCredentialsTokens(api: fixture.api, store: store, clock: fixture.clock)
            _ = try await first.accessToken()
            var otherConfiguration = fixture.api.configuration
            otherConfiguration.clientID = "loginkit-signed"
            otherConfiguration.clientSecret = "dev-secret-for-client-secret-jwt-0123456789"
            let other = ClientCredentialsTokens(
                api: OAuth2API(configuration: otherConfiguration, transport: fixture.client, now: { fixture.clock.now }), store: store, clock: fixture.clock)
            let requests = fixture.tokenRequests
            let error = await thrown { try await other.accessToken() }
            #expect((error as? LoginRequiredError)?.code == .sourceMismatch)
            #expect(fixture.tokenRequests == requests)  // nothing sent
            #expect(try await store.profile(named: ClientCredentialsTokens.profileName(base: "default", target: TokenTarget()))?.source.clientID == "loginkit-service")
            #expect(try await fixture.store.profile(named: "default")?.credentials == userLogin?.credentials)
        }
    }

    @Test func aTokenWithoutExpiryIsServedForFiveMinutesOnly() async throws {
        let transport = MockHTTPTransport()
        let clock = ManualClock()
        let tokens = ClientCredentialsTokens(api: mockAPI(transport, clock: clock), store: InMemoryTokenStore(), clock: clock)
        async let first = tokens.accessToken()
        await transport.nextRequest().resume(returning: tokenResponse(["access_token": .string("t1"), "token_type": .string("Bearer")]))
        #expect(try await first == "t1")
        #expect(try await tokens.accessToken() == "t1")
        clock.advance(by: ClientCredentialsTokens.lifetimeWithoutExpiry)
        async let second = tokens.accessToken()
        await transport.nextRequest().resume(returning: tokenResponse(["access_token": .string("t2"), "token_type": .string("Bearer")]))
        #expect(try await second == "t2")
        #expect(transport.requestCount == 2)
    }

    @Test func anInvalidatedTokenIsReplaced() async throws {
        try await withFixture(clientID: "loginkit-service", clientSecret: "dev-secret") { fixture in
            let tokens = ClientCredentialsTokens(api: fixture.api, store: fixture.store, clock: fixture.clock)
            let first = try await tokens.accessToken(for: TokenTarget(resources: ["https://api.example/"]))
            try await tokens.invalidate(first, for: TokenTarget(resources: ["https://api.example/"]))
            let second = try await tokens.accessToken(for: TokenTarget(resources: ["https://api.example/"]))
            #expect(first != second)
            #expect(fixture.tokenRequests == 2)
            try await tokens.invalidate(first, for: TokenTarget(resources: ["https://api.example/"]))  // an old token: nothing dropped
            #expect(try await tokens.accessToken(for: TokenTarget(resources: ["https://api.example/"])) == second)
        }
    }

    @Test func aValidityBeyondTheLifetimeDoesNotAskPerCall() async throws {
        try await withFixture(clientID: "loginkit-service", clientSecret: "dev-secret", configure: { $0.accessTokenLifetime = .seconds(300) }) { fixture in
            let tokens = ClientCredentialsTokens(api: fixture.api, store: fixture.store, clock: fixture.clock)
            for _ in 0..<3 { _ = try await tokens.accessToken(minimumValidity: .seconds(600)) }
            #expect(fixture.tokenRequests == 1)
            fixture.clock.advance(by: .seconds(151))  // past half the lifetime: a new one
            _ = try await tokens.accessToken(minimumValidity: .seconds(600))
            #expect(fixture.tokenRequests == 2)
        }
    }

    @Test func removeAllWinsOverAnExchangeUnderWay() async throws {
        let transport = MockHTTPTransport()
        let clock = ManualClock()
        let exchanger = TokenExchanger(api: mockAPI(transport, clock: clock), clock: clock)
        let request = TokenExchangeRequest(subjectToken: "subject", target: TokenTarget(audience: "a"))
        let answer = tokenResponse([
            "access_token": .string("x1"), "issued_token_type": .string(TokenExchangeRequest.accessTokenType), "expires_in": .number("3600"),
        ])
        async let first = exchanger.exchange(request)
        let call = await transport.nextRequest()
        exchanger.removeAll()  // the subject logged out while the exchange was under way
        call.resume(returning: answer)
        #expect(try await first.token == "x1")
        transport.enqueue(status: .ok, headers: [.contentType: "application/json"], body: answer.1)
        _ = try await exchanger.exchange(request)
        #expect(transport.requestCount == 2)  // the first result was not cached
    }

    @Test func anAssertionIsNeverMadeForATokenEndpointOnAnotherOrigin() async throws {
        let transport = MockHTTPTransport()
        var configuration = OAuth2API.Configuration(issuer: "https://id.example", clientID: "c")
        configuration.clientAssertionKey = try SigningKey.generate(.es256, keyID: nil)
        let api = OAuth2API(configuration: configuration, transport: transport)
        async let refused = thrown { try await api.clientCredentials(scope: nil) }
        // Discovery names another provider's token endpoint (audience injection).
        await transport.nextRequest().resume(returning: tokenResponse([
            "issuer": .string("https://id.example"), "token_endpoint": .string("https://honest.example/token"),
        ]))
        let error = await refused
        #expect((error as? ServerError)?.code == .misconfigured)
        #expect(transport.requestCount == 1)  // the discovery request only: no assertion left
        #expect(OAuth2API.urlOrigin("https://ID.example/token") == OAuth2API.urlOrigin("https://id.example:443/x"))
        #expect(OAuth2API.urlOrigin("http://id.example/token") != OAuth2API.urlOrigin("https://id.example/"))
    }

    @Test func theDevProviderRefusesForeignAudiencesBadTargetsAndKeysForPublicClients() async throws {
        let key = try SigningKey.generate(.es256, keyID: "k1")
        try await withKeyClient(key) { fixture, configuration, _ in
            // An assertion with a second audience beside the token endpoint.
            let metadata = try await fixture.api.metadata()
            let now = Int(fixture.clock.now.timeIntervalSince1970)
            let claims: [String: JSONValue] = [
                "iss": .string("jwt-client"), "sub": .string("jwt-client"), "jti": .string(UUID().uuidString),
                "aud": .array([.string(metadata.tokenEndpoint), .string("https://elsewhere.example")]),
                "iat": .number("\(now)"), "exp": .number("\(now + 60)"),
            ]
            let assertion = try ClientAssertionSigner.privateKey(key).sign(claims: claims)
            let form = FormURLEncoding.encode([
                ("grant_type", "client_credentials"), ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
                ("client_assertion", assertion),
            ])
            let post = try #require(HTTPRequest(method: .post, url: metadata.tokenEndpoint, headerFields: [.contentType: "application/x-www-form-urlencoded"]))
            #expect(try await fixture.client.send(post, body: Data(form.utf8)).0.status.code == 401)

            // A malformed resource is an invalid target; a public client cannot be given keys.
            let api = OAuth2API(configuration: configuration, transport: fixture.client, now: { fixture.clock.now })
            let target = TokenTarget(resources: ["https://ok.example/"])
            #expect(try await api.clientCredentials(for: target).accessToken != nil)
            let colon = FormURLEncoding.encode([("grant_type", "client_credentials"), ("resource", ":foo"), ("client_id", "loginkit-service"), ("client_secret", "dev-secret")])
            let (response, body) = try await fixture.client.send(post, body: Data(colon.utf8))
            #expect(response.status.code == 400 && String(decoding: body, as: UTF8.self).contains("invalid_target"))
            let jwks = try #require(HTTPRequest(method: .post, url: fixture.server.issuer + "/test/clients/loginkit-cli/jwks", headerFields: [:]))
            let keySet = JSONValue.object(["keys": .array([try key.publicJWK().json])]).serialized
            #expect(try await fixture.client.send(jwks, body: Data(keySet.utf8)).0.status.code == 400)
        }
        #expect(!String(reflecting: try ClientAssertionSigner.clientSecret(String(repeating: "k", count: 40))).contains("107"))
        var dumped = ""
        dump(try ClientAssertionSigner.clientSecret(String(repeating: "k", count: 40)), to: &dumped)
        #expect(!dumped.contains("107"))  // "k" is byte 107
    }
}
