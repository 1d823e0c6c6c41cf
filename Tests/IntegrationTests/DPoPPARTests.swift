import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitHTTP
import LoginKitMocks
import LoginKitTestSupport
import Testing

/// Pushed authorization requests (RFC 9126) against the dev identity provider: used when the
/// provider offers them, always when it requires them, and the browser then sees only the client
/// and the request URI.
@Suite(.timeLimit(.minutes(2)))
struct DPoPPARTests {
    /// The names of the query parameters of `url`, in order.
    func queryNames(_ url: String) -> [String] {
        guard let query = url.split(separator: "?", maxSplits: 1).dropFirst().first else { return [] }
        return FormURLEncoding.decode(query).map { $0.0 }
    }

    @Test(arguments: [false, true])
    func anOfferedPAREndpointGetsTheRequestAndTheBrowserOnlyItsURI(dpop: Bool) async throws {
        try await withFixture { fixture in
            let api = dpop ? dpopAPI(fixture) : fixture.api
            let browser = TestBrowser(transport: fixture.client)
            let credentials = try await BrowserLogin(api: api, launcher: browser, clock: fixture.clock).run()
            let url = try #require(browser.openedURLs.first)
            #expect(url.hasPrefix(fixture.server.issuer + "/oauth/authorize?"))
            #expect(queryNames(url).sorted() == ["client_id", "request_uri"])
            #expect(parameter("client_id", in: url) == "loginkit-cli")
            #expect(parameter("request_uri", in: url)?.hasPrefix("urn:ietf:params:oauth:request_uri:") == true)
            #expect(fixture.parRequestCount == 1)
            #expect(fixture.tokenRequests == 1)
            if dpop {
                try expectDPoPBound(credentials)  // dpop_jkt went in the pushed request
            } else {
                #expect(credentials.tokenType == "Bearer")
            }
            let claims = try #require(try credentials.idToken?.unverifiedClaims())
            #expect(claims["preferred_username"]?.stringValue == "demo")
        }
    }

    @Test func withPushingTurnedOffTheURLCarriesTheRequest() async throws {
        try await withFixture { fixture in
            let api = dpopAPI(fixture) { $0.pushesAuthorizationRequests = false }
            let browser = TestBrowser(transport: fixture.client)
            let credentials = try await BrowserLogin(api: api, launcher: browser, clock: fixture.clock).run()
            let url = try #require(browser.openedURLs.first)
            for name in ["response_type", "redirect_uri", "state", "code_challenge", "dpop_jkt"] {
                #expect(parameter(name, in: url) != nil, "\(name)")
            }
            #expect(parameter("request_uri", in: url) == nil)
            #expect(fixture.parRequestCount == 0)
            try expectDPoPBound(credentials)
        }
    }

    @Test func aProviderRequiringPARGetsItUnasked() async throws {
        try await withFixture(configure: { $0.par = .required }) { fixture in
            let browser = TestBrowser(transport: fixture.client)
            let credentials = try await BrowserLogin(api: dpopAPI(fixture), launcher: browser, clock: fixture.clock).run()
            try expectDPoPBound(credentials)
            #expect(fixture.parRequestCount == 1)
            let url = try #require(browser.openedURLs.first)
            #expect(queryNames(url).sorted() == ["client_id", "request_uri"])
        }
    }

    @Test func pushingTurnedOffForAProviderThatRequiresItIsAConfigurationError() async throws {
        try await withFixture(configure: { $0.par = .required }) { fixture in
            let api = dpopAPI(fixture) { $0.pushesAuthorizationRequests = false }
            let error = await thrown {
                try await api.authorizationRequest(redirectURI: "http://127.0.0.1:9/callback", options: AuthorizationOptions())
            }
            #expect((error as? LoginError)?.code == .invalidConfiguration, "\(String(describing: error))")
            #expect(fixture.parRequestCount == 0)
        }
    }

    @Test func pushingWithoutAnEndpointIsAMisconfiguredProvider() async throws {
        try await withFixture(configure: { $0.par = .absent }) { fixture in
            let api = dpopAPI(fixture) { $0.pushesAuthorizationRequests = true }
            let error = await thrown {
                try await api.authorizationRequest(redirectURI: "http://127.0.0.1:9/callback", options: AuthorizationOptions())
            }
            #expect((error as? ServerError)?.code == .misconfigured, "\(String(describing: error))")
            #expect(fixture.parRequestCount == 0)
            // Not asked to push, the same provider gets the request in the URL.
            let browser = TestBrowser(transport: fixture.client)
            let credentials = try await BrowserLogin(api: dpopAPI(fixture), launcher: browser, clock: fixture.clock).run()
            try expectDPoPBound(credentials)
            let url = try #require(browser.openedURLs.first)
            #expect(parameter("code_challenge", in: url) != nil)
        }
    }

    /// A confidential client authenticates at the PAR endpoint as at the token endpoint: with the
    /// right secret the login goes through; with a wrong one the push is refused as a token
    /// request would be, and no browser opens.
    @Test func aConfidentialClientAuthenticatesAtThePAREndpoint() async throws {
        try await withFixture(clientID: "loginkit-service", clientSecret: "dev-secret") { fixture in
            let browser = TestBrowser(transport: fixture.client)
            let credentials = try await BrowserLogin(api: dpopAPI(fixture), launcher: browser, clock: fixture.clock).run()
            try expectDPoPBound(credentials)
            #expect(fixture.parRequestCount == 1)

            let wrong = dpopAPI(fixture) { $0.clientSecret = "wrong-secret" }
            let refusedBrowser = TestBrowser(transport: fixture.client)
            let error = await thrown { try await BrowserLogin(api: wrong, launcher: refusedBrowser, clock: fixture.clock).run() }
            #expect((error as? LoginError)?.code == .invalidClient, "\(String(describing: error))")
            #expect(!String(describing: error as Any).contains("wrong-secret"))
            #expect(refusedBrowser.openedURLs.isEmpty)
            #expect(fixture.parRequestCount == 2)
            #expect(fixture.tokenRequests == 1)
        }
    }

    /// The options reach the provider through the pushed request: `acr_values` decides the
    /// issued tokens' `acr`, `max_age` is accepted.
    @Test func theOptionsArePushedToo() async throws {
        try await withFixture { fixture in
            let browser = TestBrowser(transport: fixture.client)
            var configuration = BrowserLogin.Configuration()
            configuration.authorization = AuthorizationOptions(acrValues: "urn:loginkit:acr:mfa", maxAge: 300)
            let credentials = try await BrowserLogin(api: dpopAPI(fixture), launcher: browser, clock: fixture.clock, configuration: configuration).run()
            try expectDPoPBound(credentials)
            let accessToken = try #require(credentials.accessToken)
            #expect(try jwsPartJSON(accessToken, 1)["acr"]?.stringValue == "urn:loginkit:acr:mfa")
            let url = try #require(browser.openedURLs.first)
            #expect(parameter("acr_values", in: url) == nil, "pushed, not in the URL")
            #expect(fixture.parRequestCount == 1)
        }
    }
}
