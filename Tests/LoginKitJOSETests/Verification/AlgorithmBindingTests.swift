import Foundation
import LoginKitJOSE
import LoginKitTestSupport
import Testing

/// A key without `alg` serves the first algorithm it verifies and no other: the same RSA key may not
/// be played as RS256 for one token and PS256/PS384 for the next.
@Suite struct AlgorithmBindingTests {
    static let clock = TestWallClock()

    /// RFC 7520 signs 4.1 (RS256) and 4.2 (PS384) with one RSA key, published without `alg`.
    @Test func anRFCKeyWithoutAlgIsBoundToTheFirstAlgorithmItVerifies() throws {
        let vectors = try SignatureVector.all()
        let rs256 = try #require(vectors.first { $0.name.hasPrefix("RFC 7520 4.1") })
        let ps384 = try #require(vectors.first { $0.name.hasPrefix("RFC 7520 4.2") })
        let key = rs256.key
        #expect(key.algorithm == nil)
        #expect(key.json == ps384.key.json)
        #expect(key.boundAlgorithm == nil)

        #expect(try CompactJWS(parsing: rs256.compact).hasValidSignature(key: key, algorithm: .rs256))
        #expect(key.boundAlgorithm == .rs256)
        #expect(!(try CompactJWS(parsing: ps384.compact).hasValidSignature(key: key, algorithm: .ps384)))
        #expect(!key.canVerify(.ps384))
        #expect(key.canVerify(.rs256))
        // The PS384 vector itself is sound: a separately parsed, unbound copy of the key verifies it.
        #expect(try CompactJWS(parsing: ps384.compact).hasValidSignature(key: ps384.key, algorithm: .ps384))
    }

    @Test func aFailedSignatureDoesNotBindTheKey() throws {
        let vectors = try SignatureVector.all()
        let rs256 = try #require(vectors.first { $0.name.hasPrefix("RFC 7520 4.1") })
        let ps384 = try #require(vectors.first { $0.name.hasPrefix("RFC 7520 4.2") })
        let key = ps384.key
        #expect(!(try CompactJWS(parsing: rs256.compact).hasValidSignature(key: key, algorithm: .ps256)))
        #expect(key.boundAlgorithm == nil)
        #expect(try CompactJWS(parsing: ps384.compact).hasValidSignature(key: key, algorithm: .ps384))
        #expect(key.boundAlgorithm == .ps384)
    }

    @Test func theVerifierRefusesASecondAlgorithmUnderAKeyWithoutAlg() async throws {
        let rs256 = try SigningKey.generate(.rs256, keyID: "k")
        let ps256 = try rs256.signing(with: .ps256)
        var members = try #require(try rs256.publicJWK().json.objectValue)
        members["alg"] = nil
        let verifier = IDTokenVerifier(
            configuration: .init(issuer: "https://issuer.test", audience: "client-1"),
            keys: StaticJWKS(JWKSet(keys: [try JWK(json: .object(members))])), now: Self.clock.reader
        )
        _ = try await verifier.verify(try signedToken(idTokenClaims(now: Self.clock.now), key: rs256))
        let pssToken = try signedToken(idTokenClaims(now: Self.clock.now), key: ps256)
        #expect(await verificationCode { try await verifier.verify(pssToken) } == .unknownKey)
        _ = try await verifier.verify(try signedToken(idTokenClaims(now: Self.clock.now), key: rs256))
    }

    @Test func aKeyWithAlgIsNeverReportedAsBound() throws {
        let key = try SigningKey.generate(.es256, keyID: "k").publicJWK()
        #expect(key.algorithm == "ES256")
        #expect(key.boundAlgorithm == nil)
        #expect(key.canVerify(.es256))
    }
}
