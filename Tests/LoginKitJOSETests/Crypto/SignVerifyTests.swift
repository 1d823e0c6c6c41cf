import Foundation
import LoginKitJOSE
import LoginKitTestSupport
import Testing

@Suite struct SignVerifyTests {
    static let clock = TestWallClock()

    func verifier(for key: SigningKey, allowed: Set<JWSAlgorithm> = JWSAlgorithm.standard) throws -> IDTokenVerifier {
        try LoginKitJOSETests.verifier(for: key, clock: Self.clock, allowed: allowed)
    }

    @Test(arguments: JWSAlgorithm.allCases)
    func signThenVerifyWithAFreshKey(_ algorithm: JWSAlgorithm) async throws {
        let key = try SigningKey.generate(algorithm, keyID: "k-\(algorithm)")
        let token = try signedToken(idTokenClaims(now: Self.clock.now), key: key)
        let verified = try await verifier(for: key).verify(token)
        #expect(verified.algorithm == algorithm)
        #expect(verified.claims.subject == "user-1")
        #expect(verified.jws.keyID == "k-\(algorithm)")
    }

    /// ECDSA signatures travel as raw `r || s` and are re-encoded as DER for OpenSSL: an `r` or `s`
    /// with leading zero bytes (minimal INTEGER) or a high bit set (sign byte) must survive that.
    @Test(arguments: [JWSAlgorithm.es256, .es384])
    func ecdsaSignaturesWithLeadingZerosOrHighBitsVerify(_ algorithm: JWSAlgorithm) async throws {
        let key = try SigningKey.generate(algorithm, keyID: "k")
        let verifier = try verifier(for: key)
        let size = algorithm == .es256 ? 32 : 48
        var leadingZero = 0
        var highBit = 0
        for index in 0..<1500 {
            var claims = idTokenClaims(now: Self.clock.now)
            claims["jti"] = .string("token-\(index)")
            let token = try signedToken(claims, key: key)
            let encodedSignature = try #require(token.split(separator: ".").last)
            let signature = try #require(Base64URL.decode(encodedSignature))
            #expect(signature.count == 2 * size)
            let r = signature.prefix(size), s = signature.suffix(size)
            if r.first == 0 || s.first == 0 { leadingZero += 1 }
            if (r.first ?? 0) >= 0x80 || (s.first ?? 0) >= 0x80 { highBit += 1 }
            _ = try await verifier.verify(token)
        }
        // Each case has probability 1/128 and about 3/4 per signature: both certainly occurred.
        #expect(leadingZero > 0)
        #expect(highBit > 0)
    }

