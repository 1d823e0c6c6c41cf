import Foundation
import HTTPTypes
import LoginKit
import LoginKitHTTP
import LoginKitJOSE
import LoginKitMocks
import Testing

/// `AuthService.send(_:body:)` against a transport that answers from a script: the header fields it
/// adds, and what each 401 makes it do — at most one retry per cause, never a loop.
@Suite(.timeLimit(.minutes(3)))
struct AuthorizedRequestTests {
    /// Answers each request with the next scripted response and records what was sent.
    final class ScriptedResourceTransport: HTTPTransport {
        private let state: LockedState<(script: [(HTTPResponse, Data)], sent: [(HTTPRequest, Data?)])>

        init(_ script: [(HTTPResponse, Data)]) {
            state = LockedState((script: script, sent: []))
        }

        /// The requests sent so far, in order.
        var sent: [HTTPRequest] { state.withLock { $0.sent.map { $0.0 } } }
        /// The bodies sent so far, in order.
        var bodies: [Data?] { state.withLock { $0.sent.map { $0.1 } } }
        /// The `Authorization` field of each request sent so far, in order.
        var authorizations: [String?] { state.withLock { $0.sent.map { $0.0.headerFields[.authorization] } } }

        func send(_ request: HTTPRequest, body: Data?) async throws -> (HTTPResponse, Data) {
            let scripted = state.withLock { state -> (HTTPResponse, Data)? in
                state.sent.append((request, body))
                return state.script.isEmpty ? nil : state.script.removeFirst()
            }
            guard let response = scripted else { throw NetworkError(.connectFailed, "the script has no more responses") }
            return response
        }
    }

    /// Logins and refreshes through `MockAuthAPI` (held until the test resumes them); authorized
    /// requests over `httpTransport`.
    struct ResourceAPI: AuthorizedRequestAPI {
        let mock: MockAuthAPI
        let httpTransport: any HTTPTransport
        let dpopNonces = DPoPNonces()
        var source: CredentialSource { mock.source }
        func logIn(for id: User.ID, with password: String) async throws -> Credentials { try await mock.logIn(for: id, with: password) }
        func refresh(_ credentials: Credentials) async throws -> Credentials { try await mock.refresh(credentials) }
        func revoke(_ credentials: Credentials) async throws -> Bool { try await mock.revoke(credentials) }
    }

    /// A client-credentials API whose token number `n` (from 1) is `issue(n)`, and which sends
    /// requests over `httpTransport`.
    struct ClientAPI: ClientCredentialsAPI, AuthorizedRequestAPI {
        let httpTransport: any HTTPTransport
        let issue: @Sendable (Int) -> Credentials
        let dpopNonces = DPoPNonces()
        /// How many tokens were asked for.
        let issued = LockedState(0)
        var source: CredentialSource { Race.source }
        func logIn(for id: User.ID, with password: String) async throws -> Credentials { throw CancellationError() }
        func refresh(_ credentials: Credentials) async throws -> Credentials { throw CancellationError() }
        func revoke(_ credentials: Credentials) async throws -> Bool { false }
        func clientCredentials(scope: String?) async throws -> Credentials {
            issue(issued.increment())
        }

        /// Issues access-1, access-2, …
        static func numbering(_ httpTransport: any HTTPTransport) -> ClientAPI {
            ClientAPI(httpTransport: httpTransport) { Race.credentials($0, issuedAt: Race.t0) }
        }

        /// Issues access-1 every time, a second after it was asked (it moves `clock` on).
        static func sameToken(_ httpTransport: any HTTPTransport, clock: ManualClock) -> ClientAPI {
            ClientAPI(httpTransport: httpTransport) { _ in
                clock.advance(by: .seconds(1))
                return Race.credentials(1, issuedAt: Race.t0)
            }
        }
    }

