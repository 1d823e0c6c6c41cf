import Foundation
#if canImport(Glibc)
import Glibc
#endif
@testable import LoginKit
import LoginKitDevServer
import LoginKitHTTP
import LoginKitJOSE
import LoginKitLifecycle
import LoginKitMocks
import LoginKitTestSupport
import Testing

/// The Kubernetes service account the file, program and environment sources present.
private let podSubject = "system:serviceaccount:default:app"

/// The client the federated tests authenticate as.
private let workloadClientID = "workload-test"

/// A fixture whose provider has client `workload-test`, federated with its workload issuer for the
/// pod's, GitHub Actions' and the metadata service's subjects (each for the provider's token endpoint
/// or issuer as audience).
///
/// Every test gives its sources values of their own (a file in its own directory, a URL on its own
/// server's port, a variable with a unique name): the sources' cache is the process's, shared by
/// the tests running beside.
private func withWorkloadClient<T>(
    configure: (inout IdentityProviderConfiguration) -> Void = { _ in },
    _ body: (Fixture) async throws -> T
) async throws -> T {
    try await withFixture(
        clientID: workloadClientID,
        configure: {
            $0.clients.append(
                DevClient(
                    id: workloadClientID,
                    federatedCredentials: [podSubject, DevServer.gitHubSubject, DevServer.metadataSubject].map { DevFederatedCredential(subject: $0) }))
            configure(&$0)
        }, body)
}

extension Fixture {
    /// An API of the federated client that authenticates with `source`'s token (read from
    /// `environment` when given), over `transport` (the fixture's client by default).
    fileprivate func federatedAPI(_ source: IdentitySource, environment: [String: String]? = nil, transport: (any HTTPTransport)? = nil) -> OAuth2API {
        var configuration = api.configuration
        configuration.clientAssertionSource = source
        configuration.environment = environment
        configuration.scope = "api"
        let clock = self.clock
        return OAuth2API(configuration: configuration, transport: transport ?? client, now: { clock.now })
    }

    /// An API of `clientID` (with `secret`) that trades `source`'s token with the JWT-bearer grant.
    fileprivate func assertionGrantAPI(_ source: IdentitySource, clientID: String = "loginkit-cli", secret: String? = nil, transport: (any HTTPTransport)? = nil) -> OAuth2API {
        var configuration = OAuth2API.Configuration(issuer: server.issuer, clientID: clientID, clientSecret: secret)
        configuration.assertionGrantSource = source
        configuration.scope = "api"
        let clock = self.clock
        return OAuth2API(configuration: configuration, transport: transport ?? client, now: { clock.now })
    }

    /// A workload identity token of the provider's workload issuer, issued now by the provider's
    /// clock, for the provider's issuer unless `audience` says otherwise.
    fileprivate func mint(_ subject: String = podSubject, audience: String? = nil, lifetime: Duration = .seconds(300)) -> String {
        server.mintWorkloadToken(subject: subject, audience: audience ?? server.issuer, lifetime: lifetime)
    }
}

/// Answers the discovery of ``issuer`` with a document of the test's (its `issuer` added) and every
/// other request `200` with a token response; records each request's URL. No request leaves the
/// process.
private final class DiscoveryOnlyTransport: HTTPTransport {
    static let issuer = "https://id.example"
    let document: [String: JSONValue]
    let urls = LockedState<[String]>([])

    init(_ document: [String: JSONValue]) {
        var document = document
        document["issuer"] = .string(Self.issuer)
        self.document = document
    }

    func send(_ request: HTTPRequest, body: Data?) async throws -> (HTTPResponse, Data) {
        let url = request.urlString ?? ""
        urls.withLock { $0.append(url) }
        let answer: [String: JSONValue] =
            url == Self.issuer + "/.well-known/openid-configuration"
            ? document : ["access_token": .string("issued-access-token"), "token_type": .string("Bearer"), "expires_in": .number("300")]
        return (HTTPResponse(status: .ok, headerFields: [.contentType: "application/json"]), Data(JSONValue.object(answer).serialized.utf8))
    }

    /// The URLs of the requests sent to `host`.
    func requests(to host: String) -> [String] {
        urls.withLock { $0.filter { URLParts($0)?.host == host } }
    }
}

