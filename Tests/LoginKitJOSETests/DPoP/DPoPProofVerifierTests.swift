import Foundation
import LoginKitJOSE
import Testing

/// A proof that is valid for `request` below, with its header and claims open to change: each
/// negative test spoils exactly one thing, after checking that the unspoilt proof passes.
private struct ProofFixture {
    static let method = "POST"
    static let url = "https://rs.example/api/items?page=2"
    static let accessToken = "Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU"
    static let nonce = "server-nonce-1"
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    let key: DPoPKey
    var header: [String: JSONValue]
    var claims: [String: JSONValue]

    init(_ algorithm: JWSAlgorithm = .es256) throws {
        key = try DPoPKey.generate(algorithm)
        header = ["typ": .string("dpop+jwt"), "alg": .string(algorithm.rawValue), "jwk": key.publicJWK]
        claims = [
            "jti": .string("proof-1"), "htm": .string("POST"), "htu": .string("https://rs.example/api/items"),
            "iat": .number("1800000000"), "nonce": .string(Self.nonce), "ath": .string(DPoPKey.accessTokenHash(Self.accessToken)),
        ]
    }

    /// The compact JWS of `header` and `claims`, signed by the key's signing key, or by `sign`.
    func proof(sign: (([UInt8]) throws -> [UInt8])? = nil) throws -> String {
        let input =
            Base64URL.encode(Array(JSONValue.object(header).serialized.utf8)) + "."
            + Base64URL.encode(Array(JSONValue.object(claims).serialized.utf8))
        let bytes = Array(input.utf8)
        let signature: [UInt8]
        if let sign {
            signature = try sign(bytes)
        } else {
            signature = try key.signingKey.sign(bytes)
        }
        return input + "." + Base64URL.encode(signature)
    }

    /// What `verifier` says of `proof` for the request (nil: accepted).
    func failure(
        of proof: String, verifier: DPoPProofVerifier = DPoPProofVerifier(), method: String = ProofFixture.method,
        url: String = ProofFixture.url, accessToken: String? = ProofFixture.accessToken, expectedNonce: String? = ProofFixture.nonce,
        boundThumbprint: String? = nil
    ) -> DPoPProofVerifier.Failure? {
        let bound = boundThumbprint ?? key.thumbprint
        do throws(DPoPProofVerifier.Failure) {
            let verified = try verifier.verify(
                proof, method: method, url: url, accessToken: accessToken, expectedNonce: expectedNonce, boundThumbprint: bound,
                now: Self.now)
            #expect(verified.thumbprint == bound)
            return nil
        } catch {
            if !proof.isEmpty { #expect(!error.message.contains(proof)) }
            #expect(error.message.count < 200)
            return error
        }
    }

    /// The failure of the proof after `change`, once the proof without it passed.
    func failure(after change: (inout ProofFixture) throws -> Void, sign: (([UInt8]) throws -> [UInt8])? = nil) throws -> DPoPProofVerifier.Failure? {
        let original = try proof()
        #expect(failure(of: original) == nil, "the proof before the change must pass")
        var changed = self
        try change(&changed)
        let spoilt = try changed.proof(sign: sign)
        return changed.failure(of: spoilt)
    }
}

extension DPoPProofVerifier.Failure {
    /// The message of an `.invalidProof`, the empty string for `.useNonce`.
    fileprivate var message: String {
        switch self {
        case .invalidProof(let message): message
        case .useNonce: ""
        }
    }