    /// Refreshes answered at once: refresh `n` (from 1) brings access-`n`, issued at the clock's
    /// time; authorized requests over `httpTransport`.
    struct ImmediateResourceAPI: AuthorizedRequestAPI {
        let httpTransport: any HTTPTransport
        let clock: ManualClock
        let dpopNonces = DPoPNonces()
        let refreshes = LockedState(0)
        var source: CredentialSource { Race.source }
        func logIn(for id: User.ID, with password: String) async throws -> Credentials { throw CancellationError() }
        func refresh(_ credentials: Credentials) async throws -> Credentials {
            Race.credentials(refreshes.increment(), issuedAt: clock.now)
        }
        func revoke(_ credentials: Credentials) async throws -> Bool { false }
    }

    /// An API that cannot send authorized requests.
    struct TokensOnlyAPI: AuthAPI {
        var source: CredentialSource { Race.source }
        func logIn(for id: User.ID, with password: String) async throws -> Credentials { throw CancellationError() }
        func refresh(_ credentials: Credentials) async throws -> Credentials { throw CancellationError() }
        func revoke(_ credentials: Credentials) async throws -> Bool { false }
    }

    static let now = Race.t0.addingTimeInterval(60)  // 3540 s left on access-0
    static let request = HTTPRequest(method: .get, scheme: "https", authority: "api.test", path: "/resource?page=2")
    static let ok = (HTTPResponse(status: .ok), Data("answer".utf8))

    static func unauthorized(_ challenge: String, nonce: String? = nil) -> (HTTPResponse, Data) {
        var fields: HTTPFields = [.wwwAuthenticate: challenge]
        if let nonce { fields[.dpopNonce] = nonce }
        return (HTTPResponse(status: .unauthorized, headerFields: fields), Data("refused".utf8))
    }