    @Test(arguments: [JWSAlgorithm.rs256, .es256, .edDSA])
    func oneFlippedBitAnywhereFails(_ algorithm: JWSAlgorithm) async throws {
        let key = try SigningKey.generate(algorithm, keyID: "k")
        let verifier = try verifier(for: key)
        let token = try signedToken(idTokenClaims(now: Self.clock.now), key: key)
        var parts: [[UInt8]] = []
        for part in token.split(separator: ".") { parts.append(try #require(Base64URL.decode(part))) }
        for part in 0..<3 {
            for index in stride(from: 0, to: parts[part].count, by: max(1, parts[part].count / 24)) {
                for bit in [0, 7] {
                    var tampered = parts
                    tampered[part][index] ^= UInt8(1 << bit)
                    let forged = tampered.map { Base64URL.encode($0) }.joined(separator: ".")
                    let error = await thrown { try await verifier.verify(forged) }
                    #expect(error is TokenVerificationError, "part \(part) byte \(index) bit \(bit) verified")
                }
            }
        }
    }

    @Test func unsignedTokensAreRefused() async throws {
        let key = try SigningKey.generate(.rs256, keyID: "k")
        let claims = Base64URL.encode(Array(JSONValue.object(idTokenClaims(now: Self.clock.now)).serialized.utf8))
        for header in [#"{"alg":"none"}"#, #"{"alg":"None","kid":"k"}"#, #"{"alg":"NONE"}"#] {
            let token = Base64URL.encode(Array(header.utf8)) + "." + claims + "."
            #expect(await verificationCode { try await verifier(for: key).verify(token) } == .algorithmNotAllowed)
        }
    }

    @Test func hmacSignedWithThePublicKeyIsRefused() async throws {
        // The classic confusion attack: HS256 keyed with the RSA public key's bytes.
        let key = try SigningKey.generate(.rs256, keyID: "k")
        let token = try signedToken(idTokenClaims(now: Self.clock.now), key: key)
        let parts = token.split(separator: ".")
        let header = Base64URL.encode(Array(#"{"alg":"HS256","kid":"k"}"#.utf8))
        let forged = header + "." + parts[1] + "." + parts[2]
        #expect(await verificationCode { try await verifier(for: key).verify(forged) } == .algorithmNotAllowed)
    }

    @Test func anRSAHeaderOnAnECKeyFindsNoKey() async throws {
        let ecKey = try SigningKey.generate(.es256, keyID: "k")
        let rsaKey = try SigningKey.generate(.rs256, keyID: "k")
        let token = try signedToken(idTokenClaims(now: Self.clock.now), key: rsaKey)
        #expect(await verificationCode { try await verifier(for: ecKey).verify(token) } == .unknownKey)
    }

    @Test func aPSSHeaderOverAPKCS1SignatureFails() async throws {
        let key = try SigningKey.generate(.rs256, keyID: "k")
        let token = try signedToken(idTokenClaims(now: Self.clock.now), key: key)
        let parts = token.split(separator: ".")
        let header = Base64URL.encode(Array(#"{"alg":"PS256","kid":"k"}"#.utf8))
        let publicKey = try JSONValue.parse(Array(try key.publicJWK().json.serialized.utf8))
        var members = try #require(publicKey.objectValue)
        members["alg"] = nil  // a key without "alg" may serve PS256 too: the signature decides
        let verifier = IDTokenVerifier(
            configuration: .init(issuer: "https://issuer.test", audience: "client-1"),
            keys: StaticJWKS(JWKSet(keys: [try JWK(json: .object(members))])), now: Self.clock.reader
        )
        #expect(await verificationCode { try await verifier.verify(header + "." + parts[1] + "." + parts[2]) } == .badSignature)
    }

    @Test func algorithmsOutsideTheAllowListAreRefused() async throws {
        let key = try SigningKey.generate(.es256, keyID: "k")
        let token = try signedToken(idTokenClaims(now: Self.clock.now), key: key)
        #expect(await verificationCode { try await verifier(for: key, allowed: [.rs256]).verify(token) } == .algorithmNotAllowed)
    }

    @Test func theKidMustMatch() async throws {
        let key = try SigningKey.generate(.es256, keyID: "published")
        let other = try SigningKey.generate(.es256, keyID: "other")
        let token = try signedToken(idTokenClaims(now: Self.clock.now), key: other)
        #expect(await verificationCode { try await verifier(for: key).verify(token) } == .unknownKey)
    }

    @Test func aHugeTokenIsRefusedBeforeDecoding() async throws {
        let key = try SigningKey.generate(.es256, keyID: "k")
        let huge = String(repeating: "A", count: 1_000_000) + ".e30.AA"
        let error = await thrown { try await verifier(for: key).verify(huge) }
        let verificationError = try #require(error as? TokenVerificationError)
        #expect(verificationError.code == .malformed)
        #expect(verificationError.message.contains("longer than"))
    }

    @Test(arguments: ["a.b", "a.b.c.d", "", "..", "e30.e30.", "!!!.e30.AA"])
    func malformedTokensAreTyped(_ token: String) async throws {
        let key = try SigningKey.generate(.es256, keyID: "k")
        #expect(await verificationCode { try await verifier(for: key).verify(token) } == .malformed)
    }

    @Test func duplicateClaimsAreRefused() async throws {
        let key = try SigningKey.generate(.es256, keyID: "k")
        let seconds = Int(Self.clock.now.timeIntervalSince1970)
        let payload = #"{"iss":"https://issuer.test","aud":"client-1","iat":\#(seconds),"exp":\#(seconds + 60),"sub":"a","sub":"admin"}"#
        let token = try CompactJWS.sign(payload: Array(payload.utf8), with: key)
        #expect(await verificationCode { try await verifier(for: key).verify(token) } == .malformed)
    }

    @Test func aPrivateJWKIsNotAcceptedAsAPublicKey() throws {
        let text = #"{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","d":"nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"}"#
        #expect(throws: TokenVerificationError.self) { try JWK(jsonText: Array(text.utf8)) }
    }

    @Test func invalidKeysAreRefused() throws {
        let notOnCurve = #"{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a1"}"#
        let shortRSA = #"{"kty":"RSA","n":"\#(Base64URL.encode([0xC1] + [UInt8](repeating: 0x55, count: 127)))","e":"AQAB"}"#
        let wrongSize = #"{"kty":"EC","crv":"P-256","x":"AQ","y":"AQ"}"#
        for text in [notOnCurve, shortRSA, wrongSize, #"{"kty":"oct","k":"AAAA"}"#, #"{"kty":"EC","crv":"P-521","x":"AQ","y":"AQ"}"#] {
            #expect(throws: TokenVerificationError.self, "\(text)") { try JWK(jsonText: Array(text.utf8)) }
        }
    }

    @Test func aKeySetSkipsKeysItCannotUse() throws {
        let key = try SigningKey.generate(.es256, keyID: "ok")
        let text = #"{"keys":[{"kty":"oct","k":"AAAA"},\#(try key.publicJWK().json.serialized),{"kty":"RSA","use":"enc","n":"AQ","e":"AQAB"}]}"#
        let set = try JWKSet(jsonText: Array(text.utf8))
        #expect(set.keys.count == 1)
        #expect(set.skippedCount == 2)
        #expect(set.candidates(keyID: "ok", algorithm: .es256).count == 1)
    }
}
