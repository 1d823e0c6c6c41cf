import Foundation
import LoginKitHTTP
import LoginKit
import LoginKitDevServer
import LoginKitMocks
import LoginKitTestSupport
import Testing

/// Browser logins end to end: real sockets, the dev server's authorization endpoint, the test browser.
@Suite(.timeLimit(.minutes(2)))
struct BrowserLoginTests {
    func login(_ fixture: Fixture, launcher: any BrowserLauncher, api: OAuth2API? = nil) -> BrowserLogin {
        BrowserLogin(api: api ?? fixture.api, launcher: launcher, clock: fixture.clock)
    }

    @Test func signsInThroughTheBrowserWithPKCEStateAndNonce() async throws {
        try await withFixture(configure: unpushed) { fixture in
            let browser = TestBrowser(transport: fixture.client)
            let events = EventLog()
            let credentials = try await login(fixture, launcher: browser).run(onEvent: { events.record($0) })
            #expect(credentials.accessToken != nil)
            #expect(credentials.refreshToken != nil)
            #expect(credentials.issuer == fixture.server.issuer)
            let url = try #require(browser.openedURLs.first)
            let claims = try #require(try credentials.idToken?.unverifiedClaims())
            #expect(claims["preferred_username"]?.stringValue == "demo")
            #expect(claims.nonce != nil)
            #expect(claims.nonce == parameter("nonce", in: url))
            #expect(parameter("response_type", in: url) == "code")
            #expect(parameter("code_challenge_method", in: url) == "S256")
            #expect(parameter("code_challenge", in: url)?.count == 43)
            #expect((parameter("state", in: url)?.count ?? 0) >= 43)
            #expect(fixture.tokenRequests == 1)
            // The form, then its submission.
            #expect(fixture.server.monitor.requestCount(path: "/oauth/authorize") == 2)

            let redirect = try #require(browser.deliveredRedirects.first)
            #expect(parameter("iss", in: redirect) == fixture.server.issuer)
            let page = try #require(browser.callbackPages.first)
            #expect(page.status == 200)
            expectNoSecrets(
                in: browser.callbackPages, code: try #require(parameter("code", in: redirect)), credentials: credentials
            )

            let redirectURI = try #require(parameter("redirect_uri", in: url))
            #expect(events.all == [.waitingForBrowser(url: url, redirectURI: redirectURI), .exchangingCode])
            // The receiver is closed: its port can be bound again.
            let port = try #require(URLParts(redirectURI)?.port)
            try LoopbackReceiver(addresses: [ListenAddress(port: port)]).close()
        }
    }

