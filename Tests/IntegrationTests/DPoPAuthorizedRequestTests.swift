import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitHTTP
import LoginKitJOSE
import LoginKitMocks
import LoginKitTestSupport
import Testing

/// `AuthService.send` and `ClientCredentialsTokens.send` against the dev server's protected
/// resource: the token and a fresh proof on every request, one retry for a nonce, one refresh and
/// one retry for a rejected token, a typed error for a step-up, and nothing else retried.
@Suite(.timeLimit(.minutes(2)))
struct DPoPAuthorizedRequestTests {
    /// A logged-in, DPoP-bound service over `transport` (the fixture's client by default).
    func loggedIn(_ fixture: Fixture, transport: (any HTTPTransport)? = nil, algorithm: JWSAlgorithm = .es256) async throws -> AuthService {
        let service = dpopService(fixture, api: dpopAPI(fixture, algorithm: algorithm, transport: transport))
        _ = try await service.logIn(for: demo, with: "demo")
        return service
    }

    @Test func sendReachesTheResourceWithTheTokenAndAProof() async throws {
        try await withFixture { fixture in
            let service = try await loggedIn(fixture)
            let thumbprint = try #require(try await fixture.store.profile(named: "default")?.credentials.proofKeyThumbprint)
            fixture.server.monitor.reset()
            let (response, body) = try await service.send(try fixture.resourceRequest())
            #expect(response.status.code == 200)
            let answer = try resourceAnswer(body)
            #expect(answer["token_type"]?.stringValue == "DPoP")
            #expect(answer["jkt"]?.stringValue == thumbprint)
            #expect(answer["method"]?.stringValue == "GET")
            #expect(answer["sub"]?.stringValue == "248289761001")

            let payload = Data(repeating: UInt8(ascii: "x"), count: 1234)
            let (posted, postedBody) = try await service.send(try fixture.resourceRequest(.post), body: payload)
            #expect(posted.status.code == 200)
            #expect(try resourceAnswer(postedBody)["method"]?.stringValue == "POST")
            #expect(try resourceAnswer(postedBody)["body_bytes"]?.int64Value == 1234)
            #expect(fixture.resourceRequestCount == 2)
            #expect(fixture.tokenRequests == 0)
        }
    }

    @Test func aBearerProfileSendsItsTokenAsBearerAndNoProof() async throws {
        try await withFixture { fixture in
            let recorder = DPoPExchangeRecorder(base: fixture.client)
            let clock = fixture.clock
            let api = OAuth2API(configuration: fixture.api.configuration, transport: recorder, now: { clock.now })
            let service = dpopService(fixture, api: api)
            _ = try await service.logIn(for: demo, with: "demo")
            let (response, body) = try await service.send(try fixture.resourceRequest())
            #expect(response.status.code == 200)
            #expect(try resourceAnswer(body)["token_type"]?.stringValue == "Bearer")
            let accessToken = try #require(try await fixture.store.profile(named: "default")?.credentials.accessToken)
            let sent = try #require(recorder.exchanges.last).request
            #expect(sent.headerFields[.authorization] == "Bearer \(accessToken)")
            #expect(sent.headerFields[.dpop] == nil)
        }
    }

    @Test func aResourceNonceChallengeIsAnsweredWithOneRetry() async throws {
        try await withFixture(configure: { $0.dpopNonceAtResource = true }) { fixture in
            let service = try await loggedIn(fixture)
            fixture.server.monitor.reset()
            let challenges = fixture.nonceChallengeCount
            let request = try fixture.resourceRequest()

            let (first, _) = try await service.send(request)
            #expect(first.status.code == 200)
            #expect(fixture.resourceRequestCount == 2, "the request and one retry with the nonce")
            #expect(fixture.nonceChallengeCount == challenges + 1)

            let (second, _) = try await service.send(request)
            #expect(second.status.code == 200)
            #expect(fixture.resourceRequestCount == 3, "the nonce was remembered")
            #expect(fixture.nonceChallengeCount == challenges + 1)

            fixture.server.rotateDPoPNonce()
            let (third, _) = try await service.send(request)
            #expect(third.status.code == 200)
            #expect(fixture.resourceRequestCount == 5)
            #expect(fixture.nonceChallengeCount == challenges + 2)
            #expect(fixture.tokenRequests == 0, "a nonce is no reason to refresh")
        }
    }

    @Test func aRejectedTokenIsRefreshedOnceAndTheRequestRetriedOnce() async throws {
        try await withFixture { fixture in
            let service = try await loggedIn(fixture)
            let before = try #require(try await fixture.store.profile(named: "default")).credentials
            fixture.server.expireAccessTokens()
            fixture.server.monitor.reset()
            let (response, body) = try await service.send(try fixture.resourceRequest())
            #expect(response.status.code == 200)
            #expect(fixture.tokenRequests == 1)
            #expect(fixture.resourceRequestCount == 2)
            let after = try #require(try await fixture.store.profile(named: "default")).credentials
            #expect(after.accessToken != before.accessToken)
            #expect(after.proofKeyThumbprint == before.proofKeyThumbprint)
            #expect(try resourceAnswer(body)["jkt"]?.stringValue == before.proofKeyThumbprint)
        }
    }

