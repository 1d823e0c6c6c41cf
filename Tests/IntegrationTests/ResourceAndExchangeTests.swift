import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitHTTP
import LoginKitJOSE
import LoginKitTestSupport
import Testing

@Suite(.timeLimit(.minutes(2)))
struct ResourceIndicatorTests {
    static let apiA = "https://api-a.example/v1"
    static let apiB = "https://api-b.example/"

    func service(_ fixture: Fixture, store: (any TokenStore)? = nil) -> ClientCredentialsTokens {
        ClientCredentialsTokens(api: fixture.api, store: store ?? fixture.store, clock: fixture.clock)
    }

    @Test func eachResourceGetsItsOwnTokenThenNoMoreRequests() async throws {
        try await withFixture(clientID: "loginkit-service", clientSecret: "dev-secret") { fixture in
            let tokens = service(fixture)
            let a = try await tokens.accessToken(for: TokenTarget(resources: [Self.apiA]))
            let b = try await tokens.accessToken(for: TokenTarget(resources: [Self.apiB], scope: "read"))
            #expect(fixture.tokenRequests == 2)
            #expect(try claims(of: a).audience == [Self.apiA])
            #expect(try claims(of: b).audience == [Self.apiB])
            #expect(try claims(of: a).subject == "loginkit-service")
            // Served from the cache: the same tokens, no request.
            #expect(try await tokens.accessToken(for: TokenTarget(resources: [Self.apiA])) == a)
            #expect(try await tokens.accessToken(for: TokenTarget(resources: [Self.apiB], scope: "read")) == b)
            #expect(fixture.tokenRequests == 2)
            // Each kept in its own profile, naming its target.
            let names = try await fixture.store.profileNames()
            #expect(names.count == 2)
            let nameA = ClientCredentialsTokens.profileName(base: "default", target: TokenTarget(resources: [Self.apiA]))
            #expect(try await fixture.store.profile(named: nameA)?.attributes["resource"] == Self.apiA)
            // An audience parameter is a target of its own.
            let byAudience = try await tokens.accessToken(for: TokenTarget(audience: "orders"))
            #expect(try claims(of: byAudience).audience == ["orders"])
            #expect(fixture.tokenRequests == 3)
        }
    }

    @Test func theOrderOfResourcesAndScopesDoesNotMakeANewTarget() {
        let one = TokenTarget(resources: [Self.apiA, Self.apiB], scope: "read write")
        let two = TokenTarget(resources: [Self.apiB, Self.apiA, Self.apiB], scope: "write read")
        #expect(one.cacheKey == two.cacheKey)
        #expect(ClientCredentialsTokens.profileName(base: "p", target: one) == ClientCredentialsTokens.profileName(base: "p", target: two))
        #expect(one.cacheKey != TokenTarget(resources: [Self.apiA], scope: "read write").cacheKey)
        #expect(TokenTarget(scope: "").cacheKey != TokenTarget().cacheKey)
    }

    @Test func aTokenNearExpiryIsReplaced() async throws {
        try await withFixture(clientID: "loginkit-service", clientSecret: "dev-secret") { fixture in
            let tokens = service(fixture)
            let first = try await tokens.accessToken(for: TokenTarget(resources: [Self.apiA]))
            fixture.clock.advance(by: .seconds(3600 - 30))  // within the 60 s margin
            let second = try await tokens.accessToken(for: TokenTarget(resources: [Self.apiA]))
            #expect(first != second)
            #expect(fixture.tokenRequests == 2)
        }
    }

    @Test func aHundredConcurrentCallersPerResourceMakeOneRequestEach() async throws {
        try await withFixture(clientID: "loginkit-service", clientSecret: "dev-secret") { fixture in
            let tokens = service(fixture)
            fixture.server.monitor.injectFaults([.delay(milliseconds: 200), .delay(milliseconds: 200)], path: "/oauth/token")
            let results = try await withThrowingTaskGroup(of: (String, String).self) { group in
                for index in 0..<200 {
                    let resource = index.isMultiple(of: 2) ? Self.apiA : Self.apiB
                    group.addTask { (resource, try await tokens.accessToken(for: TokenTarget(resources: [resource]))) }
                }
                return try await group.reduce(into: [String: Set<String>]()) { $0[$1.0, default: []].insert($1.1) }
            }
            #expect(fixture.tokenRequests == 2)
            #expect(results[Self.apiA]?.count == 1 && results[Self.apiB]?.count == 1)
        }
    }

    @Test func twoStoresOnOneFileMakeOneRequestPerResource() async throws {
        try await withTemporaryDirectory { directory in
            try await withFixture(clientID: "loginkit-service", clientSecret: "dev-secret") { fixture in
                // Two services, each with its own store object on the same file (as two processes
                // would be): the file's lock makes the second take what the first saved.
                let first = service(fixture, store: try IDTokenStore(path: directory + "/tokens.json", sealing: .none))
                let second = service(fixture, store: try IDTokenStore(path: directory + "/tokens.json", sealing: .none))
                fixture.server.monitor.injectFaults([.delay(milliseconds: 300)], path: "/oauth/token")
                async let a = first.accessToken(for: TokenTarget(resources: [Self.apiA]))
                async let b = second.accessToken(for: TokenTarget(resources: [Self.apiA]))
                let (tokenA, tokenB) = try await (a, b)
                #expect(tokenA == tokenB)
                #expect(fixture.tokenRequests == 1)
            }
        }
    }

