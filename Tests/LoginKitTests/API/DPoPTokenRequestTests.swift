import Foundation
@testable import LoginKit
import LoginKitHTTP
import LoginKitJOSE
import LoginKitTestSupport
import Testing

/// DPoP (RFC 9449) at the token endpoint: every grant with a key carries a proof for `POST` and the
/// endpoint's URL, a nonce challenge is answered once, a refresh proves the key the credentials
/// keep; the key is stored (and sealed) with the tokens; pushed authorization requests (RFC 9126)
/// leave only `client_id` and `request_uri` in the browser's URL.
@Suite struct DPoPTokenRequestTests {
    /// A transport that answers from a script and records what was sent; a request beyond the
    /// script fails (never waits).
    final class ScriptedTransport: HTTPTransport {
        struct Unscripted: Error {}
        private struct State {
            var answers: [(HTTPResponse, Data)] = []
            var sent: [(request: HTTPRequest, body: Data?)] = []
        }
        private let state = LockedState(State())

        /// Queues an answer with `headers` (JSON by default) and `json` as its body.
        func answer(_ status: HTTPResponse.Status, headers: HTTPFields = [.contentType: "application/json"], json: String) {
            state.withLock { $0.answers.append((HTTPResponse(status: status, headerFields: headers), Data(json.utf8))) }
        }

        /// Every request so far, in order.
        var sent: [(request: HTTPRequest, body: Data?)] { state.withLock { $0.sent } }

        func send(_ request: HTTPRequest, body: Data?) async throws -> (HTTPResponse, Data) {
            let answer: (HTTPResponse, Data)? = state.withLock { state in
                state.sent.append((request: request, body: body))
                return state.answers.isEmpty ? nil : state.answers.removeFirst()
            }
            guard let answer else { throw Unscripted() }
            return answer
        }
    }

    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let tokenURL = "https://id.example/token"
    static let tokenResponse = #"{"access_token": "at-1", "token_type": "DPoP", "expires_in": 3600, "refresh_token": "rt-1"}"#
    static let useNonce = #"{"error": "use_dpop_nonce", "error_description": "Authorization server requires nonce in DPoP proof"}"#

    /// A public client of `https://id.example` without discovery, binding tokens with `dpop`; with
    /// `clientSecretJWT`, a confidential client that signs an assertion per request.
    func makeAPI(_ transport: ScriptedTransport, dpop: JWSAlgorithm? = .es256, clientSecretJWT: Bool = false) -> OAuth2API {
        var configuration = OAuth2API.Configuration(issuer: "https://id.example", clientID: "app")
        configuration.usesDiscovery = false
        configuration.endpoints.token = Self.tokenURL
        configuration.endpoints.deviceAuthorization = "https://id.example/device"
        configuration.verifiesIDTokens = false
        configuration.dpopAlgorithm = dpop
        if clientSecretJWT {
            configuration.clientSecret = String(repeating: "s", count: 40)
            configuration.clientAuthenticationMethod = .clientSecretJWT
        }
        return OAuth2API(configuration: configuration, transport: transport, now: { Self.now })
    }

    /// A public client of `https://id.example` with discovery (the next answer `transport` gives).
    func makeDiscoveringAPI(_ transport: ScriptedTransport, discovery: String, pushes: Bool? = nil) -> OAuth2API {
        var configuration = OAuth2API.Configuration(issuer: "https://id.example", clientID: "app")
        configuration.verifiesIDTokens = false
        configuration.dpopAlgorithm = .es256
        configuration.pushesAuthorizationRequests = pushes
        transport.answer(.ok, json: discovery)
        return OAuth2API(configuration: configuration, transport: transport, now: { Self.now })
    }