    /// 50 callers whose token the resource rejects: one refresh between them all, and every caller
    /// gets its answer.
    @Test func fiftyCallersWithARejectedTokenShareOneRefresh() async throws {
        try await withFixture { fixture in
            let service = try await loggedIn(fixture)
            fixture.server.expireAccessTokens()
            fixture.server.monitor.reset()
            let request = try fixture.resourceRequest()
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<50 { group.addTask { try await service.send(request).0.status.code } }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses == Array(repeating: 200, count: 50))
            #expect(fixture.tokenRequests == 1)
            #expect(fixture.resourceRequestCount <= 100, "at most one retry each")
        }
    }

    @Test func anyOtherAnswerIsReturnedAsItIsWithoutARetry() async throws {
        try await withFixture { fixture in
            let service = try await loggedIn(fixture)
            fixture.server.monitor.reset()
            fixture.server.monitor.injectFaults([.status(401), .status(503), .status(403)], path: "/api/resource")
            let request = try fixture.resourceRequest()
            for expected in [401, 503, 403] {
                let (response, _) = try await service.send(request)
                #expect(response.status.code == expected)
            }
            #expect(fixture.resourceRequestCount == 3)
            #expect(fixture.tokenRequests == 0)
        }
    }

    @Test func aStepUpChallengeIsATypedErrorAndAStrongerLoginMeetsIt() async throws {
        try await withFixture(configure: { $0.resourceRequiresACR = "urn:loginkit:acr:mfa" }) { fixture in
            let service = try await loggedIn(fixture)
            fixture.server.monitor.reset()
            let request = try fixture.resourceRequest()
            let error = await thrown { try await service.send(request) }
            let stepUp = try #require(error as? LoginRequiredError, "\(String(describing: error))")
            #expect(stepUp.code == .stepUpRequired)
            #expect(stepUp.acrValues == "urn:loginkit:acr:mfa")
            #expect(stepUp.maxAge == nil)
            #expect(fixture.resourceRequestCount == 1)
            #expect(fixture.tokenRequests == 0, "a step-up is no reason to refresh")

            // What a caller does: log in again asking for what the server named.
            var login = BrowserLogin.Configuration()
            login.authorization.acrValues = stepUp.acrValues
            _ = try await service.logInWithBrowser(login, launcher: TestBrowser(transport: fixture.client))
            let (response, body) = try await service.send(request)
            #expect(response.status.code == 200)
            #expect(try resourceAnswer(body)["acr"]?.stringValue == "urn:loginkit:acr:mfa")
        }
    }

    @Test func aMaxAgeChallengeNamesTheAge() async throws {
        try await withFixture(configure: { $0.resourceMaxAge = 60 }) { fixture in
            let service = try await loggedIn(fixture)
            let request = try fixture.resourceRequest()
            #expect(try await service.send(request).0.status.code == 200, "a fresh authentication passes")
            fixture.clock.advance(by: .seconds(120))
            let error = await thrown { try await service.send(request) }
            let stepUp = try #require(error as? LoginRequiredError, "\(String(describing: error))")
            #expect(stepUp.code == .stepUpRequired)
            #expect(stepUp.maxAge == 60)
        }
    }

    @Test func clientTokensSendWithAProofAndReplaceARejectedToken() async throws {
        try await withFixture(clientID: "loginkit-service", clientSecret: "dev-secret") { fixture in
            let tokens = ClientCredentialsTokens(api: dpopAPI(fixture), store: fixture.store, clock: fixture.clock)
            let request = try fixture.resourceRequest()
            let (response, body) = try await tokens.send(request)
            #expect(response.status.code == 200)
            let answer = try resourceAnswer(body)
            #expect(answer["token_type"]?.stringValue == "DPoP")
            #expect(answer["client_id"]?.stringValue == "loginkit-service")
            #expect(answer["jkt"]?.stringValue != nil)

            fixture.server.expireAccessTokens()
            fixture.server.monitor.reset()
            let (again, _) = try await tokens.send(request)
            #expect(again.status.code == 200)
            #expect(fixture.tokenRequests == 1)
            #expect(fixture.resourceRequestCount == 2)
        }
    }

    /// Every proof LoginKit sends — to the token endpoint (the login, its nonce retry, the refresh)
    /// and to the resource (GET with a query and its nonce retry, POST, the request whose token was
    /// rejected and the retry after the refresh) — passes each check RFC 9449 §4.3 has a server
    /// make, with the expected method, URL, access token hash, nonce and key; and those checks do
    /// refuse the same proofs for anything else.
    @Test(arguments: [JWSAlgorithm.es256, .edDSA, .ps256])
    func everyProofPassesTheChecksAServerMakes(_ algorithm: JWSAlgorithm) async throws {
        try await withFixture(configure: {
            $0.dpopNonceAtTokenEndpoint = true
            $0.dpopNonceAtResource = true
        }) { fixture in
            let recorder = DPoPExchangeRecorder(base: fixture.client)
            // The login: a nonce challenge at the token endpoint, and the retry with the nonce.
            let service = try await loggedIn(fixture, transport: recorder, algorithm: algorithm)
            // A new nonce: a challenge at the resource, and the retry; then the nonce is known.
            fixture.server.rotateDPoPNonce()
            _ = try await service.send(try fixture.resourceRequest(query: "?page=2&sort=asc"))
            _ = try await service.send(try fixture.resourceRequest(.post), body: Data("{}".utf8))
            // A rejected token: the refresh's proof, then the retry's.
            fixture.server.rotateDPoPNonce()
            fixture.server.expireAccessTokens()
            let (last, _) = try await service.send(try fixture.resourceRequest())
            #expect(last.status.code == 200)

            let credentials = try #require(try await fixture.store.profile(named: "default")).credentials
            let thumbprint = try #require(credentials.proofKeyThumbprint)
            let verifier = DPoPProofVerifier()
            let now = fixture.clock.now
            let otherKey = try DPoPKey.generate(algorithm)
            var identifiers = Set<String>()
            var checked = (tokenEndpoint: 0, resource: 0, nonceRetries: 0)
            var previous: DPoPExchangeRecorder.Exchange?
            for exchange in recorder.exchanges {
                defer { previous = exchange }
                guard let proof = exchange.request.headerFields[.dpop] else { continue }
                let url = try #require(exchange.request.urlString)
                let method = exchange.request.method.rawValue
                let authorization = exchange.request.headerFields[.authorization]
                let accessToken = authorization.flatMap { $0.hasPrefix("DPoP ") ? String($0.dropFirst(5)) : nil }
                // A retry after a challenge carries the nonce the challenge sent.
                let challenge = previous.flatMap { $0.isNonceChallenge && $0.request.urlString == url ? $0 : nil }
                let nonce = challenge?.response?.headerFields[.dpopNonce]
                let verified: DPoPProofVerifier.Verified
                do {
                    verified = try verifier.verify(
                        proof, method: method, url: url, accessToken: accessToken, expectedNonce: nonce, boundThumbprint: thumbprint,
                        now: now)
                } catch {
                    Issue.record("the proof of \(method) \(url) failed: \(error)")
                    continue
                }
                #expect(identifiers.insert(verified.jti).inserted, "a jti used twice")
                #expect(try jwsPartJSON(proof, 0)["jwk"]?["d"] == nil, "a private key member in the proof")
                if nonce != nil { checked.nonceRetries += 1 }
                if url.hasSuffix("/oauth/token") {
                    checked.tokenEndpoint += 1
                    #expect(try jwsPartJSON(proof, 1)["ath"] == nil, "ath on a token request")
                    #expect(authorization == nil || authorization?.hasPrefix("DPoP ") == false)
                } else {
                    checked.resource += 1
                    #expect(accessToken != nil, "\(method) \(url) went without `Authorization: DPoP`")
                    // The checks bite: the same proof for another method, URL, token, key, time or nonce fails.
                    func refused(
                        _ method: String, _ url: String, token: String?, nonce: String? = nil, key: String? = nil, at time: Date
                    ) -> Bool {
                        do {
                            _ = try verifier.verify(
                                proof, method: method, url: url, accessToken: token, expectedNonce: nonce, boundThumbprint: key, now: time)
                            return false
                        } catch {
                            return true
                        }
                    }
                    let otherMethod = method == "GET" ? "DELETE" : "GET"
                    let otherURL = url.replacingOccurrences(of: "/api/resource", with: "/api/other")
                    #expect(refused(otherMethod, url, token: accessToken, at: now), "another method")
                    #expect(refused(method, otherURL, token: accessToken, at: now), "another URL")
                    #expect(refused(method, url, token: "another-token", at: now), "another access token")
                    #expect(refused(method, url, token: accessToken, key: otherKey.thumbprint, at: now), "another key")
                    #expect(refused(method, url, token: accessToken, at: now.addingTimeInterval(900)), "another time")
                    #expect(refused(method, url, token: accessToken, nonce: "another-nonce", at: now), "another nonce")
                }
            }
            #expect(checked.tokenEndpoint >= 3, "the login, its nonce retry, the refresh")
            #expect(checked.resource >= 5, "three requests, a nonce retry, the retry after the refresh")
            #expect(fixture.nonceChallengeCount >= 2)
            #expect(checked.nonceRetries >= 2, "at the token endpoint and at the resource")
        }
    }
}
