


import Foundation

import LoginKitJOSE
import Testing

struct SignatureVector: Sendable, CustomTestStringConvertible {
    let name: String
    let algorithm: JWSAlgorithm
    let key: JWK
    let compact: String
    var testDescription: String { name }

    static func all() throws -> [SignatureVector] {
        let url = try #require(Bundle.module.url(forResource: "jws-vectors", withExtension: "json", subdirectory: "Vectors"))
        let document = try JSONValue.parse(Array(try Data(contentsOf: url)))
        return try #require(document.arrayValue).map { entry in
            SignatureVector(
                name: try #require(entry["name"]?.stringValue),
                algorithm: try #require(JWSAlgorithm(rawValue: entry["alg"]?.stringValue ?? "")),
                key: try JWK(json: try #require(entry["jwk"])),
                compact: try #require(entry["compact"]?.stringValue)
            )
        }
    }
}

@Suite struct VectorTests {
    @Test func rfcSignaturesVerify() throws {
        let vectors = try SignatureVector.all()
        #expect(vectors.count == 5)
        for vector in vectors {
            let jws = try CompactJWS(parsing: vector.compact)
            #expect(jws.algorithmName == vector.algorithm.rawValue, "\(vector.name)")
            #expect(jws.hasValidSignature(key: vector.key, algorithm: vector.algorithm), "\(vector.name)")
        }
    }

    @Test func rfcSignaturesFailWithAnyByteOfTheSignatureChanged() throws {
        for vector in try SignatureVector.all() {
            let parts = vector.compact.split(separator: ".").map(String.init)
            let signature = try #require(Base64URL.decode(parts[2]))
            for index in stride(from: 0, to: signature.count, by: max(1, signature.count / 16)) {
                var tampered = signature
                tampered[index] ^= 0x01
                let token = parts[0] + "." + parts[1] + "." + Base64URL.encode(tampered)
                let jws = try CompactJWS(parsing: token)
                #expect(!jws.hasValidSignature(key: vector.key, algorithm: vector.algorithm), "\(vector.name) byte \(index)")
            }
            var payload = try #require(Base64URL.decode(parts[1]))
            payload[0] ^= 0x01
            let token = parts[0] + "." + Base64URL.encode(payload) + "." + parts[2]
            #expect(!(try CompactJWS(parsing: token)).hasValidSignature(key: vector.key, algorithm: vector.algorithm))
        }
    }

    @Test func aVectorKeyDoesNotVerifyAnotherAlgorithmsSignature() throws {
        let vectors = try SignatureVector.all()
        let rsa = try #require(vectors.first { $0.algorithm == .rs256 })
        let pss = try #require(vectors.first { $0.algorithm == .ps384 })
        // The PS384 token checked as RS384/RS256 with the same RSA key must fail.
        let jws = try CompactJWS(parsing: pss.compact)
        #expect(!jws.hasValidSignature(key: pss.key, algorithm: .rs384))
        #expect(!jws.hasValidSignature(key: rsa.key, algorithm: .ps256))
    }

    @Test(arguments: [
        ("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE"), ("foobar", "Zm9vYmFy"),
    ])
    func base64URLMatchesRFC4648(plain: String, encoded: String) {
        #expect(Base64URL.encode(Array(plain.utf8)) == encoded)
        #expect(Base64URL.decode(encoded) == Array(plain.utf8))
    }

    @Test func base64URLUsesTheURLSafeAlphabet() {
        #expect(Base64URL.encode([0xFB, 0xFF, 0xBF]) == "-_-_")
        #expect(Base64URL.decode("-_-_") == [0xFB, 0xFF, 0xBF])
    }

    @Test(arguments: ["Zg==", "Zm9v+", "Zm9v/", "Zm 9v", "Zm9v\n", "Z", "Zh", "Zm9", "é"])
    func base64URLRefusesAnythingButTheCanonicalForm(_ text: String) {
        // "Zh" and "Zm9" carry non-zero unused bits: not the canonical encoding of any bytes.
        #expect(Base64URL.decode(text) == nil)
    }

    @Test func base64URLRoundTripsEveryLength() throws {
        for length in 0..<70 {
            let bytes = try SecureRandom.bytes(length)
            #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes)
        }
    }
}