    static let parDiscovery = #"""
        {"issuer": "https://id.example", "token_endpoint": "https://id.example/token",
         "authorization_endpoint": "https://id.example/authorize", "pushed_authorization_request_endpoint": "https://id.example/par"}
        """#

    /// The `DPoP` header of `sent`, checked as a server checks it (RFC 9449 §4.3) for `POST` `url`
    /// and, when given, `nonce`.
    func proof(_ sent: (request: HTTPRequest, body: Data?), url: String = DPoPTokenRequestTests.tokenURL, nonce: String? = nil) throws -> DPoPProofVerifier.Verified {
        let header = try #require(sent.request.headerFields[.dpop])
        return try DPoPProofVerifier().verify(header, method: "POST", url: url, expectedNonce: nonce, now: Self.now)
    }

    /// The form fields of `sent`, each named once.
    func fields(_ sent: (request: HTTPRequest, body: Data?)) -> [String: String] {
        let decoded = FormURLEncoding.decodeFields(String(decoding: sent.body ?? Data(), as: UTF8.self))
        #expect(decoded.duplicates.isEmpty, "\(decoded.duplicates)")
        return decoded.fields
    }

    // MARK: Proofs

    @Test func aPasswordLoginProvesANewKeyForPostAndTheTokenEndpoint() async throws {
        let transport = ScriptedTransport()
        let api = makeAPI(transport)
        transport.answer(.ok, json: Self.tokenResponse)
        let credentials = try await api.logIn(for: User.ID(rawValue: "alice"), with: "pw")
        let sent = try #require(transport.sent.first)
        #expect(sent.request.method == .post)
        let verified = try proof(sent)
        #expect(verified.nonce == nil)
        let key = try #require(credentials.proofKey)
        #expect(key.algorithm == .es256)
        #expect(verified.thumbprint == key.thumbprint)
        #expect(credentials.proofKeyThumbprint == key.thumbprint)
        #expect(credentials.isDPoPBound)
        let privateKey = try #require(key.privateJWK()["d"]?.stringValue)
        #expect("\(credentials)".hasSuffix(", DPoP-bound)"))
        #expect(!"\(credentials)".contains(privateKey))
        #expect(transport.sent.count == 1)
    }

    @Test func eachLoginMakesItsOwnKey() async throws {
        let transport = ScriptedTransport()
        let api = makeAPI(transport)
        transport.answer(.ok, json: Self.tokenResponse)
        transport.answer(.ok, json: Self.tokenResponse)
        let first = try await api.clientCredentials(for: TokenTarget())
        let second = try await api.clientCredentials(for: TokenTarget())
        #expect(first.proofKey != nil && second.proofKey != nil)
        #expect(first.proofKeyThumbprint != second.proofKeyThumbprint)
    }

    @Test func withoutADPoPAlgorithmNoProofIsSentAndADPoPTokenIsRefused() async throws {
        let transport = ScriptedTransport()
        let api = makeAPI(transport, dpop: nil)
        transport.answer(.ok, json: #"{"access_token": "at", "token_type": "Bearer"}"#)
        let credentials = try await api.logIn(for: User.ID(rawValue: "alice"), with: "pw")
        #expect(credentials.proofKey == nil && !credentials.isDPoPBound)
        #expect(transport.sent[0].request.headerFields[.dpop] == nil)
        #expect(!"\(credentials)".contains("DPoP"))

        transport.answer(.ok, json: Self.tokenResponse)
        let error = try #require(await thrown { try await api.logIn(for: User.ID(rawValue: "alice"), with: "pw") } as? ServerError)
        #expect(error.code == .malformedResponse)
    }

    // MARK: Nonces

    @Test func aNonceChallengeIsAnsweredOnceWithANewProofAndANewClientAssertion() async throws {
        let transport = ScriptedTransport()
        let api = makeAPI(transport, clientSecretJWT: true)
        transport.answer(.badRequest, headers: [.contentType: "application/json", .dpopNonce: "nonce-1"], json: Self.useNonce)
        transport.answer(.ok, headers: [.contentType: "application/json", .dpopNonce: "nonce-2"], json: Self.tokenResponse)
        let credentials = try await api.clientCredentials(for: TokenTarget())
        let sent = transport.sent
        try #require(sent.count == 2)
        let first = try proof(sent[0])
        let second = try proof(sent[1], nonce: "nonce-1")
        #expect(first.nonce == nil)
        #expect(first.jti != second.jti)
        #expect(first.thumbprint == second.thumbprint)
        #expect(second.thumbprint == credentials.proofKeyThumbprint)
        let assertions = [fields(sent[0])["client_assertion"], fields(sent[1])["client_assertion"]]
        #expect(assertions[0] != nil && assertions[1] != nil)
        #expect(assertions[0] != assertions[1], "a client assertion is never sent twice")
        #expect(api.dpopNonces.nonce(for: Self.tokenURL) == "nonce-2", "the last nonce the origin sent is kept")
    }

    @Test func aSecondNonceChallengeIsATypedErrorAndTheNextRequestUsesTheLastNonce() async throws {
        let transport = ScriptedTransport()
        let api = makeAPI(transport)
        transport.answer(.badRequest, headers: [.contentType: "application/json", .dpopNonce: "nonce-1"], json: Self.useNonce)
        transport.answer(.badRequest, headers: [.contentType: "application/json", .dpopNonce: "nonce-2"], json: Self.useNonce)
        let error = try #require(await thrown { try await api.logIn(for: User.ID(rawValue: "alice"), with: "pw") } as? ServerError)
        #expect(error.code == .protocolError)
        #expect(error.providerError == "use_dpop_nonce")
        #expect(transport.sent.count == 2, "one retry, never more")

        transport.answer(.ok, json: Self.tokenResponse)
        _ = try await api.logIn(for: User.ID(rawValue: "alice"), with: "pw")
        #expect(try proof(transport.sent[2], nonce: "nonce-2").nonce == "nonce-2")
    }

    /// No new nonce (none, an unusable one, or the one just sent): nothing to retry with.
    @Test(arguments: [nil, "has space", "nonce-0"] as [String?])
    func aChallengeWithoutANewNonceIsNotRetried(_ nonce: String?) async throws {
        let transport = ScriptedTransport()
        let api = makeAPI(transport)
        api.dpopNonces.remember(HTTPResponse(status: .ok, headerFields: [.dpopNonce: "nonce-0"]), for: Self.tokenURL)
        var headers: HTTPFields = [.contentType: "application/json"]
        if let nonce { headers[.dpopNonce] = nonce }
        transport.answer(.badRequest, headers: headers, json: Self.useNonce)
        let error = try #require(await thrown { try await api.logIn(for: User.ID(rawValue: "alice"), with: "pw") } as? ServerError)
        #expect(error.providerError == "use_dpop_nonce")
        #expect(transport.sent.count == 1)
        #expect(try proof(transport.sent[0], nonce: "nonce-0").nonce == "nonce-0")
    }

    @Test func aRefusedProofIsAProtocolErrorSayingSo() async throws {
        let transport = ScriptedTransport()
        let api = makeAPI(transport)
        transport.answer(.badRequest, json: #"{"error": "invalid_dpop_proof"}"#)
        let error = try #require(await thrown { try await api.logIn(for: User.ID(rawValue: "alice"), with: "pw") } as? ServerError)
        #expect(error.code == .protocolError)
        #expect(error.providerError == "invalid_dpop_proof")
        #expect(error.message.contains("refused the DPoP proof"), "\(error.message)")
        #expect(transport.sent.count == 1)
    }

    @Test func noncesAreKeptPerOriginBoundedAndChecked() {
        let nonces = DPoPNonces()
        nonces.remember(HTTPResponse(status: .ok, headerFields: [.dpopNonce: "n-1"]), for: "https://ID.Example/token")
        #expect(nonces.nonce(for: "https://id.example:443/par?x=1") == "n-1", "one origin: case and the default port aside")
        #expect(nonces.nonce(for: "http://id.example/token") == nil)
        #expect(nonces.nonce(for: "https://id.example:8443/token") == nil)
        #expect(nonces.nonce(for: "not a URL") == nil)
        for unusable in ["", "has space", "quote\"d", "back\\slash", String(repeating: "a", count: DPoPNonces.maximumNonceLength + 1)] {
            nonces.remember(HTTPResponse(status: .ok, headerFields: [.dpopNonce: unusable]), for: "https://id.example/token")
            #expect(nonces.nonce(for: "https://id.example/token") == "n-1")
        }
        nonces.remember(HTTPResponse(status: .ok), for: "https://id.example/token")
        #expect(nonces.nonce(for: "https://id.example/token") == "n-1", "a response without a nonce keeps the last one")
        let longest = String(repeating: "a", count: DPoPNonces.maximumNonceLength)
        nonces.remember(HTTPResponse(status: .ok, headerFields: [.dpopNonce: longest]), for: "https://id.example/token")
        #expect(nonces.nonce(for: "https://id.example/token") == longest)

        for index in 0..<DPoPNonces.capacity {
            nonces.remember(HTTPResponse(status: .ok, headerFields: [.dpopNonce: "n"]), for: "https://host-\(index).example/")
        }
        #expect(nonces.nonce(for: "https://id.example/token") == nil, "the origin remembered longest ago goes first")
        #expect(nonces.nonce(for: "https://host-0.example/") == "n")
        #expect(nonces.nonce(for: "https://host-\(DPoPNonces.capacity - 1).example/") == "n")
    }

    // MARK: Refresh and device

    @Test func aRefreshProvesTheKeyTheCredentialsKeepWhateverTheConfigurationSays() async throws {
        let transport = ScriptedTransport()
        transport.answer(.ok, json: Self.tokenResponse)
        let credentials = try await makeAPI(transport).logIn(for: User.ID(rawValue: "alice"), with: "pw")
        transport.answer(.ok, json: #"{"access_token": "at-2", "token_type": "DPoP", "expires_in": 3600}"#)
        let refreshed = try await makeAPI(transport, dpop: nil).refresh(credentials)
        let sent = transport.sent[1]
        #expect(fields(sent)["grant_type"] == "refresh_token")
        #expect(try proof(sent).thumbprint == credentials.proofKeyThumbprint)
        #expect(refreshed.proofKey == credentials.proofKey)
        #expect(refreshed.accessToken == "at-2" && refreshed.refreshToken == "rt-1")
        #expect(refreshed.isDPoPBound)

        transport.answer(.ok, json: #"{"access_token": "at-3", "token_type": "Bearer"}"#)
        _ = try await makeAPI(transport).refresh(Credentials(accessToken: "at", refreshToken: "bearer-rt"))
        #expect(transport.sent[2].request.headerFields[.dpop] == nil, "bearer credentials refresh without a proof")
    }

    @Test func devicePollsProveTheKeyTheAuthorizationStartedWith() async throws {
        let transport = ScriptedTransport()
        let api = makeAPI(transport)
        transport.answer(
            .ok, json: #"{"device_code": "dc", "user_code": "ABCD-EFGH", "verification_uri": "https://id.example/activate", "expires_in": 600}"#)
        transport.answer(.badRequest, json: #"{"error": "authorization_pending"}"#)
        transport.answer(.ok, json: Self.tokenResponse)
        let authorization = try await api.startDeviceAuthorization(scope: nil)
        let key = try #require(authorization.proofKey)
        guard case .pending = try await api.pollDeviceAuthorization(authorization) else {
            Issue.record("the first poll is pending")
            return
        }
        guard case .authorized(let credentials) = try await api.pollDeviceAuthorization(authorization) else {
            Issue.record("the second poll is authorized")
            return
        }
        #expect(try proof(transport.sent[1]).thumbprint == key.thumbprint)
        #expect(try proof(transport.sent[2]).thumbprint == key.thumbprint)
        #expect(credentials.proofKey == key)
    }

    @Test func anAlgorithmTheProviderDoesNotListIsRefusedBeforeAnyTokenRequest() async throws {
        let transport = ScriptedTransport()
        let api = makeDiscoveringAPI(
            transport,
            discovery: #"{"issuer": "https://id.example", "token_endpoint": "https://id.example/token", "dpop_signing_alg_values_supported": ["RS256", "PS256"]}"#
        )
        let error = try #require(await thrown { try await api.logIn(for: User.ID(rawValue: "alice"), with: "pw") } as? LoginError)
        #expect(error.code == .invalidConfiguration)
        #expect(error.message.contains("ES256") && error.message.contains("RS256 PS256"), "\(error.message)")
        #expect(transport.sent.count == 1, "discovery only")
    }

    // MARK: Store

    @Test func aBoundProfileRoundTripsThroughTheStoreAndItsKeyIsSealedWithTheTokens() throws {
        let key = try DPoPKey.generate()
        var credentials = Credentials(accessToken: "at", refreshToken: "rt", tokenType: "DPoP", issuer: "https://id.example")
        credentials.proofKey = key
        let profiles = [
            "default": StoredProfile(
                credentials: credentials, source: CredentialSource(kind: .oauth2, endpoint: "https://id.example", clientID: "app"),
                updatedAt: Date(timeIntervalSince1970: 1_800_000_000))
        ]
        let privateJWK = try key.privateJWK()
        let secret = try #require(privateJWK["d"]?.stringValue)
        let publicX = try #require(privateJWK["x"]?.stringValue)

        let plain = try StoreFormat.encode(profiles, path: "test", key: nil)
        let read = try StoreFormat.decode(plain, path: "test", key: nil)
        #expect(read == profiles)
        #expect(read["default"]?.credentials.proofKeyThumbprint == key.thumbprint)
        #expect(String(decoding: plain, as: UTF8.self).contains(#""dpop_key" : {"#))
        let document = StoreFormat.PlainDocument(storage: nil, profiles: profiles)
        #expect(try StoreFileEncoder.encode(document) == Array(try StoreFormat.encoder().encode(document)))

        let sealingKey = try SymmetricKey(bytes: [UInt8](repeating: 7, count: 32))
        let sealed = try StoreFormat.encode(profiles, path: "test", key: sealingKey)
        #expect(try StoreFormat.decode(sealed, path: "test", key: sealingKey) == profiles)
        let text = String(decoding: sealed, as: UTF8.self)
        #expect(!text.contains("dpop_key") && !text.contains(secret) && !text.contains(publicX))
        let contents = StoreFormat.SealedContents(profiles: profiles)
        #expect(try StoreFileEncoder.encode(contents) == Array(try StoreFormat.encoder().encode(contents)))
    }

    // MARK: Authorization requests

    @Test func aPushedRequestLeavesOnlyTheClientAndTheRequestURIInTheBrowsersURL() async throws {
        let transport = ScriptedTransport()
        let api = makeDiscoveringAPI(transport, discovery: Self.parDiscovery)
        transport.answer(.created, json: #"{"request_uri": "urn:ietf:params:oauth:request_uri:abc", "expires_in": 60}"#)
        let request = try await api.authorizationRequest(
            redirectURI: "http://127.0.0.1:8000/callback", options: AuthorizationOptions(acrValues: "urn:mfa", maxAge: 300))
        let key = try #require(request.proofKey)
        #expect(!"\(request)".contains(key.thumbprint))

        let push = transport.sent[1]
        #expect(push.request.path == "/par")
        let pushed = fields(push)
        #expect(pushed["response_type"] == "code")
        #expect(pushed["client_id"] == "app")
        #expect(pushed["redirect_uri"] == "http://127.0.0.1:8000/callback")
        #expect(pushed["state"] == request.state)
        #expect(pushed["code_challenge_method"] == "S256" && pushed["code_challenge"] != nil)
        #expect(pushed["dpop_jkt"] == key.thumbprint)
        #expect(pushed["max_age"] == "300" && pushed["acr_values"] == "urn:mfa")
        #expect(pushed["request_uri"] == nil)
        #expect(try proof(push, url: "https://id.example/par").thumbprint == key.thumbprint)

        let parts = request.url.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        try #require(parts.count == 2)
        #expect(parts[0] == "https://id.example/authorize")
        let query = FormURLEncoding.decodeFields(parts[1])
        #expect(query.fields == ["client_id": "app", "request_uri": "urn:ietf:params:oauth:request_uri:abc"])
        #expect(query.duplicates.isEmpty)

        transport.answer(.ok, json: Self.tokenResponse)
        let credentials = try await api.exchangeCode("code-1", for: request)
        let exchange = transport.sent[2]
        #expect(fields(exchange)["grant_type"] == "authorization_code")
        #expect(try proof(exchange).thumbprint == key.thumbprint)
        #expect(credentials.proofKey == key)
    }

    @Test func anUnpushedRequestCarriesTheThumbprintAndMaxAgeInItsURL() async throws {
        let transport = ScriptedTransport()
        let api = makeDiscoveringAPI(transport, discovery: Self.parDiscovery, pushes: false)
        let request = try await api.authorizationRequest(
            redirectURI: "http://127.0.0.1:8000/callback", options: AuthorizationOptions(maxAge: 0))
        let query = FormURLEncoding.decodeFields(request.url.split(separator: "?", maxSplits: 1).last ?? "")
        #expect(query.fields["dpop_jkt"] == request.proofKey?.thumbprint)
        #expect(query.fields["max_age"] == "0")
        #expect(query.fields["request_uri"] == nil)
        #expect(transport.sent.count == 1, "discovery only: nothing pushed")

        let negative = try #require(
            await thrown {
                try await api.authorizationRequest(redirectURI: "http://127.0.0.1:8000/callback", options: AuthorizationOptions(maxAge: -1))
            } as? LoginError)
        #expect(negative.code == .invalidConfiguration)
        let reserved = try #require(
            await thrown {
                try await api.authorizationRequest(
                    redirectURI: "http://127.0.0.1:8000/callback", options: AuthorizationOptions(extraParameters: [(name: "dpop_jkt", value: "x")]))
            } as? LoginError)
        #expect(reserved.code == .invalidConfiguration)
    }

    @Test func pushingThatCannotHappenIsRefusedWithWhoseFaultItIs() async throws {
        let required = #"{"issuer": "https://id.example", "token_endpoint": "https://id.example/token", "authorization_endpoint": "https://id.example/authorize", "pushed_authorization_request_endpoint": "https://id.example/par", "require_pushed_authorization_requests": true}"#
        let transport = ScriptedTransport()
        let never = makeDiscoveringAPI(transport, discovery: required, pushes: false)
        let refused = try #require(
            await thrown { try await never.authorizationRequest(redirectURI: "http://127.0.0.1:8000/callback", options: AuthorizationOptions()) }
                as? LoginError)
        #expect(refused.code == .invalidConfiguration)
        #expect(refused.message.contains("pushesAuthorizationRequests"))

        let noEndpoint = #"{"issuer": "https://id.example", "token_endpoint": "https://id.example/token", "authorization_endpoint": "https://id.example/authorize"}"#
        let always = makeDiscoveringAPI(ScriptedTransport(), discovery: noEndpoint, pushes: true)
        let missing = try #require(
            await thrown { try await always.authorizationRequest(redirectURI: "http://127.0.0.1:8000/callback", options: AuthorizationOptions()) }
                as? ServerError)
        #expect(missing.code == .misconfigured)
    }

    @Test func aRefusedOrIncompletePushIsTypedAsTheTokenEndpointsErrors() async throws {
        let transport = ScriptedTransport()
        let api = makeDiscoveringAPI(transport, discovery: Self.parDiscovery)
        transport.answer(.unauthorized, json: #"{"error": "invalid_client"}"#)
        let refused = try #require(
            await thrown { try await api.authorizationRequest(redirectURI: "http://127.0.0.1:8000/callback", options: AuthorizationOptions()) }
                as? LoginError)
        #expect(refused.code == .invalidClient)

        transport.answer(.created, json: #"{"expires_in": 60}"#)
        let incomplete = try #require(
            await thrown { try await api.authorizationRequest(redirectURI: "http://127.0.0.1:8000/callback", options: AuthorizationOptions()) }
                as? ServerError)
        #expect(incomplete.code == .malformedResponse)
    }
}