    /// Whether this is an `.invalidProof`.
    fileprivate var isInvalidProof: Bool {
        if case .invalidProof = self { return true }
        return false
    }
}

/// The checks of RFC 9449 §4.3, one at a time: a good proof passes, and a proof spoilt in exactly one
/// way fails for that reason.
@Suite(.timeLimit(.minutes(2)))
struct DPoPProofVerifierTests {
    @Test(arguments: [JWSAlgorithm.es256, .es384, .edDSA, .rs256, .ps256])
    func acceptsTheProofsOfEveryDPoPAlgorithm(_ algorithm: JWSAlgorithm) throws {
        let key = try DPoPKey.generate(algorithm)
        let proof = try key.proof(
            method: "POST", url: "https://RS.example:443/api/items?page=2#x", nonce: "n-1", accessToken: "token-1", now: ProofFixture.now)
        let verified = try DPoPProofVerifier().verify(
            proof, method: "POST", url: ProofFixture.url, accessToken: "token-1", expectedNonce: "n-1", boundThumbprint: key.thumbprint,
            now: ProofFixture.now.addingTimeInterval(0.9))
        #expect(verified.thumbprint == key.thumbprint)
        #expect(verified.issuedAt == ProofFixture.now)
        #expect(verified.nonce == "n-1")
        #expect(Base64URL.decode(verified.jti)?.count == 16)
        // The checks that need no nonce, access token or binding pass too.
        let unbound = try DPoPProofVerifier().verify(proof, method: "POST", url: ProofFixture.url, now: ProofFixture.now)
        #expect(unbound.thumbprint == key.thumbprint)
    }

    @Test func acceptsTheFixture() throws {
        let fixture = try ProofFixture()
        let proof = try fixture.proof()
        #expect(fixture.failure(of: proof) == nil)
        // htu compared as DPoPKey.htu writes it: the query is ignored, case and default port too.
        #expect(try fixture.failure { $0.claims["htu"] = .string("HTTPS://rs.EXAMPLE:443/api/items?other=1") } == nil)
        // iat at the edges of the window, a fractional iat, and a nonce nobody asked for.
        #expect(try fixture.failure { $0.claims["iat"] = .number("1799999700") } == nil)
        #expect(try fixture.failure { $0.claims["iat"] = .number("1800000300") } == nil)
        #expect(try fixture.failure { $0.claims["iat"] = .number("1800000000.5") } == nil)
        #expect(fixture.failure(of: proof, expectedNonce: nil) == nil)
        // With no access token given, `ath` is not looked at.
        #expect(try fixture.failure { $0.claims["ath"] = .string("other") }?.isInvalidProof == true)
        var noAccessToken = fixture
        noAccessToken.claims["ath"] = .string("other")
        let withOtherHash = try noAccessToken.proof()
        #expect(noAccessToken.failure(of: withOtherHash, accessToken: nil) == nil)
    }

    @Test func refusesAnotherTyp() throws {
        let fixture = try ProofFixture()
        #expect(try fixture.failure { $0.header["typ"] = .string("JWT") }?.isInvalidProof == true)
        #expect(try fixture.failure { $0.header["typ"] = .string("at+jwt") }?.isInvalidProof == true)
        #expect(try fixture.failure { $0.header["typ"] = nil }?.isInvalidProof == true)
    }

    @Test func refusesAlgNone() throws {
        let fixture = try ProofFixture()
        let failure = try fixture.failure(after: { $0.header["alg"] = .string("none") }, sign: { _ in [] })
        #expect(failure?.isInvalidProof == true)
        #expect(failure?.message.contains("none") == true)
        #expect(try fixture.failure { $0.header["alg"] = .string("none") }?.isInvalidProof == true)
    }

    @Test func refusesHMAC() throws {
        let fixture = try ProofFixture()
        // Keyed with what a confused verifier would take as the secret: the jwk's serialisation.
        let secret = Array(fixture.key.publicJWK.serialized.utf8)
        let failure = try fixture.failure(
            after: { $0.header["alg"] = .string("HS256") }, sign: { try HMACSHA256.authenticationCode($0, key: secret) })
        #expect(failure?.isInvalidProof == true)
        #expect(failure?.message.contains("HMAC") == true)
    }

    @Test func refusesAnAlgorithmNotAllowedOrNotTheKeys() throws {
        let fixture = try ProofFixture()
        let proof = try fixture.proof()
        #expect(fixture.failure(of: proof) == nil)
        #expect(fixture.failure(of: proof, verifier: DPoPProofVerifier(allowedAlgorithms: [.es384, .edDSA]))?.isInvalidProof == true)
        // ES384 named over a P-256 key.
        #expect(try fixture.failure { $0.header["alg"] = .string("ES384") }?.isInvalidProof == true)
        #expect(try fixture.failure { $0.header["alg"] = .string("XS256") }?.isInvalidProof == true)
    }

