import Foundation
import LoginKitJOSE
import Testing

/// DPoP keys: RFC 7638 thumbprints, the private JWK and Codable round trips, descriptions that hide
/// the private key, the proofs' header and claims, and the RFC 9449 §4.3 form of `htu`.
@Suite(.timeLimit(.minutes(2)))
struct DPoPKeyTests {
    static let algorithms: [JWSAlgorithm] = [.es256, .es384, .edDSA, .rs256, .ps256]
    static let now = Date(timeIntervalSince1970: 1_800_000_000.75)

    /// The RSA key of RFC 7638 §3.1.
    static let rfc7638Modulus = [
        "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc",
        "_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQ",
        "R0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bF",
        "TWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw",
    ].joined()

    @Test func thumbprintOfTheRFC7638ExampleKey() throws {
        let jwk = try JWK(
            json: .object([
                "kty": .string("RSA"), "n": .string(Self.rfc7638Modulus), "e": .string("AQAB"),
                "alg": .string("RS256"), "kid": .string("2011-04-29"),
            ]))
        #expect(jwk.requiredMembers.serialized == "{\"e\":\"AQAB\",\"kty\":\"RSA\",\"n\":\"\(Self.rfc7638Modulus)\"}")
        #expect(try jwk.thumbprint() == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs")
    }

    @Test func accessTokenHashOfTheRFC9449Example() {
        // RFC 9449 §7.1, the access token of Figure 12 and the `ath` of Figure 13.
        #expect(DPoPKey.accessTokenHash("Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU") == "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo")
    }

    @Test(arguments: algorithms)
    func publicJWKHoldsTheRequiredMembersOnly(_ algorithm: JWSAlgorithm) throws {
        let key = try DPoPKey.generate(algorithm)
        #expect(key.algorithm == algorithm)
        let names = Set((key.publicJWK.objectValue ?? [:]).keys)
        switch algorithm.keyType {
        case .rsa: #expect(names == ["kty", "n", "e"])
        case .ec: #expect(names == ["kty", "crv", "x", "y"])
        case .okp: #expect(names == ["kty", "crv", "x"])
        }
        #expect(try key.thumbprint == Base64URL.encode(MessageDigest.sha256(Array(key.publicJWK.serialized.utf8))))
        #expect(key.thumbprint.count == 43)
        #expect(try JWK(json: key.publicJWK).thumbprint() == key.thumbprint)
    }

    @Test(arguments: algorithms)
    func privateJWKRoundTripKeepsTheKey(_ algorithm: JWSAlgorithm) throws {
        let key = try DPoPKey.generate(algorithm)
        let jwk = try key.privateJWK()
        let names = Set((jwk.objectValue ?? [:]).keys)
        switch algorithm.keyType {
        case .rsa: #expect(names == ["kty", "alg", "n", "e", "d", "p", "q", "dp", "dq", "qi"])
        case .ec: #expect(names == ["kty", "alg", "crv", "x", "y", "d"])
        case .okp: #expect(names == ["kty", "alg", "crv", "x", "d"])
        }
        #expect(jwk["alg"] == .string(algorithm.rawValue))

        let reread = try DPoPKey(privateJWK: jwk)
        #expect(reread == key)
        #expect(reread.algorithm == algorithm)
        #expect(reread.thumbprint == key.thumbprint)
        #expect(reread.publicJWK == key.publicJWK)
        #expect(try reread.privateJWK() == jwk)

        // A proof signed by the key read back verifies, bound to the original's thumbprint.
        let url = "https://as.example/token"
        let proof = try reread.proof(method: "POST", url: url, nonce: nil, accessToken: nil, now: Self.now)
        let verified = try DPoPProofVerifier().verify(proof, method: "POST", url: url, boundThumbprint: key.thumbprint, now: Self.now)
        #expect(verified.thumbprint == key.thumbprint)
    }

    @Test func theSameKeyWithAnotherAlgorithmIsAnotherDPoPKey() throws {
        let key = try DPoPKey.generate(.rs256)
        guard case .object(var members) = try key.privateJWK() else {
            Issue.record("the private JWK is not an object")
            return
        }
        members["alg"] = .string("PS256")
        let other = try DPoPKey(privateJWK: .object(members))
        #expect(other.algorithm == .ps256)
        #expect(other.thumbprint == key.thumbprint)
        #expect(other != key)
    }