    @Test func aRefusedOrMalformedTargetIsATypedError() async throws {
        try await withFixture(clientID: "loginkit-service", clientSecret: "dev-secret", configure: { $0.resourceServers = [Self.apiA] }) { fixture in
            let tokens = service(fixture)
            let refused = await thrown { try await tokens.accessToken(for: TokenTarget(resources: [Self.apiB])) }
            #expect((refused as? LoginError)?.code == .invalidTarget)
            #expect((refused as? LoginError)?.providerError == "invalid_target")
            let requests = fixture.tokenRequests
            for malformed in ["relative/path", "https://api.example/#fragment", ""] {
                let error = await thrown { try await tokens.accessToken(for: TokenTarget(resources: [malformed])) }
                #expect((error as? LoginError)?.code == .invalidConfiguration, "\(malformed)")
            }
            #expect(fixture.tokenRequests == requests)  // refused before sending
            let allowed = try await tokens.accessToken(for: TokenTarget(resources: [Self.apiA]))
            #expect(!allowed.isEmpty)
        }
    }

    @Test func anAuthServiceRefreshOfATargetProfileKeepsItsResource() async throws {
        try await withFixture(clientID: "loginkit-service", clientSecret: "dev-secret") { fixture in
            let target = TokenTarget(resources: [Self.apiA])
            _ = try await service(fixture).accessToken(for: target)
            let name = ClientCredentialsTokens.profileName(base: "default", target: target)
            fixture.clock.advance(by: .seconds(3600 - 10))
            let refreshed = try await fixture.service(profile: name).validAccessToken()
            #expect(try claims(of: refreshed).audience == [Self.apiA])
            #expect(fixture.tokenRequests == 2)
        }
    }
}

@Suite(.timeLimit(.minutes(2)))
struct TokenExchangeTests {
    /// A user's access token from the password grant, and an API for the confidential client.
    func withSubject(
        configure: @escaping (inout IdentityProviderConfiguration) -> Void = { _ in }, _ body: (Fixture, String, OAuth2API) async throws -> Void
    ) async throws {
        try await withFixture(configure: configure) { fixture in
            let subject = try #require(try await fixture.api.logIn(for: demo, with: "demo").accessToken)
            let service = OAuth2API(
                configuration: .init(issuer: fixture.server.issuer, clientID: "loginkit-service", clientSecret: "dev-secret"), transport: fixture.client,
                now: { fixture.clock.now })
            try await body(fixture, subject, service)
        }
    }

    @Test func aUsersTokenIsExchangedForAnotherAudience() async throws {
        try await withSubject { _, subject, api in
            let exchanged = try await api.exchangeToken(
                TokenExchangeRequest(subjectToken: subject, target: TokenTarget(audience: "https://orders.example", scope: "openid")))
            #expect(exchanged.issuedTokenType == TokenExchangeRequest.accessTokenType)
            let sent = try claims(of: exchanged.token)
            #expect(sent.audience == ["https://orders.example"])
            #expect(sent.subject == "248289761001")
            #expect(sent["client_id"]?.stringValue == "loginkit-service")
            #expect(sent["act"] == nil)
            #expect(exchanged.credentials.expiresAt != nil)
            #expect(!"\(exchanged)".contains(exchanged.token))
        }
    }

    @Test func delegationNamesTheActor() async throws {
        try await withSubject { fixture, subject, api in
            let actor = try #require(try await api.clientCredentials(scope: nil).accessToken)
            let exchanged = try await api.exchangeToken(
                TokenExchangeRequest(subjectToken: subject, actorToken: actor, target: TokenTarget(resources: ["https://api.example/"])))
            #expect(try claims(of: exchanged.token)["act"]?["sub"]?.stringValue == "loginkit-service")
            _ = fixture
        }
    }

    @Test func refusedExchangesAreTypedErrors() async throws {
        try await withSubject(configure: { $0.resourceServers = ["https://api.example/"] }) { _, subject, api in
            let badSubject = await thrown { try await api.exchangeToken(TokenExchangeRequest(subjectToken: "at.not-issued")) }
            #expect((badSubject as? LoginError)?.code == .subjectTokenRejected)
            let badTarget = await thrown {
                try await api.exchangeToken(TokenExchangeRequest(subjectToken: subject, target: TokenTarget(audience: "https://other.example")))
            }
            #expect((badTarget as? LoginError)?.code == .invalidTarget)
            let wider = await thrown {
                try await api.exchangeToken(TokenExchangeRequest(subjectToken: subject, target: TokenTarget(resources: ["https://api.example/"], scope: "admin")))
            }
            #expect((wider as? LoginError)?.code == .invalidScope)
            for error in [badSubject, badTarget, wider] { #expect(!"\(error as Any)".contains(subject)) }
        }
    }

    @Test func theExchangerCachesPerSubjectAndTarget() async throws {
        try await withSubject { fixture, subject, api in
            let exchanger = TokenExchanger(api: api, clock: fixture.clock)
            let request = TokenExchangeRequest(subjectToken: subject, target: TokenTarget(audience: "https://orders.example"))
            let before = fixture.tokenRequests
            fixture.server.monitor.injectFaults([.delay(milliseconds: 200)], path: "/oauth/token")
            let tokens = try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<50 { group.addTask { try await exchanger.exchange(request).token } }
                return try await group.reduce(into: Set<String>()) { $0.insert($1) }
            }
            #expect(tokens.count == 1)
            #expect(fixture.tokenRequests == before + 1)
            _ = try await exchanger.exchange(request)
            #expect(fixture.tokenRequests == before + 1)
            var other = request
            other.target.audience = "https://billing.example"
            _ = try await exchanger.exchange(other)
            #expect(fixture.tokenRequests == before + 2)
            fixture.clock.advance(by: .seconds(3600 - 30))  // near expiry: exchanged again
            _ = try await exchanger.exchange(request)
            #expect(fixture.tokenRequests == before + 3)
        }
    }
}