    @Test func refusesAJWKWithPrivateMembers() throws {
        let fixture = try ProofFixture()
        let privateJWK = try fixture.key.privateJWK()
        #expect(try fixture.failure { $0.header["jwk"] = privateJWK }?.isInvalidProof == true)
        for name in ["d", "p", "q", "dp", "dq", "qi", "k", "oth"] {
            var members = fixture.key.publicJWK.objectValue ?? [:]
            members[name] = .string("AQAB")
            let failure = try fixture.failure { $0.header["jwk"] = .object(members) }
            #expect(failure?.isInvalidProof == true, "\(name)")
            #expect(failure?.message.contains("private") == true, "\(name)")
        }
    }

    @Test func refusesAMissingOrForeignJWK() throws {
        let fixture = try ProofFixture()
        let other = try DPoPKey.generate()
        #expect(try fixture.failure { $0.header["jwk"] = nil }?.isInvalidProof == true)
        #expect(try fixture.failure { $0.header["jwk"] = .string("key") }?.isInvalidProof == true)
        #expect(try fixture.failure { $0.header["jwk"] = .object(["kty": .string("oct"), "alg": .string("ES256")]) }?.isInvalidProof == true)
        // Another key's jwk: the signature does not verify with it.
        #expect(try fixture.failure { $0.header["jwk"] = other.publicJWK }?.isInvalidProof == true)
    }

    @Test func refusesABadSignature() throws {
        let fixture = try ProofFixture()
        let proof = try fixture.proof()
        #expect(fixture.failure(of: proof) == nil)
        var parts = proof.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        try #require(parts.count == 3)
        var signature = try #require(Base64URL.decode(parts[2]))
        signature[0] ^= 0x01
        parts[2] = Base64URL.encode(signature)
        let failure = fixture.failure(of: parts.joined(separator: "."))
        #expect(failure?.isInvalidProof == true)
        #expect(failure?.message.contains("signature") == true)
    }

    @Test func refusesWhatIsNotACompactJWSOfAtMost8KiB() throws {
        let fixture = try ProofFixture()
        let proof = try fixture.proof()
        #expect(fixture.failure(of: proof) == nil)
        let parts = proof.split(separator: ".", omittingEmptySubsequences: false)
        #expect(fixture.failure(of: parts.prefix(2).joined(separator: "."))?.isInvalidProof == true)
        #expect(fixture.failure(of: proof + ".e30")?.isInvalidProof == true)
        #expect(fixture.failure(of: "")?.isInvalidProof == true)
        #expect(try fixture.failure { $0.claims["pad"] = .string(String(repeating: "x", count: 7000)) }?.isInvalidProof == true)
        // The same padding just under the limit passes.
        #expect(try fixture.failure { $0.claims["pad"] = .string(String(repeating: "x", count: 5000)) } == nil)
    }

    @Test func refusesClaimsThatAreMissingOrMistyped() throws {
        let fixture = try ProofFixture()
        for name in ["jti", "htm", "htu", "iat"] {
            #expect(try fixture.failure { $0.claims[name] = nil }?.isInvalidProof == true, "\(name)")
        }
        #expect(try fixture.failure { $0.claims["iat"] = .string("1800000000") }?.isInvalidProof == true)
        #expect(try fixture.failure { $0.claims["jti"] = .string("") }?.isInvalidProof == true)
        #expect(try fixture.failure { $0.claims["jti"] = .number("1") }?.isInvalidProof == true)
        #expect(try fixture.failure { $0.claims["jti"] = .string(String(repeating: "j", count: 257)) }?.isInvalidProof == true)
        #expect(try fixture.failure { $0.claims["jti"] = .string(String(repeating: "j", count: 256)) } == nil)
        #expect(try fixture.failure { $0.claims["nonce"] = .number("1") }?.isInvalidProof == true)
    }

    @Test func refusesAnotherMethod() throws {
        let fixture = try ProofFixture()
        #expect(try fixture.failure { $0.claims["htm"] = .string("GET") }?.isInvalidProof == true)
        #expect(try fixture.failure { $0.claims["htm"] = .string("post") }?.isInvalidProof == true)
    }

