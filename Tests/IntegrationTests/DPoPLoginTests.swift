import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitHTTP
import LoginKitJOSE
import LoginKitMocks
import LoginKitTestSupport
import Testing

/// DPoP-bound logins and refreshes (RFC 9449) against the dev identity provider: every grant's
/// tokens are bound to the key its proof named, refreshes keep that key, and a bound refresh token
/// works with nothing else.
@Suite(.timeLimit(.minutes(2)))
struct DPoPLoginTests {
    @Test(arguments: [JWSAlgorithm.es256, .es384, .edDSA, .rs256, .ps256])
    func aPasswordLoginIsBoundToAFreshKey(_ algorithm: JWSAlgorithm) async throws {
        try await withFixture { fixture in
            let api = dpopAPI(fixture, algorithm: algorithm)
            let first = try await api.logIn(for: demo, with: "demo")
            try expectDPoPBound(first)
            #expect(first.proofKey?.algorithm == algorithm)
            #expect(first.refreshToken != nil)
            #expect(fixture.tokenRequests == 1)
            let second = try await api.logIn(for: demo, with: "demo")
            try expectDPoPBound(second)
            #expect(second.proofKeyThumbprint != first.proofKeyThumbprint, "each login has a key of its own")
            // The key never shows in what gets printed or logged.
            let key = try #require(first.proofKey)
            let privateMember = try #require(try key.privateJWK()["d"]?.stringValue)
            for text in ["\(first)", String(reflecting: first), "\(key)", String(reflecting: key)] {
                #expect(!text.contains(privateMember))
            }
        }
    }

    @Test func withoutDPoPTheTokensStayBearerTokens() async throws {
        try await withFixture { fixture in
            let credentials = try await fixture.api.logIn(for: demo, with: "demo")
            #expect(credentials.proofKey == nil)
            #expect(credentials.proofKeyThumbprint == nil)
            #expect(credentials.tokenType == "Bearer")
        }
    }

    @Test func aDeviceLoginIsBoundToTheKeyItsPollsProve() async throws {
        try await withFixture { fixture in
            let service = dpopService(fixture, api: dpopAPI(fixture))
            let (codes, codeContinuation) = AsyncStream<DeviceAuthorization>.makeStream()
            let login = Task { try await service.logInWithDevice { codeContinuation.yield($0) } }
            var codeIterator = codes.makeAsyncIterator()
            let authorization = try #require(await codeIterator.next())
            #expect(fixture.server.approveDevice(userCode: authorization.userCode, username: "demo"))
            await fixture.clock.waitForSleepers(1)
            fixture.clock.advance(by: .seconds(5))
            let user = try await login.value
            #expect(user.preferredUsername == "demo")
            let stored = try #require(try await fixture.store.profile(named: "default")).credentials
            try expectDPoPBound(stored)
            #expect(stored.proofKeyThumbprint == authorization.proofKey?.thumbprint)
            #expect(fixture.tokenRequests == 1)
        }
    }

    @Test func aBrowserLoginIsBoundToTheKeyTheCodeWasAskedFor() async throws {
        try await withFixture { fixture in
            // Not pushed, so that the browser's URL shows what the authorization request carries.
            let api = dpopAPI(fixture) { $0.pushesAuthorizationRequests = false }
            let browser = TestBrowser(transport: fixture.client)
            let credentials = try await BrowserLogin(api: api, launcher: browser, clock: fixture.clock).run()
            try expectDPoPBound(credentials)
            let url = try #require(browser.openedURLs.first)
            #expect(parameter("dpop_jkt", in: url) == credentials.proofKeyThumbprint)
            #expect(fixture.tokenRequests == 1)
            #expect(fixture.parRequestCount == 0)
        }
    }

