import Foundation
@testable import LoginKit
import LoginKitHTTP
import LoginKitJOSE
import LoginKitMocks
import LoginKitTestSupport
import Testing

/// With `clientAssertionAudience` `.tokenEndpoint`, an assertion names the discovered token endpoint
/// only when it lies under the issuer itself: two realms or tenants on one host are told apart.
@Suite(.timeLimit(.minutes(1)))
struct AssertionAudienceTests {
    static let realmA = "https://id.example/realms/a"

    /// An API for `jwt-client` of realm A signing with a fresh key, and the discovery document
    /// realm A answers with, naming `tokenEndpoint`.
    func makeAPI(_ transport: MockHTTPTransport, tokenEndpoint: String) throws -> OAuth2API {
        var configuration = OAuth2API.Configuration(issuer: Self.realmA, clientID: "jwt-client")
        configuration.clientAssertionKey = try SigningKey.generate(.es256, keyID: nil)
        configuration.scope = ""
        let document = JSONValue.object(["issuer": .string(Self.realmA), "token_endpoint": .string(tokenEndpoint)]).serialized
        transport.enqueue(status: .ok, headers: [.contentType: "application/json"], body: Data(document.utf8))
        return OAuth2API(configuration: configuration, transport: transport)
    }

    @Test func aTokenEndpointLiesUnderTheIssuerOrNot() {
        #expect(OAuth2API.isUnderIssuer("https://id.example/realms/a/protocol/openid-connect/token", issuer: Self.realmA))
        #expect(OAuth2API.isUnderIssuer("https://ID.example:443/realms/a/token", issuer: Self.realmA + "/"))
        #expect(OAuth2API.isUnderIssuer("https://tenant.example/oauth/token", issuer: "https://tenant.example/"))
        #expect(OAuth2API.isUnderIssuer("https://id.example/token", issuer: "https://id.example"))
        #expect(!OAuth2API.isUnderIssuer("https://id.example/realms/b/protocol/openid-connect/token", issuer: Self.realmA))
        #expect(!OAuth2API.isUnderIssuer("https://id.example/realms/ab/token", issuer: Self.realmA))
        #expect(!OAuth2API.isUnderIssuer("https://id.example/realms/a/../b/token", issuer: Self.realmA))
        #expect(!OAuth2API.isUnderIssuer("https://id.example/realms/a/%2E%2e/b/token", issuer: Self.realmA))
        #expect(!OAuth2API.isUnderIssuer("http://id.example/realms/a/token", issuer: Self.realmA))
        #expect(!OAuth2API.isUnderIssuer("https://id.example:8443/realms/a/token", issuer: Self.realmA))
        #expect(!OAuth2API.isUnderIssuer("https://other.example/realms/a/token", issuer: Self.realmA))
    }

    @Test func anAssertionIsNeverMadeForAnotherRealmsTokenEndpointOnTheSameHost() async throws {
        let transport = MockHTTPTransport()
        let api = try makeAPI(transport, tokenEndpoint: "https://id.example/realms/b/protocol/openid-connect/token")
        // Realm B's answer, were it asked.
        transport.enqueue(status: .ok, headers: [.contentType: "application/json"], body: Data(#"{"access_token":"t","token_type":"Bearer"}"#.utf8))
        let error = await thrown { try await api.clientCredentials(scope: nil) }
        #expect((error as? ServerError)?.code == .misconfigured)
        #expect(transport.requestCount == 1)  // the discovery request only: no assertion left
    }

    @Test func theRealmsOwnTokenEndpointGetsAnAssertionForItself() async throws {
        let transport = MockHTTPTransport()
        let tokenEndpoint = Self.realmA + "/protocol/openid-connect/token"
        let api = try makeAPI(transport, tokenEndpoint: tokenEndpoint)
        async let issued = api.clientCredentials(scope: nil)
        _ = await transport.nextRequest()  // discovery, answered from the script
        let call = await transport.nextRequest()
        let form = FormURLEncoding.decode(String(decoding: call.arguments.body ?? Data(), as: UTF8.self))
        let body = Data(#"{"access_token":"t","token_type":"Bearer","expires_in":3600}"#.utf8)
        call.resume(returning: (HTTPResponse(status: .ok, headerFields: [.contentType: "application/json"]), body))
        #expect(try await issued.accessToken == "t")
        let assertion = try #require(form.first { $0.0 == "client_assertion" }?.1)
        #expect(try JWTClaims(payload: CompactJWS(parsing: assertion).payload).audience == [tokenEndpoint])
    }
}