/// Records the path (without the query) of each request, in order, then forwards it.
private final class PathRecordingTransport: HTTPTransport {
    let next: any HTTPTransport
    let paths = LockedState<[String]>([])

    init(_ next: any HTTPTransport) { self.next = next }

    func send(_ request: HTTPRequest, body: Data?) async throws -> (HTTPResponse, Data) {
        paths.withLock { $0.append(String((request.path ?? "").prefix { $0 != "?" })) }
        return try await next.send(request, body: body)
    }
}

/// A variable name no other test uses: the sources' cache is the process's.
private func uniqueVariableName() -> String {
    "LOGINKIT_TEST_WORKLOAD_TOKEN_" + UUID().uuidString.replacingOccurrences(of: "-", with: "_")
}

/// A configuration of client `workload` of ``DiscoveryOnlyTransport/issuer`` whose client
/// assertion (or, with `grant`, whose JWT-bearer grant's assertion) is `source`'s token, read from
/// `environment`; no scope.
private func discoveryOnlyConfiguration(_ source: IdentitySource, environment: [String: String], grant: Bool = false) -> OAuth2API.Configuration {
    var configuration = OAuth2API.Configuration(issuer: DiscoveryOnlyTransport.issuer, clientID: "workload")
    if grant {
        configuration.assertionGrantSource = source
    } else {
        configuration.clientAssertionSource = source
    }
    configuration.environment = environment
    configuration.scope = ""
    return configuration
}

/// Puts `text` at `path` as a platform rotates a projected token: written beside it, then renamed
/// over it (a new inode).
private func place(_ text: String, at path: String) throws {
    let staged = path + ".staged"
    try Data(text.utf8).write(to: URL(fileURLWithPath: staged))
    // Whatever the umask: a source refuses a file that group or others can write.
    try #require(chmod(staged, 0o600) == 0)
    try #require(rename(staged, path) == 0)
}