    @Test func keysOfOtherAlgorithmsAreRefused() throws {
        for algorithm in JWSAlgorithm.allCases where !Self.algorithms.contains(algorithm) {
            #expect(throws: TokenVerificationError.self) { try DPoPKey.generate(algorithm) }
        }
        let key = try DPoPKey.generate(.es256)
        guard case .object(var members) = try key.privateJWK() else {
            Issue.record("the private JWK is not an object")
            return
        }
        for algorithm in ["HS256", "none", "RS512", "ES384"] {
            members["alg"] = .string(algorithm)
            let candidate = JSONValue.object(members)
            let error = #expect(throws: TokenVerificationError.self) { try DPoPKey(privateJWK: candidate) }
            #expect(error?.code == .invalidKey)
        }
        members["alg"] = nil
        let withoutAlgorithm = JSONValue.object(members)
        #expect(throws: TokenVerificationError.self) { try DPoPKey(privateJWK: withoutAlgorithm) }
        let publicOnly = key.publicJWK.adding("alg", "ES256")
        #expect(throws: TokenVerificationError.self) { try DPoPKey(privateJWK: publicOnly) }
    }

    @Test(arguments: algorithms)
    func codableRoundTripThroughJSON(_ algorithm: JWSAlgorithm) throws {
        struct Stored: Codable {
            let key: DPoPKey
        }
        let key = try DPoPKey.generate(algorithm)
        let data = try JSONEncoder().encode(Stored(key: key))
        let decoded = try JSONDecoder().decode(Stored.self, from: data)
        #expect(decoded.key == key)
        #expect(try decoded.key.privateJWK() == key.privateJWK())
        // The key is stored as its private JWK object.
        let object = try JSONValue.parse(Array(data))
        let expected = try key.privateJWK()
        #expect(object["key"] == expected)
    }