    @Test func clientCredentialsAreBoundToTheKey() async throws {
        try await withFixture(clientID: "loginkit-service", clientSecret: "dev-secret") { fixture in
            let credentials = try await dpopAPI(fixture).clientCredentials(scope: "api")
            try expectDPoPBound(credentials)
            #expect(credentials.refreshToken == nil)
            let target = try await dpopAPI(fixture).clientCredentials(for: TokenTarget(resources: ["https://api.example/"]))
            try expectDPoPBound(target)
            let targetToken = try #require(target.accessToken)
            #expect(try claims(of: targetToken).audience == ["https://api.example/"])
        }
    }

    @Test func aRefreshAfterExpiryIsProvedWithTheSameKey() async throws {
        try await withFixture { fixture in
            let service = dpopService(fixture, api: dpopAPI(fixture))
            _ = try await service.logIn(for: demo, with: "demo")
            let before = try #require(try await fixture.store.profile(named: "default")).credentials
            fixture.clock.advance(by: .seconds(3601))
            fixture.server.monitor.reset()
            let after = try await service.validCredentials()
            #expect(fixture.tokenRequests == 1)
            #expect(after.accessToken != before.accessToken)
            #expect(after.refreshToken != before.refreshToken)
            try expectDPoPBound(after)
            #expect(after.proofKey == before.proofKey)
            #expect(after.proofKeyThumbprint == before.proofKeyThumbprint)
            // The refreshed token works at the resource, with proofs by that key.
            let (response, body) = try await service.send(try fixture.resourceRequest())
            #expect(response.status.code == 200)
            #expect(try resourceAnswer(body)["jkt"]?.stringValue == before.proofKeyThumbprint)
        }
    }

    @Test func aBoundRefreshTokenIsRefusedWithoutItsKeyAndStaysUsable() async throws {
        try await withFixture { fixture in
            let api = dpopAPI(fixture)
            let credentials = try await api.logIn(for: demo, with: "demo")
            var withoutProof = credentials
            withoutProof.proofKey = nil
            withoutProof.tokenType = "Bearer"
            var withAnotherKey = credentials
            withAnotherKey.proofKey = try DPoPKey.generate()
            for (name, presented) in [("without a proof", withoutProof), ("with another key", withAnotherKey)] {
                let before = fixture.tokenRequests
                let error = await thrown { try await api.refresh(presented) }
                #expect((error as? LoginError)?.code == .refreshTokenRejected, "\(name): \(String(describing: error))")
                #expect((error as? LoginError)?.providerError == "invalid_grant", "\(name)")
                #expect(fixture.tokenRequests == before + 1, "\(name): the server refused it, nothing refused it before sending")
            }
            // Refused for the missing proof only: the family is not revoked, the key still refreshes.
            let refreshed = try await api.refresh(credentials)
            try expectDPoPBound(refreshed)
            #expect(refreshed.proofKeyThumbprint == credentials.proofKeyThumbprint)
            // A refresh proves with the credentials' key whatever the API's configuration says now.
            let throughPlainAPI = try await fixture.api.refresh(refreshed)
            try expectDPoPBound(throughPlainAPI)
            #expect(throughPlainAPI.proofKeyThumbprint == credentials.proofKeyThumbprint)
        }
    }

    @Test func aTokenEndpointNonceCostsOneRequestThenIsRemembered() async throws {
        try await withFixture(configure: { $0.dpopNonceAtTokenEndpoint = true }) { fixture in
            let api = dpopAPI(fixture)
            let challenges = fixture.nonceChallengeCount
            let credentials = try await api.logIn(for: demo, with: "demo")
            try expectDPoPBound(credentials)
            #expect(fixture.tokenRequests == 2, "one request more for the nonce")
            #expect(fixture.nonceChallengeCount == challenges + 1)

            let refreshed = try await api.refresh(credentials)
            try expectDPoPBound(refreshed)
            #expect(fixture.tokenRequests == 3, "the nonce was remembered")
            #expect(fixture.nonceChallengeCount == challenges + 1)

            // A new nonce: one challenge more, answered once; the refresh token was not used up by it.
            fixture.server.rotateDPoPNonce()
            let again = try await api.refresh(refreshed)
            try expectDPoPBound(again)
            #expect(again.proofKeyThumbprint == credentials.proofKeyThumbprint)
            #expect(fixture.tokenRequests == 5)
            #expect(fixture.nonceChallengeCount == challenges + 2)
        }
    }

