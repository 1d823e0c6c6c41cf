import Foundation
import LoginKitJOSE
import LoginKitTestSupport
import Testing

/// An access token is never taken for an ID token (RFC 8725 §3.11, RFC 9068 §2.1): its `typ` says so.
@Suite struct TokenTypeTests {
    static let clock = TestWallClock()

    func verify(_ key: SigningKey, type: String?) async throws -> VerifiedJWT {
        let verifier = IDTokenVerifier(
            configuration: .init(issuer: "https://issuer.test", audience: "client-1"),
            keys: StaticJWKS(JWKSet(keys: [try key.publicJWK()])), now: Self.clock.reader
        )
        var header: [String: JSONValue] = [:]
        if let type { header["typ"] = .string(type) }
        return try await verifier.verify(try signedToken(idTokenClaims(now: Self.clock.now), key: key, header: header))
    }

    @Test(arguments: ["at+jwt", "AT+JWT", "At+Jwt", "application/at+jwt", "Application/AT+JWT"])
    func accessTokensAreRefused(_ type: String) async throws {
        let key = try SigningKey.generate(.es256, keyID: "k")
        #expect(await verificationCode { try await verify(key, type: type) } == .wrongTokenType)
    }

    @Test(arguments: ["JWT", "jwt", "application/jwt", nil])
    func idTokensPass(_ type: String?) async throws {
        let key = try SigningKey.generate(.es256, keyID: "k")
        let verified = try await verify(key, type: type)
        #expect(verified.jws.tokenType == type)
    }
}
