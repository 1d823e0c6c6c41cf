import Foundation
import LoginKit
import LoginKitDevServer
import LoginKitTestSupport
import Testing

/// The login APIs' defences: ID tokens are verified unless the configuration explicitly opts out,
/// provider-chosen text never reaches a message raw, values that become host names are checked.
@Suite(.timeLimit(.minutes(2)))
struct JSONLoginSecurityTests {
    /// A verifier for the dev server's ID tokens, with the keys its discovery document names.
    func verifier(_ fixture: Fixture) async throws -> IDTokenVerifier {
        let jwksURI = try #require(try await fixture.api.metadata().jwksURI)
        let clock = fixture.clock
        let now: @Sendable () -> Date = { clock.now }
        let keys = JWKSSource(url: jwksURI, transport: fixture.client, now: now)
        return IDTokenVerifier(configuration: .init(issuer: fixture.server.issuer, audience: "loginkit-cli"), keys: keys, now: now)
    }

    /// A `JSONLoginAPI` without a verifier sends no password and returns no token: otherwise it
    /// would return whatever token came back, `alg: none` included.
    @Test func withoutAVerifierNothingIsSentAndNoTokenIsReturned() async throws {
        try await withFixture { fixture in
            fixture.server.monitor.injectFaults([.forgedIDToken(.algNone)], path: "/login")
            let api = JSONLoginAPI(configuration: .init(loginURL: fixture.server.url("/login")), transport: fixture.client)
            let error = await thrown { try await api.logIn(for: demo, with: "demo") }
            #expect((error as? LoginError)?.code == .verifierRequired, "\(String(describing: error))")
            #expect(fixture.server.monitor.requestCount(path: "/login") == 0, "the password was sent")
        }
    }

    @Test func everyForgedIDTokenIsRefused() async throws {
        try await withFixture { fixture in
            let api = JSONLoginAPI(
                configuration: .init(loginURL: fixture.server.url("/login"), verifier: try await verifier(fixture)),
                transport: fixture.client, now: { fixture.clock.now }
            )
            for forgery in DevFault.IDTokenForgery.allCases {
                fixture.server.monitor.injectFaults([.forgedIDToken(forgery)], path: "/login")
                let error = await thrown { try await api.logIn(for: demo, with: "demo") }
                #expect(error is TokenVerificationError, "\(forgery): \(String(describing: error))")
            }
            let credentials = try await api.logIn(for: demo, with: "demo")
            #expect(credentials.issuer == fixture.server.issuer)
        }
    }

    /// The opt-out returns the token but takes nothing from it on trust: no issuer.
    @Test func theOptOutReturnsAnUnverifiedTokenWithoutTrustingIt() async throws {
        try await withFixture { fixture in
            fixture.server.monitor.injectFaults([.forgedIDToken(.wrongIssuer)], path: "/login")
            var configuration = JSONLoginAPI.Configuration(loginURL: fixture.server.url("/login"))
            configuration.idTokenVerification = .unverifiedOpaqueTokens
            let api = JSONLoginAPI(configuration: configuration, transport: fixture.client)
            let credentials = try await api.logIn(for: demo, with: "demo")
            #expect(credentials.idToken != nil)
            #expect(credentials.issuer == nil, "an unverified iss was taken as the issuer")
        }
    }

    /// A user code or URI with control characters is refused, never passed to the host as the
    /// provider wrote it.
    @Test func aDeviceAuthorizationWithControlCharactersIsRefused() async throws {
        try await withFixture(configure: { $0.deviceVerificationURI = "https://example.test/\n\u{1B}[2Jdevice" }) { fixture in
            let error = await thrown { try await fixture.api.startDeviceAuthorization(scope: nil) }
            let serverError = try #require(error as? ServerError, "\(String(describing: error))")
            #expect(serverError.code == .malformedResponse)
            #expect(!serverError.message.contains("\u{1B}") && !serverError.message.contains("\n"))
        }
    }

    @Test func aCognitoRegionMustBeAnAWSRegion() async throws {
        for region in ["eu-west-1", "us-east-2", "ap-southeast-5", "us-gov-west-1", "us-isob-east-1", "eu-isoe-west-1", "cn-north-1"] {
            do {
                try CognitoAPI.Configuration(poolID: "\(region)_AbC123", clientID: "c", region: region).validate()
            } catch {
                Issue.record("\(region) was refused: \(error)")
            }
        }
        let hostile = [
            "", "eu-west", "EU-WEST-1", "eu-west-1.evil.example", "evil.example/x?", "eu-west-1/", "e-west-1", "eu-west-x",
            "eu--1", "eu-gov-west-1-2", "eu-west-1\n", "eu-wést-1", "us-isoX-east-1",
        ]
        for region in hostile {
            let error = #expect(throws: LoginError.self, "\(region.debugDescription)") {
                try CognitoAPI.Configuration(poolID: "eu-west-1_AbC123", clientID: "c", region: region).validate()
            }
            #expect(error?.code == .invalidConfiguration, "\(region.debugDescription)")
        }
        #expect((#expect(throws: LoginError.self) { try CognitoAPI.Configuration(poolID: "x/../y", clientID: "c", region: "eu-west-1").validate() })?.code == .invalidConfiguration)

        // A region that is no region never reaches the issuer or the host name: nothing is sent.
        try await withFixture { fixture in
            let configuration = CognitoAPI.Configuration(poolID: "eu-west-1_AbC123", clientID: "c", region: "evil.example/\n", endpoint: fixture.server.url("/cognito"))
            let api = CognitoAPI(configuration: configuration, transport: fixture.client)
            let error = await thrown { try await api.logIn(for: demo, with: "demo") }
            let configurationError = try #require(error as? LoginError, "\(String(describing: error))")
            #expect(configurationError.code == .invalidConfiguration)
            #expect(!configurationError.message.contains("\n"))
            #expect(fixture.server.monitor.requestCount(path: "/cognito/") == 0)
        }
    }

    /// A non-loopback address such as `0.0.0.0` is refused: it would expose the dev server's
    /// well-known users and secrets to the network.
    @Test func theDevServerRefusesANonLoopbackAddress() async throws {
        var configuration = DevServer.Configuration.quiet
        configuration.host = "0.0.0.0"
        do {
            let server = try await DevServer.start(configuration: configuration)
            await server.stop()
            Issue.record("the dev server bound 0.0.0.0 without allowsNonLoopbackBind")
        } catch {
            #expect(error is DevServerError, "\(error)")
        }
        configuration.host = "127.0.0.1"
        try await DevServer.withServer(configuration: configuration) { server in
            #expect(server.port > 0)
        }
    }
}
