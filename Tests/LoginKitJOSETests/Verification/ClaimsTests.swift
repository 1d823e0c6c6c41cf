import Foundation
import LoginKitJOSE
import LoginKitTestSupport
import Testing

/// Each claim check at the leeway boundary, on an injected clock: just inside passes, just outside fails.
@Suite struct ClaimsTests {
    let key: SigningKey
    let clock = TestWallClock()
    let issuedAt: Int

    init() throws {
        key = try SigningKey.generate(.es256, keyID: "k")
        issuedAt = Int(clock.now.timeIntervalSince1970)
    }

    func verify(_ claims: [String: JSONValue], nonce: String? = nil) async throws -> VerifiedJWT {
        let verifier = IDTokenVerifier(
            configuration: .init(issuer: "https://issuer.test", audience: "client-1"),
            keys: StaticJWKS(JWKSet(keys: [try key.publicJWK()])), now: clock.reader
        )
        return try await verifier.verify(try signedToken(claims, key: key), nonce: nonce)
    }

    func claims(_ changes: [String: JSONValue?]) -> [String: JSONValue] {
        var claims = idTokenClaims(now: clock.now)
        for (name, value) in changes { claims[name] = value }
        return claims
    }

    @Test func expiryHonoursTheLeeway() async throws {
        let token = claims(["exp": .number("\(issuedAt + 300)")])
        clock.advance(by: 300 + 59)  // exp + 59 s: inside the 60 s leeway
        _ = try await verify(token)
        clock.advance(by: 1)  // exp + 60 s: outside
        #expect(await verificationCode { try await verify(token) } == .expired)
    }

    @Test func notBeforeHonoursTheLeeway() async throws {
        let token = claims(["nbf": .number("\(issuedAt + 60)")])  // now == nbf - 60: inside
        _ = try await verify(token)
        let early = claims(["nbf": .number("\(issuedAt + 61)")])  // now == nbf - 61: outside
        #expect(await verificationCode { try await verify(early) } == .notYetValid)
    }

    @Test func issuedAtInTheFutureHonoursTheLeeway() async throws {
        _ = try await verify(claims(["iat": .number("\(issuedAt + 60)")]))
        #expect(await verificationCode { try await verify(claims(["iat": .number("\(issuedAt + 61)")])) } == .issuedInFuture)
    }

    @Test func missingTimeClaimsAreMalformed() async throws {
        #expect(await verificationCode { try await verify(claims(["exp": nil])) } == .malformed)
        #expect(await verificationCode { try await verify(claims(["iat": nil])) } == .malformed)
        #expect(await verificationCode { try await verify(claims(["exp": .string("tomorrow")])) } == .malformed)
    }

    /// A signed token may carry any finite number: the message's whole seconds must not trap.
    @Test func farOffTimesAreTypedNotACrash() async throws {
        #expect(await verificationCode { try await verify(claims(["exp": .number("-1e300")])) } == .expired)
        #expect(await verificationCode { try await verify(claims(["nbf": .number("1e300")])) } == .notYetValid)
        #expect(await verificationCode { try await verify(claims(["iat": .number("1e300")])) } == .issuedInFuture)
    }

    @Test func theIssuerMustMatchExactly() async throws {
        #expect(await verificationCode { try await verify(claims(["iss": .string("https://evil.test")])) } == .wrongIssuer)
        #expect(await verificationCode { try await verify(claims(["iss": .string("https://issuer.test/")])) } == .wrongIssuer)
        #expect(await verificationCode { try await verify(claims(["iss": nil])) } == .wrongIssuer)
    }

    @Test func theAudienceMustIncludeTheClient() async throws {
        #expect(await verificationCode { try await verify(claims(["aud": .string("client-2")])) } == .wrongAudience)
        #expect(await verificationCode { try await verify(claims(["aud": nil])) } == .wrongAudience)
        _ = try await verify(claims(["aud": .array([.string("client-1")])]))
    }

    @Test func severalAudiencesNeedAnAuthorizedPartyThatIsTheClient() async throws {
        let audiences = JSONValue.array([.string("client-1"), .string("api")])
        #expect(await verificationCode { try await verify(claims(["aud": audiences])) } == .wrongAudience)
        #expect(await verificationCode { try await verify(claims(["aud": audiences, "azp": .string("api")])) } == .wrongAudience)
        _ = try await verify(claims(["aud": audiences, "azp": .string("client-1")]))
    }

    @Test func theNonceMustMatchWhenOneWasSent() async throws {
        _ = try await verify(claims(["nonce": .string("n-1")]), nonce: "n-1")
        #expect(await verificationCode { try await verify(claims(["nonce": .string("n-2")]), nonce: "n-1") } == .nonceMismatch)
        #expect(await verificationCode { try await verify(claims([:]), nonce: "n-1") } == .nonceMismatch)
    }

    @Test func errorsNeverContainTheToken() async throws {
        let token = try signedToken(claims(["aud": .string("client-2")]), key: key)
        let verifier = IDTokenVerifier(
            configuration: .init(issuer: "https://issuer.test", audience: "client-1"),
            keys: StaticJWKS(JWKSet(keys: [try key.publicJWK()])), now: clock.reader
        )
        let error = try #require(await thrown { try await verifier.verify(token) })
        let signature = String(token.split(separator: ".")[2])
        #expect(!String(describing: error).contains(signature))
        #expect(!String(describing: error).contains(String(token.split(separator: ".")[1])))
    }
}
