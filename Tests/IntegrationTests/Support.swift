import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitMocks
import LoginKitTestSupport
import Testing

/// A dev identity provider, a client, an OAuth2API and a store, all on one manual clock.
struct Fixture {
    let server: DevServer
    let client: CurlHTTPClient
    let clock: ManualClock
    let store: any TokenStore
    let api: OAuth2API

    /// The standard test configuration: short backoffs, a long refresh deadline (so that tests
    /// moving the manual clock do not trip it).
    static var serviceConfiguration: AuthService.Configuration {
        var configuration = AuthService.Configuration()
        configuration.initialBackoff = .seconds(1)
        configuration.maximumBackoff = .seconds(2)
        configuration.refreshTimeout = .seconds(100_000)
        return configuration
    }

    func service(profile: String = "default", configuration: AuthService.Configuration = Fixture.serviceConfiguration) -> AuthService {
        AuthService(api: api, store: store, profile: profile, clock: clock, configuration: configuration)
    }

    /// Token-endpoint requests seen so far.
    var tokenRequests: Int { server.monitor.requestCount(path: "/oauth/token") }
}

/// Runs `body` with a fresh fixture; everything stops afterwards.
func withFixture<T>(
    store: (any TokenStore)? = nil,
    clientID: String = "loginkit-cli",
    clientSecret: String? = nil,
    configure: (inout IdentityProviderConfiguration) -> Void = { _ in },
    _ body: (Fixture) async throws -> T
) async throws -> T {
    let clock = ManualClock()
    var configuration = DevServer.Configuration.quiet
    configuration.identityProvider.now = { clock.now }
    configure(&configuration.identityProvider)
    return try await DevServer.withServer(configuration: configuration) { server in
        try await CurlHTTPClient.withClient { client in
            var apiConfiguration = OAuth2API.Configuration(issuer: server.issuer, clientID: clientID, clientSecret: clientSecret)
            apiConfiguration.scope = "openid profile offline_access"
            let api = OAuth2API(configuration: apiConfiguration, transport: client, now: { clock.now })
            return try await body(Fixture(server: server, client: client, clock: clock, store: store ?? InMemoryTokenStore(), api: api))
        }
    }
}


let demo = User.ID(rawValue: "demo")

/// A provider that offers no pushed authorization requests (RFC 9126): the browser's URL carries
/// every parameter, for tests that read them there (DPoPPARTests cover the pushed form).
func unpushed(_ configuration: inout IdentityProviderConfiguration) {
    configuration.par = .absent
}