    @Test func decodingRefusesWhatIsNotAPrivateDPoPKey() throws {
        let key = try DPoPKey.generate()
        let publicOnly = String(decoding: try JSONEncoder().encode(key.publicJWK.adding("alg", "ES256").stringMembers), as: UTF8.self)
        for text in ["{\"kty\":\"EC\"}", "[]", "\"ES256\"", "{\"alg\":\"ES256\",\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":1}", publicOnly] {
            #expect(throws: (any Error).self, "\(text)") { try JSONDecoder().decode(DPoPKey.self, from: Data(text.utf8)) }
        }
    }

    @Test(arguments: algorithms)
    func descriptionNeverShowsThePrivateKey(_ algorithm: JWSAlgorithm) throws {
        let key = try DPoPKey.generate(algorithm)
        let jwk = try key.privateJWK()
        let secrets = ["d", "p", "q", "dp", "dq", "qi"].compactMap { jwk[$0]?.stringValue }
        #expect(!secrets.isEmpty)
        var dumped = ""
        dump(key, to: &dumped)
        var dumpedInside = ""
        dump([key], to: &dumpedInside)
        for shown in [String(describing: key), String(reflecting: key), "\(key)", dumped, dumpedInside] {
            for secret in secrets { #expect(!shown.contains(secret)) }
        }
        #expect(String(describing: key) == "DPoPKey(\(algorithm.rawValue), jkt: \(key.thumbprint))")
        #expect(Mirror(reflecting: key).children.isEmpty)
    }

    @Test func proofHasTheRFC9449HeaderAndClaims() throws {
        let key = try DPoPKey.generate()
        let token = "Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU"
        let proof = try key.proof(
            method: "GET", url: "HTTPS://API.Example.COM:443/v1/Items?page=2#top", nonce: "eyJ7S_zG.eyJH0-Z.HX4w-7v", accessToken: token,
            now: Self.now)
        let jws = try CompactJWS(parsing: proof)
        #expect(jws.header == ["typ": .string("dpop+jwt"), "alg": .string("ES256"), "jwk": key.publicJWK])
        let publicKey = try JWK(json: key.publicJWK)
        #expect(jws.hasValidSignature(key: publicKey, algorithm: .es256))
        let claims = try #require(try JSONValue.parse(jws.payload).objectValue)
        #expect(Set(claims.keys) == ["jti", "htm", "htu", "iat", "nonce", "ath"])
        #expect(claims["htm"] == .string("GET"))
        #expect(claims["htu"] == .string("https://api.example.com/v1/Items"))
        #expect(claims["iat"] == .number("1800000000"))
        #expect(claims["nonce"] == .string("eyJ7S_zG.eyJH0-Z.HX4w-7v"))
        #expect(claims["ath"] == .string("fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo"))
        let jti = try #require(claims["jti"]?.stringValue)
        #expect(Base64URL.decode(jti)?.count == 16)

        // Another proof has another jti; without nonce and access token it has neither claim.
        let plain = try key.proof(method: "POST", url: "https://as.example/token", nonce: nil, accessToken: nil, now: Self.now)
        let plainClaims = try #require(try JSONValue.parse(CompactJWS(parsing: plain).payload).objectValue)
        #expect(Set(plainClaims.keys) == ["jti", "htm", "htu", "iat"])
        #expect(plainClaims["jti"] != claims["jti"])
        #expect(plainClaims["htm"] == .string("POST"))
    }

    @Test func proofRefusesABadMethodOrURL() throws {
        let key = try DPoPKey.generate()
        for (method, url) in [("", "https://a.example/"), ("GET POST", "https://a.example/"), ("GE\nT", "https://a.example/"),
            ("GET", "/relative"), ("GET", "ftp://a.example/x"), ("GET", "https://user:pw@a.example/"), ("GET", "")]
        {
            let error = #expect(throws: TokenVerificationError.self) {
                try key.proof(method: method, url: url, nonce: nil, accessToken: nil, now: Self.now)
            }
            #expect(error?.code == .malformed)
        }
    }

    @Test(arguments: [
        ("https://server.example.com/token", "https://server.example.com/token"),
        ("HTTPS://Server.Example.COM/Token", "https://server.example.com/Token"),
        ("https://server.example.com:443/token", "https://server.example.com/token"),
        ("http://server.example.com:80/token", "http://server.example.com/token"),
        ("http://server.example.com:443/token", "http://server.example.com:443/token"),
        ("https://server.example.com:80/token", "https://server.example.com:80/token"),
        ("https://server.example.com:8443/token?x=1#frag", "https://server.example.com:8443/token"),
        ("https://server.example.com/a/b/?x=1&y=2", "https://server.example.com/a/b/"),
        ("https://server.example.com/token#frag?x", "https://server.example.com/token"),
        ("https://server.example.com", "https://server.example.com/"),
        ("https://server.example.com?x=1", "https://server.example.com/"),
        ("https://server.example.com#frag", "https://server.example.com/"),
        ("https://server.example.com/p%41th%2fx", "https://server.example.com/p%41th%2fx"),
        ("https://[::1]:8443/a", "https://[::1]:8443/a"),
        ("https://[::1]:443/a", "https://[::1]/a"),
        ("http://[2001:DB8::1]/", "http://[2001:db8::1]/"),
        ("http://127.0.0.1:8080/api/resource", "http://127.0.0.1:8080/api/resource"),
    ])
    func htuNormalisation(_ url: String, _ expected: String) {
        #expect(DPoPKey.htu(url) == expected)
        #expect(DPoPKey.htu(expected) == expected)
    }

    @Test func htuIsNilForWhatIsNotAnAbsoluteHTTPURL() {
        for url in ["", "/token", "server.example.com/token", "ftp://server.example.com/", "https://", "https:///path",
            "https://user@server.example.com/", "https://server.example.com:99999/", "https://server.example.com/a b"]
        {
            #expect(DPoPKey.htu(url) == nil, "\(url)")
        }
    }

    /// libcurl sends the path with its dot segments removed (RFC 3986 §5.2.4): the proof names that
    /// path. A percent-encoded dot is no dot segment, for libcurl as for `htu`.
    @Test(arguments: [
        ("https://api.test/a/../b", "https://api.test/b"),
        ("https://api.test/a/./b/", "https://api.test/a/b/"),
        ("https://api.test/../x", "https://api.test/x"),
        ("https://api.test/a/%2E%2E/b", "https://api.test/a/%2E%2E/b"),
        ("https://api.test/a/b/c/./../../g", "https://api.test/a/g"),
        ("https://api.test/a/b/..?next=/../x", "https://api.test/a/"),
        ("https://api.test/a/..", "https://api.test/"),
        ("https://api.test/.", "https://api.test/"),
        ("https://api.test/a/.b/..c/", "https://api.test/a/.b/..c/"),
    ])
    func htuRemovesDotSegmentsFromThePath(_ url: String, _ expected: String) {
        #expect(DPoPKey.htu(url) == expected)
        #expect(DPoPKey.htu(expected) == expected)
    }

    @Test func aProofMadeForAPathWithDotSegmentsVerifiesForThePathSent() throws {
        let key = try DPoPKey.generate()
        let proof = try key.proof(method: "GET", url: "https://api.test/a/../b", nonce: nil, accessToken: nil, now: Self.now)
        let claims = try #require(try JSONValue.parse(CompactJWS(parsing: proof).payload).objectValue)
        #expect(claims["htu"] == .string("https://api.test/b"))
        let verified = try DPoPProofVerifier().verify(proof, method: "GET", url: "https://api.test/b", now: Self.now)
        #expect(verified.thumbprint == key.thumbprint)
        #expect(throws: DPoPProofVerifier.Failure.self) {
            try DPoPProofVerifier().verify(proof, method: "GET", url: "https://api.test/a/b", now: Self.now)
        }
    }
}

extension JSONValue {
    /// This object with member `name` set to the string `value`.
    fileprivate func adding(_ name: String, _ value: String) -> JSONValue {
        var members = objectValue ?? [:]
        members[name] = .string(value)
        return .object(members)
    }

    /// The string members of this object.
    fileprivate var stringMembers: [String: String] {
        (objectValue ?? [:]).compactMapValues(\.stringValue)
    }
}