    @Test func refusesAnotherURL() throws {
        let fixture = try ProofFixture()
        #expect(try fixture.failure { $0.claims["htu"] = .string("https://rs.example/api/other") }?.isInvalidProof == true)
        #expect(try fixture.failure { $0.claims["htu"] = .string("https://evil.example/api/items") }?.isInvalidProof == true)
        #expect(try fixture.failure { $0.claims["htu"] = .string("http://rs.example/api/items") }?.isInvalidProof == true)
        #expect(try fixture.failure { $0.claims["htu"] = .string("https://rs.example:8443/api/items") }?.isInvalidProof == true)
        #expect(try fixture.failure { $0.claims["htu"] = .string("/api/items") }?.isInvalidProof == true)
        let proof = try fixture.proof()
        #expect(fixture.failure(of: proof, url: "not a url")?.isInvalidProof == true)
    }

    @Test func refusesAnIatOutsideTheWindow() throws {
        let fixture = try ProofFixture()
        let old = try fixture.failure { $0.claims["iat"] = .number("1799999699") }
        #expect(old?.isInvalidProof == true)
        #expect(old?.message.contains("past") == true)
        let ahead = try fixture.failure { $0.claims["iat"] = .number("1800000301") }
        #expect(ahead?.isInvalidProof == true)
        #expect(ahead?.message.contains("future") == true)
        // A narrower window refuses what the default accepts.
        let proof = try fixture.proof()
        #expect(fixture.failure(of: proof, verifier: DPoPProofVerifier(window: .seconds(300))) == nil)
        var aMinuteOld = fixture
        aMinuteOld.claims["iat"] = .number("1799999940")
        let aMinuteOldProof = try aMinuteOld.proof()
        #expect(aMinuteOld.failure(of: aMinuteOldProof, verifier: DPoPProofVerifier(window: .seconds(30)))?.isInvalidProof == true)
        #expect(aMinuteOld.failure(of: aMinuteOldProof) == nil)
    }

    @Test func asksForTheNonceWhenItIsMissingOrAnother() throws {
        let fixture = try ProofFixture()
        #expect(try fixture.failure { $0.claims["nonce"] = nil } == .useNonce)
        #expect(try fixture.failure { $0.claims["nonce"] = .string("server-nonce-0") } == .useNonce)
        // Any other defect wins over the nonce: `.useNonce` means the proof is good but for it.
        #expect(
            try fixture.failure {
                $0.claims["nonce"] = nil
                $0.claims["htm"] = .string("GET")
            }?.isInvalidProof == true)
    }

    @Test func refusesAMissingOrWrongAccessTokenHash() throws {
        let fixture = try ProofFixture()
        let missing = try fixture.failure { $0.claims["ath"] = nil }
        #expect(missing?.isInvalidProof == true)
        #expect(missing?.message.contains("ath") == true)
        let other = try fixture.failure { $0.claims["ath"] = .string(DPoPKey.accessTokenHash("another-token")) }
        #expect(other?.isInvalidProof == true)
        #expect(other?.message.contains("ath") == true)
        #expect(try fixture.failure { $0.claims["ath"] = .string("") }?.isInvalidProof == true)
    }

    @Test func refusesAKeyOtherThanTheBoundOne() throws {
        let fixture = try ProofFixture()
        let other = try DPoPKey.generate()
        let proof = try fixture.proof()
        #expect(fixture.failure(of: proof, boundThumbprint: fixture.key.thumbprint) == nil)
        let failure = fixture.failure(of: proof, boundThumbprint: other.thumbprint)
        #expect(failure?.isInvalidProof == true)
        #expect(failure?.message.contains("bound") == true)
        // A proof by the other key, whole and valid, for a token bound to the fixture's key.
        let otherProof = try other.proof(
            method: ProofFixture.method, url: ProofFixture.url, nonce: ProofFixture.nonce, accessToken: ProofFixture.accessToken,
            now: ProofFixture.now)
        #expect(fixture.failure(of: otherProof, boundThumbprint: other.thumbprint) == nil)
        #expect(fixture.failure(of: otherProof)?.isInvalidProof == true)
    }
}
