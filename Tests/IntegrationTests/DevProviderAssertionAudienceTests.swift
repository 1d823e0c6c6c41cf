import Foundation
@testable import LoginKit
import LoginKitDevServer
import LoginKitHTTP
import LoginKitJOSE
import LoginKitTestSupport
import Testing

/// The dev provider takes a client assertion only for its own token endpoint or issuer, exactly: a
/// token endpoint or realm of another issuer on the same host is refused.
@Suite(.timeLimit(.minutes(2)))
struct DevProviderAssertionAudienceTests {
    @Test func anAssertionForAnotherRealmOnTheSameHostIsRefused() async throws {
        let key = try SigningKey.generate(.es256, keyID: "k1")
        try await withKeyClient(key) { fixture, _, _ in
            let metadata = try await fixture.api.metadata()
            /// The status of a client-credentials request authenticated by an assertion for `audience`.
            func status(audience: String) async throws -> Int {
                let now = Int(fixture.clock.now.timeIntervalSince1970)
                let claims: [String: JSONValue] = [
                    "iss": .string("jwt-client"), "sub": .string("jwt-client"), "jti": .string(UUID().uuidString),
                    "aud": .string(audience), "iat": .number("\(now)"), "exp": .number("\(now + 60)"),
                ]
                let form = FormURLEncoding.encode([
                    ("grant_type", "client_credentials"), ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
                    ("client_assertion", try ClientAssertionSigner.privateKey(key).sign(claims: claims)),
                ])
                let post = try #require(
                    HTTPRequest(method: .post, url: metadata.tokenEndpoint, headerFields: [.contentType: "application/x-www-form-urlencoded"]))
                return try await fixture.client.send(post, body: Data(form.utf8)).0.status.code
            }
            let issuer = fixture.server.issuer
            #expect(try await status(audience: issuer + "/realms/other/oauth/token") == 401)
            #expect(try await status(audience: issuer + "/realms/other") == 401)
            #expect(try await status(audience: metadata.tokenEndpoint + "/../../realms/other/oauth/token") == 401)
            #expect(try await status(audience: metadata.tokenEndpoint) == 200)
            #expect(try await status(audience: issuer) == 200)
        }
    }
}
