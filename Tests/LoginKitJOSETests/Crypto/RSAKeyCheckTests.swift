import Foundation
import LoginKitJOSE
import LoginKitTestSupport
import Testing

/// RSA public keys are checked as EC points are: an exponent of 1 would make the padded hash its own
/// signature, so anyone could "sign" for the issuer.
@Suite struct RSAKeyCheckTests {
    static let clock = TestWallClock()
    /// An odd 2048-bit modulus. It need not be a product of two primes for these tests (nothing is
    /// signed with its private half), and its top byte is above any PKCS#1 v1.5 encoding's 0x00 0x01.
    static let modulus: [UInt8] = [0xC0] + [UInt8](repeating: 0x5A, count: 254) + [0x01]

    static func jwkText(n: [UInt8] = RSAKeyCheckTests.modulus, e: [UInt8]) -> String {
        #"{"kty":"RSA","kid":"weak","n":"\#(Base64URL.encode(n))","e":"\#(Base64URL.encode(e))"}"#
    }

    @Test(arguments: ["e = 1", "e = 2", "e = 65536", "e over 256 bits", "n even", "n over 16384 bits", "n of 1024 bits"])
    func unsafeRSAKeysAreRefused(_ flaw: String) async throws {
        let text: String
        switch flaw {
        case "e = 1": text = Self.jwkText(e: [0x01])
        case "e = 2": text = Self.jwkText(e: [0x02])
        case "e = 65536": text = Self.jwkText(e: [0x01, 0x00, 0x00])
        case "e over 256 bits": text = Self.jwkText(e: [0x01] + [UInt8](repeating: 0, count: 31) + [0x01])
        case "n even": text = Self.jwkText(n: Array(Self.modulus.dropLast()) + [0x02], e: [0x01, 0x00, 0x01])
        case "n over 16384 bits": text = Self.jwkText(n: [0xC0] + [UInt8](repeating: 0x5A, count: 2047) + [0x01], e: [0x01, 0x00, 0x01])
        default: text = Self.jwkText(n: [0xC1] + [UInt8](repeating: 0x55, count: 127), e: [0x01, 0x00, 0x01])
        }
        let error = await thrown { try JWK(jsonText: Array(text.utf8)) }
        let verificationError = try #require(error as? TokenVerificationError, "\(flaw) was accepted")
        #expect(verificationError.code == .unsafeKey, "\(flaw): \(verificationError)")
    }

    @Test func anOrdinaryExponentIsAccepted() throws {
        let key = try JWK(jsonText: Array(Self.jwkText(e: [0x01, 0x00, 0x01]).utf8))
        #expect(key.keyType == .rsa)
        _ = try JWK(jsonText: Array(Self.jwkText(e: [0x03]).utf8))
    }

    /// With e = 1, s^e mod n = s: the PKCS#1 v1.5 encoding of the hash verifies as its own signature.
    /// The key set drops the key, so the forgery finds no key at all.
    @Test func aTokenSignedWithThePaddedHashUnderExponentOneDoesNotVerify() async throws {
        let header = Base64URL.encode(Array(#"{"alg":"RS256","kid":"weak"}"#.utf8))
        let payload = Base64URL.encode(Array(JSONValue.object(idTokenClaims(now: Self.clock.now)).serialized.utf8))
        let signingInput = header + "." + payload
        let hash = try MessageDigest.sha256(Array(signingInput.utf8))
        // EMSA-PKCS1-v1_5 (RFC 8017 §9.2): 00 01 FF…FF 00 DigestInfo(SHA-256, hash), as long as n.
        var digestInfo: [UInt8] = [0x30, 0x31, 0x30, 0x0D, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0x04, 0x20]
        digestInfo += hash
        var encoded: [UInt8] = [0x00, 0x01]
        encoded += [UInt8](repeating: 0xFF, count: Self.modulus.count - 3 - digestInfo.count)
        encoded.append(0x00)
        encoded += digestInfo
        let forged = signingInput + "." + Base64URL.encode(encoded)

        let keySet = try JWKSet(jsonText: Array(#"{"keys":[\#(Self.jwkText(e: [0x01]))]}"#.utf8))
        #expect(keySet.keys.isEmpty)
        #expect(keySet.skippedCount == 1)
        let verifier = IDTokenVerifier(
            configuration: .init(issuer: "https://issuer.test", audience: "client-1"), keys: StaticJWKS(keySet), now: Self.clock.reader
        )
        #expect(await verificationCode { try await verifier.verify(forged) } == .unknownKey)
    }
}
