import Foundation
@testable import LoginKit
import LoginKitDevServer
import LoginKitHTTP
import LoginKitJOSE
import LoginKitTestSupport
import Testing

/// Records each request's form fields, then forwards it.
final class RecordingTransport: HTTPTransport {
    let next: any HTTPTransport
    let forms = LockedState<[[(String, String)]]>([])

    init(_ next: any HTTPTransport) { self.next = next }

    func send(_ request: HTTPRequest, body: Data?) async throws -> (HTTPResponse, Data) {
        if let body { forms.withLock { $0.append(FormURLEncoding.decode(String(decoding: body, as: UTF8.self))) } }
        return try await next.send(request, body: body)
    }

    var assertions: [String] { forms.withLock { $0.compactMap { form in form.first { $0.0 == "client_assertion" }?.1 } } }
}

/// The claims of a JWT, unverified.
func claims(of token: String) throws -> JWTClaims {
    try JWTClaims(payload: CompactJWS(parsing: token).payload)
}

/// A fixture whose provider has client `jwt-client` (keys only) registered with `key`'s public half.
func withKeyClient<T>(
    _ key: SigningKey, configure: (inout IdentityProviderConfiguration) -> Void = { _ in },
    _ body: (Fixture, OAuth2API.Configuration, RecordingTransport) async throws -> T
) async throws -> T {
    let publicKey = try key.publicJWK()
    return try await withFixture(clientID: "jwt-client", configure: {
        $0.clients.append(DevClient(id: "jwt-client", publicKeys: [publicKey]))
        configure(&$0)
    }) { fixture in
        var configuration = fixture.api.configuration
        configuration.clientAssertionKey = key
        configuration.scope = "api"
        return try await body(fixture, configuration, RecordingTransport(fixture.client))
    }
}

@Suite(.timeLimit(.minutes(2)))
struct ClientAuthenticationTests {
    @Test(arguments: [JWSAlgorithm.rs256, .ps256, .es256, .es384, .edDSA])
    func privateKeyJWTAuthenticatesWithEachAlgorithm(_ algorithm: JWSAlgorithm) async throws {
        let key = try SigningKey.generate(algorithm, keyID: "k1")
        try await withKeyClient(key) { fixture, configuration, recorder in
            let api = OAuth2API(configuration: configuration, transport: recorder, now: { fixture.clock.now })
            #expect(try await api.clientAuthenticationMethodInUse() == .privateKeyJWT)
            let credentials = try await api.clientCredentials(scope: "api")
            #expect(credentials.accessToken != nil)
            let assertion = try #require(recorder.assertions.first)
            let jws = try CompactJWS(parsing: assertion)
            #expect(jws.algorithmName == algorithm.rawValue)
            #expect(jws.keyID == "k1")
            let sent = try claims(of: assertion)
            let metadata = try await api.metadata()
            #expect(sent.issuer == "jwt-client" && sent.subject == "jwt-client")
            #expect(sent.audience == [metadata.tokenEndpoint])
            #expect(sent.expiresAt.map { $0 - (sent.issuedAt ?? 0) } == 60)
            #expect(sent["jti"]?.stringValue?.isEmpty == false)
            // No secret anywhere in the request.
            #expect(recorder.forms.withLock { $0.allSatisfy { !$0.contains { $0.0 == "client_secret" } } })
        }
    }

