import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitTestSupport
import Testing

@Suite(.timeLimit(.minutes(2)))
struct OAuth2APITests {
    @Test func passwordGrantReturnsVerifiedCredentials() async throws {
        try await withFixture { fixture in
            let credentials = try await fixture.api.logIn(for: demo, with: "demo")
            #expect(credentials.accessToken != nil)
            #expect(credentials.refreshToken != nil)
            #expect(credentials.tokenType == "Bearer")
            #expect(credentials.issuer == fixture.server.issuer)
            let claims = try #require(try credentials.idToken?.unverifiedClaims())
            #expect(claims["preferred_username"]?.stringValue == "demo")
            #expect(credentials.expiresAt == fixture.clock.now.addingTimeInterval(3600))
        }
    }

    @Test func aWrongPasswordIsRejectedCredentials() async throws {
        try await withFixture { fixture in
            let error = await thrown { try await fixture.api.logIn(for: demo, with: "Wr0ng-Pa55") }
            #expect((error as? LoginError)?.code == .invalidCredentials)
            #expect((error as? LoginError)?.providerError == "invalid_grant")
            #expect(!String(describing: error as Any).contains("Wr0ng-Pa55"))
        }
    }

    @Test func refreshRotatesAndAResponseWithoutRefreshTokenKeepsTheOld() async throws {
        try await withFixture { fixture in
            let first = try await fixture.api.logIn(for: demo, with: "demo")
            let second = try await fixture.api.refresh(first)
            #expect(second.refreshToken != first.refreshToken)
            #expect(second.accessToken != first.accessToken)
            #expect((await thrown { try await fixture.api.refresh(first) } as? LoginError)?.code == .refreshTokenRejected)

            fixture.server.identityProvider.rotatesRefreshTokens = false
            let third = try await fixture.api.logIn(for: demo, with: "demo")
            let fourth = try await fixture.api.refresh(third)
            #expect(fourth.refreshToken == third.refreshToken)
        }
    }

    @Test func aTokenResponseWithoutIDTokenIsValid() async throws {
        try await withFixture { fixture in
            var configuration = fixture.api.configuration
            configuration.scope = "profile"  // no openid: the provider issues no ID token
            let api = OAuth2API(configuration: configuration, transport: fixture.client, now: { fixture.clock.now })
            let credentials = try await api.logIn(for: demo, with: "demo")
            #expect(credentials.idToken == nil)
            #expect(credentials.accessToken != nil)
            let service = AuthService(api: api, store: fixture.store, clock: fixture.clock)
            _ = try await service.logIn(for: demo, with: "demo")
            #expect(try await service.validAccessToken() == (try await fixture.store.profile(named: "default"))?.credentials.accessToken)
            let error = await thrown { try await service.validIDToken() }
            #expect((error as? LoginRequiredError)?.code == .noIDToken)
        }
    }

    @Test(arguments: [OAuth2API.ClientAuthenticationMethod.basic, .post])
    func confidentialClientsAuthenticateBothWays(_ method: OAuth2API.ClientAuthenticationMethod) async throws {
        try await withFixture(clientID: "loginkit-service", clientSecret: "dev-secret") { fixture in
            var configuration = fixture.api.configuration
            configuration.clientAuthenticationMethod = method
            let api = OAuth2API(configuration: configuration, transport: fixture.client, now: { fixture.clock.now })
            let credentials = try await api.clientCredentials(scope: "api")
            #expect(credentials.accessToken != nil)
            #expect(credentials.refreshToken == nil)

            configuration.clientSecret = "wrong-secret"
            let wrong = OAuth2API(configuration: configuration, transport: fixture.client, now: { fixture.clock.now })
            let error = await thrown { try await wrong.clientCredentials(scope: nil) }
            #expect((error as? LoginError)?.code == .invalidClient)
            #expect(!String(describing: error as Any).contains("wrong-secret"))
        }
    }

    @Test func aPublicClientMayNotUseClientCredentials() async throws {
        try await withFixture { fixture in
            #expect((await thrown { try await fixture.api.clientCredentials(scope: nil) } as? LoginError)?.code == .unauthorizedClient)
        }
    }

    @Test func revokedRefreshTokensStopWorking() async throws {
        try await withFixture { fixture in
            let credentials = try await fixture.api.logIn(for: demo, with: "demo")
            try await fixture.api.revoke(credentials)
            #expect(fixture.server.monitor.requestCount(path: "/oauth/revoke") == 2)
            #expect((await thrown { try await fixture.api.refresh(credentials) } as? LoginError)?.code == .refreshTokenRejected)
        }
    }

    @Test func serverFailuresAreTyped() async throws {
        try await withFixture { fixture in
            _ = try await fixture.api.metadata()
            let cases: [(DevFault, ServerError.Code)] = [
                (.status(500), .unavailable), (.status(503), .unavailable), (.htmlErrorPage(502), .unavailable),
                (.tooManyRequests(retryAfter: 7), .rateLimited), (.malformedBody, .malformedResponse),
                (.truncatedBody, .malformedResponse), (.oauthError("unsupported_grant_type"), .protocolError),
            ]
            for (fault, expected) in cases {
                fixture.server.monitor.injectFaults([fault], path: "/oauth/token")
                let error = await thrown { try await fixture.api.logIn(for: demo, with: "demo") }
                #expect((error as? ServerError)?.code == expected, "\(fault)")
                if case .tooManyRequests = fault { #expect((error as? ServerError)?.retryAfter == .seconds(7)) }
            }
            // libcurl retries once on a fresh connection when a reused one dies silently: drop both.
            fixture.server.monitor.injectFaults([.dropConnection, .dropConnection], path: "/oauth/token")
            let dropped = await thrown { try await fixture.api.logIn(for: demo, with: "demo") }
            #expect(dropped is NetworkError, "\(String(describing: dropped))")
        }
    }

    @Test func anIssuerMismatchInDiscoveryIsRefused() async throws {
        try await withFixture { fixture in
            let api = OAuth2API(configuration: .init(issuer: fixture.server.issuer + "/", clientID: "loginkit-cli"), transport: fixture.client)
            let error = await thrown { try await api.logIn(for: demo, with: "demo") }
            #expect((error as? ServerError)?.code == .misconfigured)
        }
    }
}

@Suite(.timeLimit(.minutes(2)))
struct JSONLoginAPITests {
    @Test func logsInAndVerifiesWithTheIssuersKeys() async throws {
        try await withFixture { fixture in
            let keys = JWKSSource(url: fixture.server.issuer + "/.well-known/jwks.json", transport: fixture.client, now: { fixture.clock.now })
            let verifier = IDTokenVerifier(configuration: .init(issuer: fixture.server.issuer, audience: "loginkit-cli"), keys: keys, now: { fixture.clock.now })
            let api = JSONLoginAPI(configuration: .init(loginURL: fixture.server.url("/login"), verifier: verifier), transport: fixture.client, now: { fixture.clock.now })
            let service = AuthService(api: api, store: fixture.store, clock: fixture.clock)
            let user = try await service.logIn(for: demo, with: "demo")
            #expect(user.preferredUsername == "demo")
            #expect(user.birthdate == "1990-04-01")
            #expect(try await service.validIDToken().rawValue.split(separator: ".").count == 3)
            let error = await thrown { try await api.logIn(for: demo, with: "nope") }
            #expect((error as? LoginError)?.code == .invalidCredentials)
            #expect(fixture.server.monitor.requestCount(path: "/login") == 2)
        }
    }
}