    static func setUp(
        _ credentials: Credentials = Race.credentials(0, issuedAt: Race.t0), script: [(HTTPResponse, Data)]
    ) -> (service: AuthService, api: MockAuthAPI, transport: ScriptedResourceTransport) {
        let mock = MockAuthAPI()
        let transport = ScriptedResourceTransport(script)
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(credentials)])
        let service = AuthService(api: ResourceAPI(mock: mock, httpTransport: transport), store: store, clock: ManualClock(start: now))
        return (service, mock, transport)
    }

    /// Client-credentials tokens from `ClientAPI.numbering` whose requests are answered from
    /// `script`, on a manual clock at ``now``.
    static func numberedTokens(
        script: [(HTTPResponse, Data)]
    ) -> (tokens: ClientCredentialsTokens, api: ClientAPI, transport: ScriptedResourceTransport, clock: ManualClock) {
        let transport = ScriptedResourceTransport(script)
        let api = ClientAPI.numbering(transport)
        let clock = ManualClock(start: now)
        return (ClientCredentialsTokens(api: api, store: InMemoryTokenStore(), clock: clock), api, transport, clock)
    }

    /// A resource server that refuses every token (`refusals` answers) before an
    /// `ImmediateResourceAPI` on a manual clock at ``now``, and a store holding access-0.
    static func refusingEveryToken(
        refusals: Int
    ) -> (api: ImmediateResourceAPI, transport: ScriptedResourceTransport, clock: ManualClock, store: InMemoryTokenStore) {
        let transport = ScriptedResourceTransport(Array(repeating: unauthorized(#"Bearer error="invalid_token""#), count: refusals))
        let clock = ManualClock(start: now)
        let api = ImmediateResourceAPI(httpTransport: transport, clock: clock)
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(0, issuedAt: Race.t0))])
        return (api, transport, clock, store)
    }

    static func dpopBound() throws -> Credentials {
        var credentials = Race.credentials(0, issuedAt: Race.t0)
        credentials.tokenType = "DPoP"
        credentials.proofKey = try DPoPKey.generate()
        return credentials
    }

    /// The claims of a compact JWS.
    static func claims(_ jws: String?) throws -> [String: Any] {
        let parts = try #require(jws).split(separator: ".", omittingEmptySubsequences: false)
        try #require(parts.count == 3)
        let payload = try #require(Base64URL.decode(parts[1]))
        return try #require(try JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any])
    }

    // MARK: The header fields

    @Test func aBearerProfileSendsItsTokenAsBearerAndKeepsTheRequest() async throws {
        let (service, api, transport) = Self.setUp(script: [Self.ok])
        var request = Self.request
        request.headerFields[.accept] = "application/json"
        let (response, body) = try await service.send(request, body: Data("payload".utf8))
        #expect(response.status == .ok)
        #expect(body == Data("answer".utf8))
        let sent = try #require(transport.sent.first)
        #expect(transport.sent.count == 1)
        #expect(sent.headerFields[.authorization] == "Bearer access-0")
        #expect(sent.headerFields[.dpop] == nil)
        #expect(sent.headerFields[.accept] == "application/json")
        #expect(sent.method == .get && sent.scheme == "https" && sent.authority == "api.test" && sent.path == "/resource?page=2")
        #expect(transport.bodies == [Data("payload".utf8)])
        #expect(api.refreshCallCount == 0)
        api.verify()
    }

    @Test func aDPoPBoundProfileSendsAProofForThisRequest() async throws {
        let credentials = try Self.dpopBound()
        let (service, api, transport) = Self.setUp(credentials, script: [Self.ok])
        _ = try await service.send(Self.request)
        let sent = try #require(transport.sent.first)
        #expect(sent.headerFields[.authorization] == "DPoP access-0")
        let claims = try Self.claims(sent.headerFields[.dpop])
        #expect(claims["htm"] as? String == "GET")
        #expect(claims["htu"] as? String == "https://api.test/resource")
        #expect(claims["ath"] as? String == DPoPKey.accessTokenHash("access-0"))
        #expect(!claims.keys.contains("nonce"))
        api.verify()
    }

    // MARK: 401s

    @Test func aRefusedTokenIsRefreshedOnceAndTheRequestSentOnceMore() async throws {
        let (service, api, transport) = Self.setUp(script: [Self.unauthorized(#"Bearer error="invalid_token""#), Self.ok])
        let call = Task { try await service.send(Self.request, body: Data("payload".utf8)) }
        let refresh = await api.nextRefresh()
        #expect(refresh.arguments.accessToken == "access-0")
        refresh.resume(returning: Race.credentials(1, issuedAt: Self.now))
        let (response, body) = try await call.value
        #expect(response.status == .ok)
        #expect(body == Data("answer".utf8))
        #expect(transport.authorizations == ["Bearer access-0", "Bearer access-1"])
        #expect(transport.bodies == [Data("payload".utf8), Data("payload".utf8)])
        #expect(api.refreshCallCount == 1)
        api.verify()
    }

    @Test func aSecondRefusalIsReturnedAsTheResponseWithoutAnotherRefresh() async throws {
        let refused = Self.unauthorized(#"Bearer realm="api", error="invalid_token", error_description="expired""#)
        let (service, api, transport) = Self.setUp(script: [refused, refused])
        let call = Task { try await service.send(Self.request) }
        await api.nextRefresh().resume(returning: Race.credentials(1, issuedAt: Self.now))
        let (response, body) = try await call.value
        #expect(response.status == .unauthorized)
        #expect(body == Data("refused".utf8))
        #expect(transport.sent.count == 2)
        #expect(api.refreshCallCount == 1)
        api.verify()
    }

    @Test func aNonceChallengeIsAnsweredOnceWithTheNewNonce() async throws {
        let challenge = Self.unauthorized(#"DPoP error="use_dpop_nonce", error_description="Resource server requires nonce in DPoP proof""#, nonce: "n-1")
        let credentials = try Self.dpopBound()
        let (service, api, transport) = Self.setUp(credentials, script: [challenge, Self.ok])
        let (response, _) = try await service.send(Self.request)
        #expect(response.status == .ok)
        let sent = transport.sent
        #expect(sent.count == 2)
        #expect(sent.allSatisfy { $0.headerFields[.authorization] == "DPoP access-0" })
        let first = try Self.claims(sent.first?.headerFields[.dpop])
        let second = try Self.claims(sent.last?.headerFields[.dpop])
        #expect(!first.keys.contains("nonce"))
        #expect(second["nonce"] as? String == "n-1")
        #expect(first["jti"] as? String != nil)
        #expect(second["jti"] as? String != first["jti"] as? String)
        #expect(api.refreshCallCount == 0, "a nonce is no reason to refresh")
        api.verify()
    }

    @Test func aSecondNonceChallengeIsReturnedAsTheResponse() async throws {
        let credentials = try Self.dpopBound()
        let (service, api, transport) = Self.setUp(
            credentials,
            script: [Self.unauthorized(#"DPoP error="use_dpop_nonce""#, nonce: "n-1"), Self.unauthorized(#"DPoP error="use_dpop_nonce""#, nonce: "n-2")])
        let (response, _) = try await service.send(Self.request)
        #expect(response.status == .unauthorized)
        #expect(transport.sent.count == 2)
        api.verify()
    }

    /// A nonce challenge, then a refused token, then the answer: three requests, the most there are.
    @Test func aNonceChallengeAndARefusalMakeThreeRequestsAtMost() async throws {
        let credentials = try Self.dpopBound()
        let (service, api, transport) = Self.setUp(
            credentials,
            script: [
                Self.unauthorized(#"DPoP error="use_dpop_nonce""#, nonce: "n-1"), Self.unauthorized(#"DPoP error="invalid_token""#),
                Self.unauthorized(#"DPoP error="use_dpop_nonce""#, nonce: "n-2"),
            ])
        let call = Task { try await service.send(Self.request) }
        var refreshed = try Self.dpopBound()
        refreshed.accessToken = "access-1"
        await api.nextRefresh().resume(returning: refreshed)
        let (response, _) = try await call.value
        #expect(response.status == .unauthorized)
        #expect(transport.sent.count == 3)
        #expect(transport.sent.last?.headerFields[.authorization] == "DPoP access-1")
        api.verify()
    }

    @Test func aStepUpChallengeThrowsWhatTheServerAskedFor() async throws {
        let challenge = Self.unauthorized(
            #"Bearer error="insufficient_user_authentication", error_description="More recent authentication is required", acr_values="urn:mfa phr", max_age="300""#)
        let (service, api, transport) = Self.setUp(script: [challenge])
        let error = await #expect(throws: LoginRequiredError.self) { try await service.send(Self.request) }
        #expect(error?.code == .stepUpRequired)
        #expect(error?.acrValues == "urn:mfa phr")
        #expect(error?.maxAge == 300)
        #expect(error?.profile == "default")
        #expect(error?.message == #"the resource server requires stronger authentication (acr_values "urn:mfa phr", max_age 300); log in again with those"#)
        #expect(transport.sent.count == 1)
        #expect(api.refreshCallCount == 0)
        api.verify()
    }

    @Test(arguments: [
        (#"Bearer error="insufficient_user_authentication""#, nil as String?, nil as Int?),
        (#"Bearer error="insufficient_user_authentication", max_age="-1""#, nil, nil),
        (#"Bearer error="insufficient_user_authentication", acr_values="", max_age=abc"#, nil, nil),
        (#"Bearer error="insufficient_user_authentication", max_age=99999999999999999999999"#, nil, nil),
        (#"Bearer error="insufficient_user_authentication", max_age=0"#, nil, 0),
        (#"DPoP error="insufficient_user_authentication", acr_values="urn:a urn:b""#, "urn:a urn:b", nil),
    ])
    func stepUpValuesAreTakenOnlyWhenUsable(challenge: String, acrValues: String?, maxAge: Int?) async throws {
        let (service, api, _) = Self.setUp(script: [Self.unauthorized(challenge)])
        let error = await #expect(throws: LoginRequiredError.self) { try await service.send(Self.request) }
        #expect(error?.code == .stepUpRequired)
        #expect(error?.acrValues == acrValues)
        #expect(error?.maxAge == maxAge)
        api.verify()
    }

    @Test func theStepUpMessageNamesWhatWasAskedAndEscapesIt() {
        let hostile = LoginRequiredError.stepUpRequired(profile: "p", acrValues: "a\u{1B}[2J\nb", maxAge: nil)
        #expect(hostile.acrValues == "a\u{1B}[2J\nb", "kept as the server sent it, for the next login")
        #expect(hostile.message == #"the resource server requires stronger authentication (acr_values "a\u{1B}[2J\u{A}b"); log in again with those"#)
        #expect(LoginRequiredError.stepUpRequired(profile: "p", acrValues: nil, maxAge: 0).message.contains("(max_age 0)"))
        #expect(
            LoginRequiredError.stepUpRequired(profile: "p", acrValues: nil, maxAge: nil).message
                == "the resource server requires stronger or more recent authentication; log in again")
    }

    @Test func anyOtherAnswerIsReturnedAsItIs() async throws {
        let (service, api, transport) = Self.setUp(script: [
            (HTTPResponse(status: .unauthorized), Data()), (HTTPResponse(status: .forbidden), Data()),
            Self.unauthorized(#"Basic realm="x""#),
        ])
        for expected in [401, 403, 401] {
            let (response, _) = try await service.send(Self.request)
            #expect(response.status.code == expected)
        }
        #expect(transport.sent.count == 3)
        #expect(api.refreshCallCount == 0)
        api.verify()
    }

    @Test func aServicesOwnRefusedTokenIsDroppedAndReplacedOnce() async throws {
        let refused = Self.unauthorized(#"Bearer error="invalid_token""#)
        let (tokens, api, transport, clock) = Self.numberedTokens(script: [refused, Self.ok, refused, refused])
        let (response, _) = try await tokens.send(Self.request)
        #expect(response.status == .ok)
        #expect(transport.authorizations == ["Bearer access-1", "Bearer access-2"])
        // Refused again, 31 s after the replacement: the token is replaced once more, and the answer
        // to the retry is returned.
        clock.advance(by: .seconds(31))
        let (again, _) = try await tokens.send(Self.request)
        #expect(again.status == .unauthorized)
        #expect(transport.authorizations.suffix(2) == ["Bearer access-2", "Bearer access-3"])
        #expect(api.issued.withLock { $0 } == 3)
    }

    /// A provider that issues the same token again: after a refusal, the token issued again is not
    /// what was refused, so the request is sent with it, and it is kept — not asked for per call.
    @Test func aServicesTokenIssuedAgainAfterARefusalIsUsedAndKept() async throws {
        let transport = ScriptedResourceTransport([Self.unauthorized(#"Bearer error="invalid_token""#), Self.ok])
        let clock = ManualClock(start: Self.now)
        let api = ClientAPI.sameToken(transport, clock: clock)
        let tokens = ClientCredentialsTokens(api: api, store: InMemoryTokenStore(), clock: clock)
        let (response, _) = try await tokens.send(Self.request)
        #expect(response.status == .ok)
        #expect(transport.authorizations == ["Bearer access-1", "Bearer access-1"])
        for _ in 0..<3 { #expect(try await tokens.accessToken() == "access-1") }
        #expect(api.issued.withLock { $0 } == 2)
    }

    /// A token obtained for a refusal and refused again within 30 s of its issue is not replaced
    /// again: the 401 is returned, nothing asked for. 31 s after its issue, it is.
    @Test func aServicesTokenJustObtainedForARefusalIsNotReplacedAgainForThirtySeconds() async throws {
        let refused = Self.unauthorized(#"Bearer error="invalid_token""#)
        let (tokens, api, transport, clock) = Self.numberedTokens(script: Array(repeating: refused, count: 6))
        #expect(try await tokens.send(Self.request).0.status == .unauthorized)  // access-1 refused, then access-2
        for _ in 0..<2 {
            clock.advance(by: .seconds(1))
            #expect(try await tokens.send(Self.request).0.status == .unauthorized)
        }
        #expect(api.issued.withLock { $0 } == 2)
        #expect(transport.authorizations == ["Bearer access-1", "Bearer access-2", "Bearer access-2", "Bearer access-2"])
        clock.advance(by: .seconds(29))  // 31 s after access-2 was issued
        #expect(try await tokens.send(Self.request).0.status == .unauthorized)
        #expect(api.issued.withLock { $0 } == 3)
        #expect(transport.authorizations.suffix(2) == ["Bearer access-2", "Bearer access-3"])
    }

    /// A resource server that refuses every token: the token a forced refresh brought is not
    /// refreshed again within 30 s of that refresh — each call returns the 401 — so the provider
    /// sees one refresh, not one per call. 31 s later a refusal refreshes again.
    @Test func aTokenJustIssuedByAForcedRefreshIsNotRefreshedAgain() async throws {
        let (api, transport, clock, store) = Self.refusingEveryToken(refusals: 6)
        let service = AuthService(api: api, store: store, clock: clock)
        for _ in 0..<3 {
            let (response, body) = try await service.send(Self.request)
            #expect(response.status == .unauthorized)
            #expect(body == Data("refused".utf8))
            clock.advance(by: .seconds(1))
        }
        #expect(api.refreshes.withLock { $0 } == 1)
        #expect(transport.authorizations == ["Bearer access-0", "Bearer access-1", "Bearer access-1", "Bearer access-1"])
        clock.advance(by: .seconds(28))  // 31 s after the forced refresh
        let (response, _) = try await service.send(Self.request)
        #expect(response.status == .unauthorized)
        #expect(api.refreshes.withLock { $0 } == 2)
        #expect(transport.authorizations.suffix(2) == ["Bearer access-1", "Bearer access-2"])
    }

    /// The same across processes (two services on one store): the mark of the forced refresh is
    /// in the store, so the second process's refusal of that token refreshes nothing either.
    @Test func aTokenJustIssuedByAForcedRefreshIsNotRefreshedAgainByAnotherProcess() async throws {
        let (api, transport, clock, store) = Self.refusingEveryToken(refusals: 4)
        let first = AuthService(api: api, store: store, clock: clock)
        let second = AuthService(api: api, store: store, clock: clock)
        #expect(try await first.send(Self.request).0.status == .unauthorized)
        #expect(try await store.profile(named: "default")?.attributes[AuthService.forcedRefreshAttribute] != nil)
        clock.advance(by: .seconds(1))
        #expect(try await second.send(Self.request).0.status == .unauthorized)
        #expect(api.refreshes.withLock { $0 } == 1)
        #expect(transport.authorizations == ["Bearer access-0", "Bearer access-1", "Bearer access-1"])
    }

    // MARK: Refused before anything is sent

    @Test(arguments: [HTTPField.Name.authorization, .dpop])
    func aRequestWithItsOwnAuthorizationIsRefused(_ name: HTTPField.Name) async throws {
        let (service, api, transport) = Self.setUp(script: [Self.ok])
        var request = Self.request
        request.headerFields[name] = "Bearer mine"
        let error = await #expect(throws: LoginError.self) { try await service.send(request) }
        #expect(error?.code == .invalidConfiguration)
        #expect(transport.sent.isEmpty)
        api.verify()
    }

    @Test func aRequestWithoutAnAbsoluteHTTPURLIsRefused() async throws {
        let (service, api, transport) = Self.setUp(script: [Self.ok])
        for request in [
            HTTPRequest(method: .get, scheme: "ftp", authority: "api.test", path: "/"),
            HTTPRequest(method: .get, scheme: "https", authority: nil, path: "/"),
            HTTPRequest(method: .get, scheme: nil, authority: "api.test", path: "/"),
        ] {
            let error = await #expect(throws: LoginError.self) { try await service.send(request) }
            #expect(error?.code == .invalidConfiguration)
        }
        #expect(transport.sent.isEmpty)
        api.verify()
    }

    @Test func anAPIWithoutATransportOfItsOwnIsRefused() async throws {
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(0, issuedAt: Race.t0))])
        let service = AuthService(api: TokensOnlyAPI(), store: store, clock: ManualClock(start: Self.now))
        let error = await #expect(throws: LoginError.self) { try await service.send(Self.request) }
        #expect(error?.code == .invalidConfiguration)
    }

    @Test func credentialsWithoutAnAccessTokenAreRefused() async throws {
        var credentials = Race.credentials(0, issuedAt: Race.t0)
        credentials.accessToken = nil
        let (service, api, transport) = Self.setUp(credentials, script: [Self.ok])
        let error = await #expect(throws: LoginRequiredError.self) { try await service.send(Self.request) }
        #expect(error?.code == .noAccessToken)
        #expect(transport.sent.isEmpty)
        api.verify()
    }
}