    @Test func aProviderRequiringDPoPRefusesTokenRequestsWithoutAProof() async throws {
        try await withFixture(configure: { $0.dpop = .required }) { fixture in
            let error = await thrown { try await fixture.api.logIn(for: demo, with: "demo") }
            let providerError = (error as? LoginError)?.providerError ?? (error as? ServerError)?.providerError
            #expect(providerError == "invalid_dpop_proof", "\(String(describing: error))")
            #expect(fixture.tokenRequests == 1)
            let bound = try await dpopAPI(fixture).logIn(for: demo, with: "demo")
            try expectDPoPBound(bound)
        }
    }

    /// The private key is kept with the tokens and sealed with them: a sealed file shows none of
    /// it, and whoever opens the store with its key (another process) sends with the same key.
    @Test func theKeyIsSealedWithTheTokensAndAnotherProcessUsesIt() async throws {
        try await withTemporaryDirectory { directory in
            try await withFixture { fixture in
                let path = directory + "/tokens.json"
                let sealingKey = try SymmetricKey.random()
                let service = dpopService(fixture, api: dpopAPI(fixture), store: try IDTokenStore(path: path, sealing: .key(sealingKey)))
                _ = try await service.logIn(for: demo, with: "demo")
                let file = try storeText(at: path)
                let other = try IDTokenStore(path: path, sealing: .key(sealingKey))
                let stored = try #require(try await other.profile(named: "default")).credentials
                try expectDPoPBound(stored)
                let key = try #require(stored.proofKey)
                let privateMember = try #require(try key.privateJWK()["d"]?.stringValue)
                #expect(!file.contains(privateMember))
                #expect(!file.contains("dpop_key"))

                let otherService = dpopService(fixture, api: dpopAPI(fixture), store: other)
                let (response, body) = try await otherService.send(try fixture.resourceRequest())
                #expect(response.status.code == 200)
                #expect(try resourceAnswer(body)["jkt"]?.stringValue == key.thumbprint)

                // Unsealed (the user's choice), the key is there beside the tokens.
                let plainPath = directory + "/plain.json"
                _ = try await dpopService(fixture, api: dpopAPI(fixture), store: try IDTokenStore(path: plainPath)).logIn(for: demo, with: "demo")
                #expect(try storeText(at: plainPath).contains("\"dpop_key\""))
            }
        }
    }

    /// Two processes (two stores on one file) needing a refresh of a bound profile at once: one
    /// refresh, proved with the profile's key, and both get its tokens.
    @Test func twoProcessesRefreshABoundProfileOnce() async throws {
        try await withTemporaryDirectory { directory in
            try await withFixture { fixture in
                let path = directory + "/tokens.json"
                let first = dpopService(fixture, api: dpopAPI(fixture), store: try IDTokenStore(path: path))
                let second = dpopService(fixture, api: dpopAPI(fixture), store: try IDTokenStore(path: path))
                _ = try await first.logIn(for: demo, with: "demo")
                let before = try #require(try await IDTokenStore(path: path).profile(named: "default")).credentials
                fixture.clock.advance(by: .seconds(3601))
                fixture.server.monitor.reset()
                fixture.server.monitor.injectFaults([.delay(milliseconds: 300)], path: "/oauth/token")
                async let a = first.validCredentials()
                async let b = second.validCredentials()
                let (fromFirst, fromSecond) = try await (a, b)
                #expect(fixture.tokenRequests == 1)
                #expect(fromFirst.accessToken == fromSecond.accessToken)
                #expect(fromFirst.accessToken != before.accessToken)
                try expectDPoPBound(fromFirst)
                try expectDPoPBound(fromSecond)
                #expect(fromFirst.proofKeyThumbprint == before.proofKeyThumbprint)
            }
        }
    }
}