    @Test func everyRequestGetsAFreshAssertionAndAReplayedOneIsRefused() async throws {
        let key = try SigningKey.generate(.es256, keyID: "k1")
        try await withKeyClient(key) { fixture, configuration, recorder in
            let api = OAuth2API(configuration: configuration, transport: recorder, now: { fixture.clock.now })
            for _ in 0..<3 { _ = try await api.clientCredentials(scope: nil) }
            let assertions = recorder.assertions
            #expect(assertions.count == 3)
            #expect(Set(try assertions.map { try claims(of: $0)["jti"]?.stringValue }).count == 3)

            // The first assertion again, sent by hand: the provider refuses the reused jti.
            let replay = FormURLEncoding.encode([
                ("grant_type", "client_credentials"), ("client_id", "jwt-client"),
                ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"), ("client_assertion", assertions[0]),
            ])
            let request = try #require(
                HTTPRequest(method: .post, url: try await api.metadata().tokenEndpoint, headerFields: [.contentType: "application/x-www-form-urlencoded"]))
            let (response, body) = try await fixture.client.send(request, body: Data(replay.utf8))
            #expect(response.status.code == 401)
            #expect(String(decoding: body, as: UTF8.self).contains("replay"))
        }
    }

    @Test func aWrongAudienceOrAnUnregisteredKeyIsRefused() async throws {
        let key = try SigningKey.generate(.es256, keyID: "k1")
        try await withKeyClient(key) { fixture, configuration, _ in
            var elsewhere = configuration
            elsewhere.clientAssertionAudience = .custom("https://elsewhere.example/token")
            let wrongAudience = OAuth2API(configuration: elsewhere, transport: fixture.client, now: { fixture.clock.now })
            #expect((await thrown { try await wrongAudience.clientCredentials(scope: nil) } as? LoginError)?.code == .invalidClient)

            var issuerAudience = configuration
            issuerAudience.clientAssertionAudience = .issuer
            let byIssuer = OAuth2API(configuration: issuerAudience, transport: fixture.client, now: { fixture.clock.now })
            #expect(try await byIssuer.clientCredentials(scope: nil).accessToken != nil)

            var stranger = configuration
            stranger.clientAssertionKey = try SigningKey.generate(.es256, keyID: "k1")
            let unregistered = OAuth2API(configuration: stranger, transport: fixture.client, now: { fixture.clock.now })
            #expect((await thrown { try await unregistered.clientCredentials(scope: nil) } as? LoginError)?.code == .invalidClient)

            // A client registered with keys cannot skip authentication.
            var none = configuration
            none.clientAssertionKey = nil
            let unauthenticated = OAuth2API(configuration: none, transport: fixture.client, now: { fixture.clock.now })
            #expect((await thrown { try await unauthenticated.clientCredentials(scope: nil) } as? LoginError)?.code == .invalidClient)
        }
    }

    @Test func anAssertionFromTheWrongTimeIsRefused() async throws {
        let key = try SigningKey.generate(.es256, keyID: "k1")
        try await withKeyClient(key) { fixture, configuration, _ in
            // The client's clock is an hour behind the provider's: its assertion has expired.
            let late = OAuth2API(configuration: configuration, transport: fixture.client, now: { fixture.clock.now.addingTimeInterval(-3600) })
            #expect((await thrown { try await late.clientCredentials(scope: nil) } as? LoginError)?.code == .invalidClient)
            var longLived = configuration
            longLived.clientAssertionLifetime = .seconds(3600)
            let tooLong = OAuth2API(configuration: longLived, transport: fixture.client, now: { fixture.clock.now })
            #expect((await thrown { try await tooLong.clientCredentials(scope: nil) } as? LoginError)?.code == .invalidClient)
        }
    }

    @Test func clientSecretJWTSignsWithTheSecret() async throws {
        try await withFixture(clientID: "loginkit-signed", clientSecret: "dev-secret-for-client-secret-jwt-0123456789") { fixture in
            var configuration = fixture.api.configuration
            configuration.clientAuthenticationMethod = .clientSecretJWT
            let recorder = RecordingTransport(fixture.client)
            let api = OAuth2API(configuration: configuration, transport: recorder, now: { fixture.clock.now })
            #expect(try await api.clientCredentials(scope: "api").accessToken != nil)
            let assertion = try #require(recorder.assertions.first)
            #expect(try CompactJWS(parsing: assertion).algorithmName == "HS256")
            #expect(!recorder.forms.withLock { $0.flatMap { $0 }.contains { $0.1.contains("dev-secret") } })

            configuration.clientSecret = "dev-secret-for-client-secret-jwt-0123456780"  // wrong
            let wrong = OAuth2API(configuration: configuration, transport: fixture.client, now: { fixture.clock.now })
            #expect((await thrown { try await wrong.clientCredentials(scope: nil) } as? LoginError)?.code == .invalidClient)

            configuration.clientSecret = "short"
            let short = OAuth2API(configuration: configuration, transport: fixture.client, now: { fixture.clock.now })
            let error = await thrown { try await short.clientCredentials(scope: nil) }
            #expect((error as? LoginError)?.code == .invalidConfiguration)
            #expect(!"\(error as Any)".contains("short\""))
        }
    }

    @Test func theAutomaticChoiceFollowsDiscovery() throws {
        var configuration = OAuth2API.Configuration(issuer: "https://id.example", clientID: "c", clientSecret: "s")
        #expect(try OAuth2API.method(for: configuration, supported: nil) == .basic)
        #expect(try OAuth2API.method(for: configuration, supported: ["client_secret_post"]) == .post)
        #expect(try OAuth2API.method(for: configuration, supported: ["client_secret_jwt"]) == .basic)  // secret too short for HS256
        configuration.clientSecret = String(repeating: "s", count: 40)
        #expect(try OAuth2API.method(for: configuration, supported: ["private_key_jwt", "client_secret_jwt"]) == .clientSecretJWT)
        configuration.clientAssertionKey = try SigningKey.generate(.es256, keyID: nil)
        #expect(try OAuth2API.method(for: configuration, supported: ["client_secret_basic"]) == .privateKeyJWT)
        configuration.clientSecret = nil
        configuration.clientAssertionKey = nil
        #expect(try OAuth2API.method(for: configuration, supported: nil) == nil)
        configuration.clientAuthenticationMethod = .privateKeyJWT
        #expect((try? OAuth2API.method(for: configuration, supported: nil)) == nil)
    }
}