    /// A request to the callback without this login's `state` — the browser's redirect rewritten by
    /// an attacker, then one with no state at all — gets an error page and is reported; neither ends
    /// the login nor is exchanged, and the real redirect, delivered afterwards, completes it.
    @Test func aRedirectWithAnotherOrNoStateGetsAnErrorPageAndTheLoginWaitsForItsOwn() async throws {
        try await withFixture(configure: unpushed) { fixture in
            let genuine = LockedState<String?>(nil)
            let browser = TestBrowser(
                transport: fixture.client,
                rewriteRedirect: { redirect in
                    genuine.withLock { $0 = redirect }
                    return replacingParameter("state", with: "forged-state", in: redirect)
                })
            let events = EventLog()
            let browserLogin = login(fixture, launcher: browser)
            async let outcome = browserLogin.run(onEvent: { events.record($0) })
            await events.waitFor(.foreignResponseRefused)
            let redirect = try #require(genuine.withLock { $0 })
            let code = try #require(parameter("code", in: redirect))

            let stateless = try #require(HTTPRequest(method: .get, url: replacingParameter("state", with: nil, in: redirect)))
            let (refused, refusalPage) = try await fixture.client.send(stateless, body: nil)
            #expect(refused.status.code == 400)
            #expect(!String(decoding: refusalPage, as: UTF8.self).contains(code))
            #expect(fixture.tokenRequests == 0, "nothing exchanged")

            try await browser.deliver(redirect)
            let credentials = try await outcome
            #expect(credentials.accessToken != nil)
            #expect(fixture.tokenRequests == 1)
            #expect(browser.callbackPages.map(\.status).sorted() == [200, 400], "the forged one refused, the real one taken")
            for page in browser.callbackPages { #expect(!page.body.contains("forged-state")) }
            expectNoSecrets(in: browser.callbackPages, code: code, credentials: credentials)
            #expect(events.all.contains(.foreignResponseRefused))
        }
    }

    @Test func aDenialEndsTheLoginAsRejectedCredentials() async throws {
        try await withFixture(configure: unpushed) { fixture in
            let browser = TestBrowser(transport: fixture.client, action: .deny)
            let error = await thrown { try await login(fixture, launcher: browser).run() }
            #expect((error as? LoginError)?.code == .accessDenied, "\(String(describing: error))")
            #expect((error as? LoginError)?.providerError == "access_denied")
            #expect(fixture.tokenRequests == 0)
            let page = try #require(browser.callbackPages.first)
            #expect(page.status == 200)
            #expect(!page.body.contains("the user denied the request"))  // error_description is never echoed
        }
    }

    @Test func theLoginTimesOutOnTheInjectedClock() async throws {
        try await withFixture(configure: unpushed) { fixture in
            let events = EventLog()
            async let outcome = thrown {
                try await login(fixture, launcher: NoBrowserLauncher()).run(onEvent: { events.record($0) })
            }
            await fixture.clock.waitForSleepers(1)
            fixture.clock.advance(by: .seconds(179))
            #expect(fixture.clock.sleeperCount == 1)
            fixture.clock.advance(by: .seconds(1))
            let error = await outcome
            #expect((error as? LoginError)?.code == .interactionTimedOut, "\(String(describing: error))")
            #expect((error as? LoginError)?.message.contains("180 s") == true)
            #expect(fixture.clock.sleptDurations == [.seconds(180)])
            let redirectURI = try #require(events.redirectURI)
            let port = try #require(URLParts(redirectURI)?.port)
            try LoopbackReceiver(addresses: [ListenAddress(port: port)]).close()
        }
    }

    @Test func cancellingWhileWaitingClosesTheListener() async throws {
        try await withFixture(configure: unpushed) { fixture in
            let events = EventLog()
            let browserLogin = login(fixture, launcher: NoBrowserLauncher())
            let task = Task { try await browserLogin.run(onEvent: { events.record($0) }) }
            let redirectURI = await events.waitForRedirectURI()
            let port = try #require(URLParts(redirectURI)?.port)
            let callback = try #require(HTTPRequest(method: .get, url: redirectURI))
            task.cancel()
            let error = await thrown { try await task.value }
            #expect(error is CancellationError, "\(String(describing: error))")
            // Nothing listens any more, and the port is free to bind.
            let refused = await thrown { try await fixture.client.send(callback, body: nil) }
            #expect((refused as? NetworkError)?.code == .connectFailed, "\(String(describing: refused))")
            try LoopbackReceiver(addresses: [ListenAddress(port: port)]).close()
        }
    }

    @Test func aWrongPKCEVerifierIsRefusedByTheProvider() async throws {
        try await withFixture(configure: unpushed) { fixture in
            let other = try PKCE.generate()
            let browser = TestBrowser(
                transport: fixture.client,
                rewriteAuthorizationURL: { replacingParameter("code_challenge", with: other.challenge, in: $0) }
            )
            let error = await thrown { try await login(fixture, launcher: browser).run() }
            #expect((error as? LoginError)?.providerError == "invalid_grant", "\(String(describing: error))")
            #expect(fixture.tokenRequests == 1)
        }
    }

    @Test(arguments: ["plain", nil] as [String?])
    func theProviderRefusesPlainOrMissingPKCE(_ method: String?) async throws {
        try await withFixture(configure: unpushed) { fixture in
            let request = try await fixture.api.authorizationRequest(
                redirectURI: "http://127.0.0.1:9/callback", options: AuthorizationOptions())
            var url = replacingParameter("code_challenge_method", with: method, in: request.url)
            if method == nil { url = replacingParameter("code_challenge", with: nil, in: url) }
            let (response, _) = try await fixture.client.send(
                try #require(HTTPRequest(method: .get, url: url)), body: nil)
            #expect(response.status.code == 302)
            let location = try #require(response.headerFields[.location])
            #expect(location.hasPrefix("http://127.0.0.1:9/callback?"))
            #expect(parameter("error", in: location) == "invalid_request")
            #expect(parameter("state", in: location) == request.state)
            #expect(parameter("iss", in: location) == fixture.server.issuer)
        }
    }

    @Test func anIDTokenWithAnotherNonceIsRefused() async throws {
        try await withFixture(configure: unpushed) { fixture in
            let browser = TestBrowser(
                transport: fixture.client,
                rewriteAuthorizationURL: { replacingParameter("nonce", with: "another-nonce", in: $0) })
            let error = await thrown { try await login(fixture, launcher: browser).run() }
            #expect((error as? TokenVerificationError)?.code == .nonceMismatch, "\(String(describing: error))")
            #expect(fixture.tokenRequests == 1)
        }
    }

    @Test(arguments: ["https://impostor.example", nil] as [String?])
    func aRedirectFromAnotherOrNoIssuerIsRefused(_ issuer: String?) async throws {
        try await withFixture(configure: unpushed) { fixture in
            let browser = TestBrowser(
                transport: fixture.client, rewriteRedirect: { replacingParameter("iss", with: issuer, in: $0) })
            let error = await thrown { try await login(fixture, launcher: browser).run() }
            #expect((error as? LoginError)?.code == .issuerMismatch, "\(String(describing: error))")
            #expect(fixture.tokenRequests == 0)
            #expect(browser.callbackPages.first?.status == 400)
        }
    }

    @Test(arguments: [false, true])
    func aPastedRedirectCompletesTheLoginWhenNoBrowserOpens(failingBrowserVariable: Bool) async throws {
        try await withFixture(configure: unpushed) { fixture in
            let browser = TestBrowser(transport: fixture.client)
            let launcher: any BrowserLauncher =
                failingBrowserVariable
                ? SystemBrowserLauncher(environment: ["BROWSER": "false", "PATH": "/usr/bin:/bin"])
                : NoBrowserLauncher()
            let junk = LockedState(["not an address at all"])
            let events = EventLog()
            let credentials = try await login(fixture, launcher: launcher).run(onEvent: { events.record($0) }) { url in
                if let text = junk.withLock({ $0.popLast() }) { return text }
                return try await browser.signIn(at: url)
            }
            #expect(credentials.accessToken != nil)
            #expect(browser.callbackPages.isEmpty)  // the redirect was pasted, never loaded
            #expect(events.all.contains { if case .browserUnavailable = $0 { true } else { false } })
            #expect(events.all.contains { if case .pastedRedirectRejected = $0 { true } else { false } })
        }
    }

    @Test func theRequestCarriesTheOptionsAndFreshSecretsEveryTime() async throws {
        try await withFixture(configure: unpushed) { fixture in
            let options = AuthorizationOptions(
                scope: "openid profile", loginHint: "demo", prompt: "login", acrValues: "urn:example:silver",
                extraParameters: [(name: "access_type", value: "offline")]
            )
            let redirectURI = "http://127.0.0.1:8000/callback"
            let first = try await fixture.api.authorizationRequest(redirectURI: redirectURI, options: options)
            let second = try await fixture.api.authorizationRequest(redirectURI: redirectURI, options: options)
            #expect(first.url.hasPrefix(fixture.server.issuer + "/oauth/authorize?"))
            for (name, value) in [
                ("client_id", "loginkit-cli"), ("redirect_uri", redirectURI), ("scope", "openid profile"),
                ("login_hint", "demo"),
                ("prompt", "login"), ("acr_values", "urn:example:silver"), ("access_type", "offline"),
                ("state", first.state),
            ] {
                #expect(parameter(name, in: first.url) == value, "\(name)")
            }
            let challenge = try PKCE(verifier: first.codeVerifier).challenge
            #expect(parameter("code_challenge", in: first.url) == challenge)
            #expect(first.requiresIssuerInResponse)
            #expect(first.state != second.state)
            #expect(first.nonce != second.nonce)
            #expect(first.codeVerifier != second.codeVerifier)
            #expect(!String(describing: first).contains(first.state))
            #expect(!String(describing: first).contains(first.codeVerifier))

            let withoutOpenID = try await fixture.api.authorizationRequest(
                redirectURI: redirectURI, options: AuthorizationOptions(scope: "profile"))
            #expect(withoutOpenID.nonce == nil)
            #expect(parameter("nonce", in: withoutOpenID.url) == nil)

            let reserved = AuthorizationOptions(extraParameters: [(name: "state", value: "chosen")])
            let error = await thrown {
                try await fixture.api.authorizationRequest(redirectURI: redirectURI, options: reserved)
            }
            #expect((error as? LoginError)?.code == .invalidConfiguration, "\(String(describing: error))")
        }
    }

    @Test func explicitEndpointsWorkWithoutDiscovery() async throws {
        try await withFixture(configure: unpushed) { fixture in
            var configuration = OAuth2API.Configuration(issuer: fixture.server.issuer, clientID: "loginkit-cli")
            configuration.usesDiscovery = false
            configuration.endpoints = OAuth2API.Endpoints(
                authorization: fixture.server.url("/oauth/authorize"), token: fixture.server.url("/oauth/token"),
                jwks: fixture.server.url("/.well-known/jwks.json")
            )
            let api = OAuth2API(configuration: configuration, transport: fixture.client, now: { fixture.clock.now })
            let credentials = try await login(fixture, launcher: TestBrowser(transport: fixture.client), api: api).run()
            #expect(credentials.idToken != nil)
            #expect(fixture.server.monitor.requestCount(path: "/.well-known/openid-configuration") == 0)
        }
    }

    @Test func anOAuth2OnlyProviderNeedsNeitherIDTokensNorKeys() async throws {
        try await withFixture(configure: unpushed) { fixture in
            var configuration = OAuth2API.Configuration(issuer: fixture.server.issuer, clientID: "loginkit-cli")
            configuration.usesDiscovery = false
            configuration.scope = "profile"
            configuration.endpoints = OAuth2API.Endpoints(
                authorization: fixture.server.url("/oauth/authorize"), token: fixture.server.url("/oauth/token"))
            let api = OAuth2API(configuration: configuration, transport: fixture.client, now: { fixture.clock.now })
            let credentials = try await login(fixture, launcher: TestBrowser(transport: fixture.client), api: api).run()
            #expect(credentials.idToken == nil)
            #expect(credentials.accessToken != nil)
            #expect(credentials.scope == "profile")

            // The same provider sending an ID token that nothing can verify: refused, not trusted.
            configuration.scope = "openid"
            let unverifiable = OAuth2API(
                configuration: configuration, transport: fixture.client, now: { fixture.clock.now })
            let error = await thrown {
                try await login(fixture, launcher: TestBrowser(transport: fixture.client), api: unverifiable).run()
            }
            #expect((error as? LoginError)?.code == .verifierRequired, "\(String(describing: error))")
        }
    }
}

// MARK: Helpers

/// Records a browser login's events; lets a test await the first one.
final class EventLog: Sendable {
    private let state = LockedState([BrowserLoginEvent]())
    private let stream: AsyncStream<BrowserLoginEvent>
    private let continuation: AsyncStream<BrowserLoginEvent>.Continuation

    init() {
        let (stream, continuation) = AsyncStream<BrowserLoginEvent>.makeStream()
        self.stream = stream
        self.continuation = continuation
    }

    func record(_ event: BrowserLoginEvent) {
        state.withLock { $0.append(event) }
        continuation.yield(event)
    }

    var all: [BrowserLoginEvent] { state.withLock { $0 } }

    /// The redirect URI of the `.waitingForBrowser` event seen so far, if any.
    var redirectURI: String? {
        for case .waitingForBrowser(_, let redirectURI) in all { return redirectURI }
        return nil
    }

    /// Waits for `.waitingForBrowser` and returns its redirect URI (one waiter per log).
    func waitForRedirectURI() async -> String {
        for await event in stream {
            if case .waitingForBrowser(_, let redirectURI) = event { return redirectURI }
        }
        return ""
    }

    /// Waits for `event` (one waiter per log).
    func waitFor(_ event: BrowserLoginEvent) async {
        for await next in stream where next == event { return }
    }
}

/// The first value of the query parameter `name` in `url`.
func parameter(_ name: String, in url: String) -> String? {
    guard let query = url.split(separator: "?", maxSplits: 1).dropFirst().first else { return nil }
    return FormURLEncoding.decodeFields(query).fields[name]
}

/// `url` with the query parameter `name` set to `value` (added when missing), or removed for `nil`.
func replacingParameter(_ name: String, with value: String?, in url: String) -> String {
    let pieces = url.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
    var pairs = pieces.count > 1 ? FormURLEncoding.decode(pieces[1]) : []
    let present = pairs.contains { $0.0 == name }
    pairs = pairs.compactMap { pair in pair.0 == name ? value.map { (name, $0) } : pair }
    if !present, let value { pairs.append((name, value)) }
    return String(pieces[0]) + "?" + FormURLEncoding.encode(pairs)
}

/// Checks that no page shows the authorization code or any of the tokens.
func expectNoSecrets(
    in pages: [TestBrowser.Page], code: String, credentials: Credentials? = nil,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    let secrets = [code, credentials?.accessToken, credentials?.refreshToken, credentials?.idToken?.rawValue].compactMap
    { $0 }
    for page in pages {
        for secret in secrets {
            #expect(!page.body.contains(secret), "a page shows a code or token", sourceLocation: sourceLocation)
        }
        #expect(!page.body.contains("code="), sourceLocation: sourceLocation)
    }
}