/// Gets client credentials through `fixture`'s federated client authenticated by `source` and
/// checks the request: `client_id`, the JWT-bearer assertion type, the workload issuer's token as
/// the assertion (`expected` when given), no secret. Returns the assertion sent.
@discardableResult
private func expectFederatedLogin(
    _ fixture: Fixture, source: IdentitySource, environment: [String: String]? = nil, sends expected: String? = nil
) async throws -> String {
    let recorder = RecordingTransport(fixture.client)
    let api = fixture.federatedAPI(source, environment: environment, transport: recorder)
    #expect(try await api.clientAuthenticationMethodInUse() == .privateKeyJWT)
    #expect(try await api.clientAuthenticationAttributes() == [StoredProfile.clientAuthenticationAttribute: "private_key_jwt"])
    let credentials = try await api.clientCredentials(for: TokenTarget(resources: ["https://api.example/"]))
    let issued = try claims(of: try #require(credentials.accessToken))
    #expect(issued["client_id"]?.stringValue == workloadClientID)
    let form = try #require(recorder.forms.withLock { $0.last })
    #expect(form.contains { $0 == ("client_id", workloadClientID) })
    #expect(form.contains { $0 == ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer") })
    #expect(!form.contains { $0.0 == "client_secret" })
    let assertion = try #require(recorder.assertions.last)
    if let expected { #expect(assertion == expected) }
    #expect(try claims(of: assertion).issuer == fixture.server.workloadIssuer)
    return assertion
}

@Suite(.timeLimit(.minutes(2)))
struct WorkloadIdentityTests {
    // MARK: Federated client authentication, from each kind of source

    @Test func aFileSourceAuthenticatesTheClient() async throws {
        try await withWorkloadClient { fixture in
            try await withTemporaryDirectory { directory in
                let path = directory + "/token"
                let token = fixture.mint()
                try place(token + "\n", at: path)
                try await expectFederatedLogin(fixture, source: .file(path), sends: token)
            }
        }
    }

    @Test func aProgramSourceAuthenticatesTheClient() async throws {
        try await withWorkloadClient { fixture in
            try await withTemporaryDirectory { directory in
                let token = fixture.mint()
                let program = directory + "/print-token"
                try writeExecutable("#!/bin/sh\nprintf '%s\\n' '\(token)'\n", to: program)
                try await expectFederatedLogin(fixture, source: .program(program), sends: token)
            }
        }
    }

    @Test func aURLSourceReadsTheMetadataEndpoint() async throws {
        try await withWorkloadClient { fixture in
            let url = fixture.server.metadataTokenURL + "?" + FormURLEncoding.encode([("resource", fixture.server.issuer)])
            let assertion = try await expectFederatedLogin(fixture, source: .url(url, headers: ["Metadata": "true"], field: "access_token"))
            #expect(try claims(of: assertion).subject == DevServer.metadataSubject)
            #expect(try claims(of: assertion).audience == [fixture.server.issuer])

            // Without the header the endpoint refuses: the source's error, and nothing goes to the token endpoint.
            let before = fixture.tokenRequests
            let bare = fixture.federatedAPI(.url(url, field: "access_token"))
            let error = await thrown { try await bare.clientCredentials(scope: nil) }
            #expect((error as? ServerError)?.code == .unexpectedStatus)
            #expect(fixture.tokenRequests == before)
        }
    }

    @Test func theGitHubActionsSourceAsksTheRequestURLWithItsBearerToken() async throws {
        try await withWorkloadClient { fixture in
            let requestURL = fixture.server.gitHubTokenURL
            let environment = ["ACTIONS_ID_TOKEN_REQUEST_URL": requestURL, "ACTIONS_ID_TOKEN_REQUEST_TOKEN": fixture.server.gitHubRequestToken]
            let assertion = try await expectFederatedLogin(fixture, source: .gitHubActions(audience: fixture.server.issuer), environment: environment)
            #expect(try claims(of: assertion).subject == DevServer.gitHubSubject)
            #expect(try claims(of: assertion).audience == [fixture.server.issuer])

            // Another request token: the endpoint's 401, and nothing goes to the token endpoint. (Another
            // audience too, so that the token cached for the first is not what answers.)
            let before = fixture.tokenRequests
            let wrong = fixture.federatedAPI(
                .gitHubActions(audience: fixture.server.issuer + "/"),
                environment: ["ACTIONS_ID_TOKEN_REQUEST_URL": requestURL, "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "not-the-request-token"])
            let error = await thrown { try await wrong.clientCredentials(scope: nil) }
            #expect((error as? ServerError)?.code == .unexpectedStatus)
            #expect((error as? ServerError)?.status == 401)
            #expect(fixture.tokenRequests == before)
        }
    }

    @Test func anEnvironmentVariableSourceAuthenticatesTheClient() async throws {
        try await withWorkloadClient { fixture in
            let name = "LOGINKIT_TEST_WORKLOAD_TOKEN_" + UUID().uuidString.replacingOccurrences(of: "-", with: "_")
            let token = fixture.mint()
            try await expectFederatedLogin(fixture, source: .environment(name), environment: [name: token], sends: token)

            // Unset: a configuration error that names the variable, and nothing sent.
            let before = fixture.tokenRequests
            let unset = fixture.federatedAPI(.environment(name + "_UNSET"), environment: [:])
            let error = await thrown { try await unset.clientCredentials(scope: nil) } as? LoginError
            #expect(error?.code == .invalidConfiguration)
            #expect(error?.message.contains(name + "_UNSET") == true)
            #expect(fixture.tokenRequests == before)
        }
    }

    // MARK: Refusals

    @Test func anAssertionWithTheWrongAudienceSubjectSignatureOrExpiryIsRefused() async throws {
        try await withWorkloadClient { fixture in
            try await withTemporaryDirectory { directory in
                /// What a client-credentials request authenticated by `token` (from a file of its own) throws.
                func outcome(of token: String, file name: String) async throws -> (any Error)? {
                    let path = directory + "/" + name
                    try place(token, at: path)
                    let api = fixture.federatedAPI(.file(path))
                    return await thrown { try await api.clientCredentials(scope: nil) }
                }
                let audience = try await outcome(of: fixture.mint(audience: "https://elsewhere.example"), file: "audience")
                #expect((audience as? LoginError)?.code == .invalidClient)
                let subject = try await outcome(of: fixture.mint("system:serviceaccount:default:intruder"), file: "subject")
                #expect((subject as? LoginError)?.code == .invalidClient)
                // Signed by a key with the workload issuer's `kid` that it does not publish.
                let forged = fixture.server.mintWorkloadToken(subject: podSubject, audience: fixture.server.issuer, signedWithForeignKey: true)
                let signature = try await outcome(of: forged, file: "signature")
                #expect((signature as? LoginError)?.code == .invalidClient)
                let accepted = try await outcome(of: fixture.mint(), file: "genuine").map { "\($0)" }
                #expect(accepted == nil)

                // Expired by the provider's clock (this process's, which the source goes by, has not
                // moved): the provider refuses it.
                let expiring = fixture.mint()
                fixture.clock.advance(by: .seconds(301))
                let expired = try await outcome(of: expiring, file: "expired")
                #expect((expired as? LoginError)?.code == .invalidClient)

                // Expired already when read: the source refuses it, and nothing is sent.
                let before = fixture.tokenRequests
                let stale = fixture.server.mintWorkloadToken(
                    subject: podSubject, audience: fixture.server.issuer, lifetime: .seconds(60), issuedAt: Date().addingTimeInterval(-3600))
                let refusedBySource = try await outcome(of: stale, file: "stale")
                #expect((refusedBySource as? LoginError)?.code == .invalidConfiguration)
                #expect(fixture.tokenRequests == before)
                let message = refusedBySource.map { "\($0)" } ?? ""
                #expect(!message.contains(stale))
            }
        }
    }

    @Test func aSourceMeansPrivateKeyJWTAndExcludesAKey() throws {
        var configuration = OAuth2API.Configuration(issuer: "https://id.example", clientID: "c")
        configuration.clientAssertionSource = .file("/nonexistent/token")
        #expect(try OAuth2API.method(for: configuration, supported: nil) == .privateKeyJWT)
        #expect(try OAuth2API.method(for: configuration, supported: ["client_secret_basic"]) == .privateKeyJWT)
        configuration.clientAuthenticationMethod = .privateKeyJWT
        #expect(try OAuth2API.method(for: configuration, supported: nil) == .privateKeyJWT)
        configuration.clientAssertionKey = try SigningKey.generate(.es256, keyID: nil)
        let both = #expect(throws: LoginError.self) { try OAuth2API.method(for: configuration, supported: nil) }
        #expect(both?.code == .invalidConfiguration)
        configuration.clientAuthenticationMethod = .automatic
        let automatic = #expect(throws: LoginError.self) { try OAuth2API.method(for: configuration, supported: nil) }
        #expect(automatic?.code == .invalidConfiguration)
    }

    @Test func aDPoPNonceRetrySendsTheSameSourceTokenAgain() async throws {
        try await withWorkloadClient(configure: { $0.dpopNonceAtTokenEndpoint = true }) { fixture in
            try await withTemporaryDirectory { directory in
                let path = directory + "/token"
                let token = fixture.mint()
                try place(token, at: path)
                let recorder = RecordingTransport(fixture.client)
                var configuration = fixture.federatedAPI(.file(path)).configuration
                configuration.dpopAlgorithm = .es256
                let api = OAuth2API(configuration: configuration, transport: recorder, now: { fixture.clock.now })
                let credentials = try await api.clientCredentials(scope: nil)
                #expect(credentials.proofKey != nil)
                // Challenged once for the nonce, then sent again with the platform's same token.
                #expect(recorder.assertions == [token, token])
                #expect(IdentitySource.fetchCount(of: .file(path)) == 1)
            }
        }
    }

    // MARK: The JWT-bearer grant

    @Test func theJWTBearerGrantIssuesATokenForTheWorkload() async throws {
        try await withWorkloadClient { fixture in
            try await withTemporaryDirectory { directory in
                let path = directory + "/token"
                try place(fixture.mint(), at: path)
                let target = TokenTarget(resources: ["https://api.example/"])

                // A public client: the grant names it with client_id, and nothing authenticates it.
                let recorder = RecordingTransport(fixture.client)
                let api = fixture.assertionGrantAPI(.file(path), transport: recorder)
                let issued = try claims(of: try #require(try await api.clientCredentials(for: target).accessToken))
                #expect(issued.subject == podSubject)
                #expect(issued.audience == ["https://api.example/"])
                #expect(issued["client_id"]?.stringValue == "loginkit-cli")
                let form = try #require(recorder.forms.withLock { $0.last })
                #expect(form.first.map { $0 == ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer") } == true)
                #expect(form.contains { $0.0 == "assertion" })
                #expect(form.contains { $0 == ("client_id", "loginkit-cli") })
                #expect(!form.contains { $0.0 == "client_assertion" || $0.0 == "client_secret" })

                // A confidential client authenticates as configured besides.
                let confidential = fixture.assertionGrantAPI(.file(path), clientID: "loginkit-service", secret: "dev-secret")
                let serviceToken = try claims(of: try #require(try await confidential.clientCredentials(for: target).accessToken))
                #expect(serviceToken.subject == podSubject)
                #expect(serviceToken["client_id"]?.stringValue == "loginkit-service")

                // An assertion the provider refuses: invalid credentials that name the source.
                let elsewhere = directory + "/elsewhere"
                try place(fixture.mint(audience: "https://elsewhere.example"), at: elsewhere)
                let rejected = fixture.assertionGrantAPI(.file(elsewhere))
                let error = await thrown { try await rejected.clientCredentials(for: target) } as? LoginError
                #expect(error?.code == .invalidCredentials)
                #expect(error?.providerError == "invalid_grant")
                #expect(error?.message.contains("file:" + elsewhere) == true)
            }
        }
    }

    // MARK: Refreshes ask the source again

    @Test func aJWTBearerProfileRefreshesByAskingItsSourceAgain() async throws {
        try await withWorkloadClient { fixture in
            try await withTemporaryDirectory { directory in
                let path = directory + "/token"
                let source = IdentitySource.file(path)
                try place(fixture.mint(), at: path)
                let service = AuthService(
                    api: fixture.assertionGrantAPI(source), store: fixture.store, clock: fixture.clock, configuration: Fixture.serviceConfiguration)
                _ = try await service.logInAsClient()
                let profile = try #require(try await fixture.store.profile(named: "default"))
                #expect(profile.attributes["grant"] == "jwt_bearer")
                #expect(profile.attributes["assertion_source"] == source.specification)
                #expect(profile.attributes["client_assertion_source"] == nil)
                #expect(profile.credentials.refreshToken == nil)
                #expect(try claims(of: try await service.validAccessToken()).subject == podSubject)

                // The platform rotates the file and the token expires: the next refresh reads the new file.
                fixture.clock.advance(by: .seconds(3601))
                try place(fixture.mint("system:serviceaccount:default:rotated"), at: path)
                let requests = fixture.tokenRequests
                let fetches = IdentitySource.fetchCount(of: source)
                let refreshed = try await service.validAccessToken()
                #expect(try claims(of: refreshed).subject == "system:serviceaccount:default:rotated")
                #expect(fixture.tokenRequests == requests + 1)
                #expect(IdentitySource.fetchCount(of: source) == fetches + 1)
            }
        }
    }

    @Test func aFederatedProfileReadsTheRotatedFileOnceForEveryConcurrentCaller() async throws {
        try await withWorkloadClient { fixture in
            try await withTemporaryDirectory { directory in
                let path = directory + "/token"
                let source = IdentitySource.file(path)
                let first = fixture.mint()
                try place(first, at: path)
                let recorder = RecordingTransport(fixture.client)
                let service = AuthService(
                    api: fixture.federatedAPI(source, transport: recorder), store: fixture.store, clock: fixture.clock,
                    configuration: Fixture.serviceConfiguration)
                _ = try await service.logInAsClient()
                let profile = try #require(try await fixture.store.profile(named: "default"))
                #expect(profile.attributes["grant"] == "client_credentials")
                #expect(profile.attributes["client_assertion_source"] == source.specification)
                #expect(recorder.assertions == [first])
                let served = try await service.validAccessToken()

                // Rotated and expired (the first token too, by the provider's clock): fifty callers,
                // one read of the new file, one token request, one new token.
                fixture.clock.advance(by: .seconds(3601))
                let second = fixture.mint()
                try place(second, at: path)
                let requests = fixture.tokenRequests
                let fetches = IdentitySource.fetchCount(of: source)
                let tokens = try await withThrowingTaskGroup(of: String.self) { group in
                    for _ in 0..<50 { group.addTask { try await service.validAccessToken() } }
                    return try await group.reduce(into: Set<String>()) { $0.insert($1) }
                }
                #expect(tokens.count == 1)
                #expect(tokens.first != served)
                #expect(fixture.tokenRequests == requests + 1)
                #expect(IdentitySource.fetchCount(of: source) == fetches + 1)
                #expect(recorder.assertions == [first, second])
            }
        }
    }

    @Test func theRefresherAndClientCredentialsTokensReadTheRotatedFile() async throws {
        try await withWorkloadClient(configure: { $0.accessTokenLifetime = .seconds(1200) }) { fixture in
            try await withTemporaryDirectory { directory in
                let path = directory + "/token"
                let first = fixture.mint()
                try place(first, at: path)
                let recorder = RecordingTransport(fixture.client)
                let tokens = ClientCredentialsTokens(api: fixture.federatedAPI(.file(path), transport: recorder), store: fixture.store, clock: fixture.clock)
                let target = TokenTarget(audience: "https://stock.example")
                var configuration = ClientTokenRefresher.Configuration()
                configuration.maximumInterval = .seconds(3600)
                let refresher = ClientTokenRefresher(tokens: tokens, targets: [target], configuration: configuration, clock: fixture.clock)
                var events = refresher.events.makeAsyncIterator()
                let run = Task { try await refresher.run() }
                guard case .refreshed = try #require(await events.next()) else {
                    Issue.record("expected the first token")
                    return
                }
                await fixture.clock.waitForSleepers()
                let served = try #require(refresher.accessToken(for: target))
                #expect(recorder.assertions == [first])
                let name = ClientCredentialsTokens.profileName(base: "default", target: target)
                #expect(try await fixture.store.profile(named: name)?.attributes["grant"] == "client_credentials")

                // Rotated before the refresher wakes (the new token lives past then, the first does not).
                let second = fixture.mint(lifetime: .seconds(3600))
                try place(second, at: path)
                let untilRefresh = try #require(fixture.clock.sleptDurations.last)
                fixture.clock.advance(by: untilRefresh)
                guard case .refreshed = try #require(await events.next()) else {
                    Issue.record("expected the refresh")
                    return
                }
                #expect(refresher.accessToken(for: target) != served)
                #expect(recorder.assertions == [first, second])
                run.cancel()
                guard case .stopped = try #require(await events.next()) else {
                    Issue.record("expected the stop")
                    return
                }
                try await run.value

                // Asked on demand once the token has expired: rotated again, read again.
                fixture.clock.advance(by: .seconds(1200))
                let third = fixture.mint()
                try place(third, at: path)
                _ = try await tokens.accessToken(for: target)
                #expect(recorder.assertions == [first, second, third])
            }
        }
    }

    // MARK: Token exchange

    @Test func anExchangeTakesItsSubjectAndActorTokensFromASource() async throws {
        try await withWorkloadClient { fixture in
            try await withTemporaryDirectory { directory in
                let path = directory + "/token"
                try place(fixture.mint(), at: path)
                let source = IdentitySource.file(path)
                let configuration = OAuth2API.Configuration(issuer: fixture.server.issuer, clientID: "loginkit-service", clientSecret: "dev-secret")
                let api = OAuth2API(configuration: configuration, transport: fixture.client, now: { fixture.clock.now })

                let subject = try await source.token(transport: fixture.client)
                let exchanged = try await api.exchangeToken(
                    TokenExchangeRequest(
                        subjectToken: subject, subjectTokenType: TokenExchangeRequest.jwtType, target: TokenTarget(audience: "https://orders.example")))
                let issued = try claims(of: exchanged.token)
                #expect(issued.subject == podSubject)
                #expect(issued.audience == ["https://orders.example"])
                #expect(issued["client_id"]?.stringValue == "loginkit-service")

                let asIDToken = try await api.exchangeToken(
                    TokenExchangeRequest(subjectToken: subject, subjectTokenType: TokenExchangeRequest.idTokenType, target: TokenTarget(audience: "https://orders.example")))
                #expect(try claims(of: asIDToken.token).subject == podSubject)

                // The workload as the actor, for the service's own token.
                let own = try #require(try await api.clientCredentials(scope: nil).accessToken)
                let delegated = try await api.exchangeToken(
                    TokenExchangeRequest(
                        subjectToken: own, actorToken: subject, actorTokenType: TokenExchangeRequest.jwtType,
                        target: TokenTarget(resources: ["https://api.example/"])))
                #expect(try claims(of: delegated.token)["act"]?["sub"]?.stringValue == podSubject)
                #expect(IdentitySource.fetchCount(of: source) == 1)
            }
        }
    }

    // MARK: Where a source's token goes

    /// A discovery document naming another host's revocation, device authorization or pushed
    /// authorization request endpoint gets no federated assertion: the platform's token is a bearer
    /// credential at the provider. The source is not even asked; an endpoint the configuration
    /// sets is the caller's choice.
    @Test func aFederatedAssertionIsSentOnlyToEndpointsOnTheIssuersOrigin() async throws {
        let elsewhere = "https://elsewhere.example"
        let transport = DiscoveryOnlyTransport([
            "token_endpoint": .string(DiscoveryOnlyTransport.issuer + "/token"),
            "revocation_endpoint": .string(elsewhere + "/revoke"),
            "device_authorization_endpoint": .string(elsewhere + "/device"),
            "pushed_authorization_request_endpoint": .string(elsewhere + "/par"),
        ])
        let name = uniqueVariableName()
        let source = IdentitySource.environment(name)
        let configuration = discoveryOnlyConfiguration(source, environment: [name: "platform-token"])
        let api = OAuth2API(configuration: configuration, transport: transport)

        let revoke = await thrown { try await api.revoke(Credentials(accessToken: "access-token")) } as? ServerError
        let device = await thrown { try await api.startDeviceAuthorization() } as? ServerError
        let metadata = try await api.metadata()
        let parEndpoint = try #require(metadata.pushedAuthorizationRequestEndpoint)
        let push = await thrown {
            try await api.push([("response_type", "code")], to: parEndpoint, provider: metadata, scope: "", proofKey: nil)
        } as? ServerError
        let refusals = [
            (revoke, "revocation_endpoint", "OAuth2API.Configuration.endpoints.revocation"),
            (device, "device_authorization_endpoint", "OAuth2API.Configuration.endpoints.deviceAuthorization"),
            (push, "pushed_authorization_request_endpoint", "pushesAuthorizationRequests = false"),
        ]
        for (error, endpoint, fix) in refusals {
            #expect(error?.code == .misconfigured, "\(endpoint): \(String(describing: error))")
            #expect(error?.message.contains(endpoint) == true, "\(error?.message ?? "")")
            #expect(error?.message.contains(fix) == true, "\(error?.message ?? "")")
            #expect(error?.message.contains("platform-token") == false)
        }
        #expect(transport.requests(to: "elsewhere.example").isEmpty)
        #expect(IdentitySource.fetchCount(of: source) == 0)

        // The token endpoint, on the issuer's origin, gets it.
        _ = try await api.clientCredentials(scope: nil)
        #expect(IdentitySource.fetchCount(of: source) == 1)

        // Set in the configuration, another origin's revocation endpoint is the caller's choice.
        var explicit = configuration
        explicit.endpoints.revocation = elsewhere + "/revoke"
        #expect(try await OAuth2API(configuration: explicit, transport: transport).revoke(Credentials(accessToken: "access-token")))
        #expect(transport.requests(to: "elsewhere.example") == [elsewhere + "/revoke"])
    }

    /// A discovered token endpoint on another origin (another host, or the issuer's host on another
    /// port) gets neither a federated assertion nor a JWT-bearer grant's assertion, and the source
    /// is not asked; set in the configuration, it gets them.
    @Test func aDiscoveredTokenEndpointOnAnotherOriginGetsNoSourceToken() async throws {
        for tokenEndpoint in ["https://tokens.elsewhere.example/token", "https://id.example:8443/token"] {
            let transport = DiscoveryOnlyTransport(["token_endpoint": .string(tokenEndpoint)])
            let host = try #require(URLParts(tokenEndpoint)).host
            let name = uniqueVariableName()
            let source = IdentitySource.environment(name)
            let configurations = [false, true].map { discoveryOnlyConfiguration(source, environment: [name: "platform-token"], grant: $0) }
            for configuration in configurations {
                let error = await thrown { try await OAuth2API(configuration: configuration, transport: transport).clientCredentials(scope: nil) } as? ServerError
                #expect(error?.code == .misconfigured, "\(String(describing: error))")
                #expect(error?.message.contains("token_endpoint") == true, "\(error?.message ?? "")")
                #expect(error?.message.contains("OAuth2API.Configuration.endpoints.token") == true, "\(error?.message ?? "")")
            }
            #expect(transport.urls.withLock { $0.filter { $0 == tokenEndpoint } }.isEmpty, "\(host)")
            #expect(IdentitySource.fetchCount(of: source) == 0)

            for var configuration in configurations {
                configuration.endpoints.token = tokenEndpoint
                _ = try await OAuth2API(configuration: configuration, transport: transport).clientCredentials(scope: nil)
            }
            #expect(transport.urls.withLock { $0.filter { $0 == tokenEndpoint } }.count == 2)
        }
    }

    /// The JWT-bearer grant's assertion is asked of its source once discovery is loaded, right
    /// before the token request, so that it has not aged meanwhile.
    @Test func theJWTBearerAssertionIsFetchedAfterDiscovery() async throws {
        try await withWorkloadClient { fixture in
            let recorder = PathRecordingTransport(fixture.client)
            // A query of its own: the sources' cache is the process's.
            let url = fixture.server.metadataTokenURL + "?" + FormURLEncoding.encode([("resource", fixture.server.issuer), ("test", UUID().uuidString)])
            let api = fixture.assertionGrantAPI(.url(url, headers: ["Metadata": "true"], field: "access_token"), transport: recorder)
            let issued = try claims(of: try #require(try await api.clientCredentials(scope: nil).accessToken))
            #expect(issued.subject == DevServer.metadataSubject)
            let paths = recorder.paths.withLock { $0 }
            let discovery = try #require(paths.firstIndex { $0.hasSuffix("/.well-known/openid-configuration") }, "\(paths)")
            let source = try #require(paths.firstIndex { $0.hasSuffix("/workload/metadata/token") }, "\(paths)")
            let token = try #require(paths.firstIndex { $0.hasSuffix("/oauth/token") }, "\(paths)")
            #expect(discovery < source && source < token, "\(paths)")
        }
    }

    // MARK: A refused token is fetched again

    /// A token the provider refuses — as the client's assertion (`invalid_client`) or as the grant
    /// (`invalid_grant`) — is not kept: after the platform writes a new one, long before the
    /// refused one expires, the next request runs the program again and succeeds.
    @Test func aRefusedSourceTokenIsFetchedAgainAtTheNextRequest() async throws {
        try await withWorkloadClient { fixture in
            try await withTemporaryDirectory { directory in
                // Each program prints what its platform last wrote: kept while valid (no file of its
                // own to watch), so a refused token would otherwise go again until it nears expiry.
                func source(_ name: String) throws -> (source: IdentitySource, current: String) {
                    let current = directory + "/" + name
                    let program = directory + "/print-" + name
                    try writeExecutable("#!/bin/sh\ncat '\(current)'\n", to: program)
                    try place(fixture.mint(audience: "https://elsewhere.example"), at: current)
                    return (.program(program), current)
                }
                let recorder = RecordingTransport(fixture.client)

                let client = try source("client-assertion")
                let federated = fixture.federatedAPI(client.source, transport: recorder)
                let refusedClient = await thrown { try await federated.clientCredentials(scope: nil) } as? LoginError
                #expect(refusedClient?.code == .invalidClient)
                let accepted = fixture.mint()
                try place(accepted, at: client.current)
                _ = try await federated.clientCredentials(scope: nil)
                #expect(recorder.assertions.last == accepted)
                #expect(IdentitySource.fetchCount(of: client.source) == 2)

                let grant = try source("grant-assertion")
                let bearer = fixture.assertionGrantAPI(grant.source, transport: recorder)
                let refusedGrant = await thrown { try await bearer.clientCredentials(scope: nil) } as? LoginError
                #expect(refusedGrant?.code == .invalidCredentials)
                let acceptedGrant = fixture.mint()
                try place(acceptedGrant, at: grant.current)
                let issued = try claims(of: try #require(try await bearer.clientCredentials(scope: nil).accessToken))
                #expect(issued.subject == podSubject)
                #expect(recorder.forms.withLock { forms in forms.last?.first { $0.0 == "assertion" }?.1 } == acceptedGrant)
                #expect(IdentitySource.fetchCount(of: grant.source) == 2)
            }
        }
    }
}
