import Foundation
import LoginKitJOSE
import LoginKitTestSupport
import Testing

/// What the verification fast paths (an ASCII string read without validation, escaped strings
/// gathered in one buffer, integers converted without `strtod`, the registered claims picked in one
/// pass, the signing input read in place, DER signatures built on the stack, verify contexts pooled
/// per algorithm) must still refuse, and report, exactly as the slow paths did.
@Suite struct VerificationFastPathTests {
    static let clock = TestWallClock()

    func verifier(for key: SigningKey) throws -> IDTokenVerifier {
        try LoginKitJOSETests.verifier(for: key, clock: Self.clock)
    }

    // MARK: JSON

    /// Invalid UTF-8 with no escape in the string, before an escape, and after one: each is refused
    /// at the offset where its run starts.
    @Test(arguments: [
        ([0x22, 0xC0, 0xAF, 0x22], 1),  // overlong
        ([0x22, 0xED, 0xA0, 0x80, 0x22], 1),  // an encoded surrogate
        ([0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], 1),  // beyond U+10FFFF
        ([0x22, 0x5C, 0x6E, 0xED, 0xA0, 0x80, 0x22], 3),  // after an escape
        ([0x22, 0x5C, 0x6E, 0xC3, 0x22], 3),  // truncated, after an escape
        ([0x22, 0xE2, 0x82] + Array(#"\u00ac""#.utf8), 1),  // truncated, before an escape
    ] as [([UInt8], Int)])
    func invalidUTF8IsRefusedWhereItsRunStarts(_ bytes: [UInt8], _ offset: Int) {
        let error = #expect(throws: JSONParseError.self) { try JSONValue.parse(bytes) }
        #expect(error?.offset == offset)
        #expect(error?.reason == "invalid UTF-8")
    }

    @Test(arguments: [
        ([0x22, 0x61, 0x09, 0x22], 2, "control character in string"),
        ([0x22, 0xC3, 0xA9, 0x1F, 0x22], 3, "control character in string"),
        (Array(#""\ud800\u0041""#.utf8), 13, "invalid low surrogate"),
        (Array(#""x\ud800""#.utf8), 8, "lone high surrogate"),
        (Array(#""\udfff""#.utf8), 7, "lone low surrogate"),
    ] as [([UInt8], Int, String)])
    func controlCharactersAndBrokenSurrogatesAreRefused(_ bytes: [UInt8], _ offset: Int, _ reason: String) {
        let error = #expect(throws: JSONParseError.self) { try JSONValue.parse(bytes) }
        #expect(error?.offset == offset)
        #expect(error?.reason == reason)
    }

    @Test func deleteIsNotAControlCharacter() throws {
        #expect(try JSONValue.parse([0x22, 0x7F, 0x22]).stringValue == "\u{7F}")
    }

    /// Integers inside `Int64` convert without `strtod`, rounded to nearest-even as `strtod` rounds;
    /// the rest still go through `strtod`.
    @Test(arguments: [
        ("9007199254740995", 9_007_199_254_740_996.0),
        ("9223372036854775807", 9_223_372_036_854_775_808.0),
        ("9223372036854775808", 9_223_372_036_854_775_808.0),
        ("-9223372036854775808", -9_223_372_036_854_775_808.0),
        ("-9223372036854775809", -9_223_372_036_854_775_808.0),
        ("18446744073709551615", 18_446_744_073_709_551_616.0),
        ("0", 0.0),
    ])
    func integersRoundAsStrtodRounds(_ text: String, _ expected: Double) throws {
        let value = try #require(try JSONValue.parse(Array(text.utf8)).doubleValue)
        #expect(value == expected)
        #expect(value.sign == expected.sign)
        #expect(value == Double(text))
    }

    // MARK: Claims

    /// The first wrong registered claim named does not depend on the members' order.
    @Test(arguments: [
        (#"{"sub":1,"iss":2}"#, "iss"),
        (#"{"iat":"x","nonce":5}"#, "nonce"),
        (#"{"exp":"x","azp":1}"#, "azp"),
        (#"{"aud":1,"iat":"x"}"#, "iat"),
    ])
    func theFirstWrongClaimIsNamedInAFixedOrder(_ payload: String, _ name: String) {
        let error = #expect(throws: TokenVerificationError.self) { try JWTClaims(payload: Array(payload.utf8)) }
        #expect(error?.code == .malformed)
        #expect(error?.message.contains("\"\(name)\"") == true)
    }

    // MARK: Algorithms

    /// An `alg` that is no supported algorithm is refused, and the message says why.
    @Test(arguments: [
        ("none", "unsigned"), ("nOnE", "unsigned"),
        ("HS256", "HMAC"), ("hs256", "HMAC"), ("Hs512", "HMAC"),
        ("rs256", "unsupported"), ("RS256 ", "unsupported"), ("ES512", "unsupported"),
    ])
    func refusedAlgorithmsSayWhy(_ alg: String, _ reason: String) async throws {
        let key = try SigningKey.generate(.rs256, keyID: "k")
        let claims = Base64URL.encode(Array(JSONValue.object(idTokenClaims(now: Self.clock.now)).serialized.utf8))
        let token = Base64URL.encode(Array(#"{"alg":"\#(alg)","kid":"k"}"#.utf8)) + "." + claims + ".AA"
        let error = try #require(await thrown { try await verifier(for: key).verify(token) } as? TokenVerificationError)
        #expect(error.code == .algorithmNotAllowed)
        #expect(error.message.contains(reason))
    }

    /// A member name written with an escape is the same name: a second `sub` or `alg` is refused.
    @Test func duplicatesWrittenWithEscapesAreRefused() async throws {
        let key = try SigningKey.generate(.es256, keyID: "k")
        let now = Int(Self.clock.now.timeIntervalSince1970)
        let payload = #"{"iss":"https://issuer.test","aud":"client-1","iat":\#(now),"exp":\#(now + 60),"sub":"a","s\u0075b":"admin"}"#
        let duplicateClaim = try CompactJWS.sign(payload: Array(payload.utf8), with: key)
        #expect(await verificationCode { try await verifier(for: key).verify(duplicateClaim) } == .malformed)

        let parts = try signedToken(idTokenClaims(now: Self.clock.now), key: key).split(separator: ".")
        let header = Base64URL.encode(Array(#"{"alg":"ES256","kid":"k","\u0061lg":"none"}"#.utf8))
        #expect(await verificationCode { try await verifier(for: key).verify(header + "." + parts[1] + "." + parts[2]) } == .malformed)
    }

    // MARK: Signatures

    /// Signatures of every wrong shape (empty, short, long, all zeros, all ones, a high first byte)
    /// fail as bad signatures, never as a crash or another error.
    @Test(arguments: [(JWSAlgorithm.es256, 32), (.es384, 48), (.rs256, 128), (.ps256, 128)])
    func forgedSignatureShapesFailCleanly(_ algorithm: JWSAlgorithm, _ half: Int) async throws {
        let key = try SigningKey.generate(algorithm, keyID: "k")
        let verifier = try verifier(for: key)
        let parts = try signedToken(idTokenClaims(now: Self.clock.now), key: key).split(separator: ".")
        let shapes: [[UInt8]] = [
            [], [0],
            Array(repeating: 0, count: 2 * half),
            Array(repeating: 0xFF, count: 2 * half),
            Array(repeating: 0, count: 2 * half - 1) + [1],
            Array(repeating: 0x80, count: half) + Array(repeating: 0, count: half),
            Array(repeating: 1, count: 2 * half - 1),
            Array(repeating: 1, count: 2 * half + 1),
            Array(repeating: 1, count: 132),
        ]
        for shape in shapes {
            let forged = String(parts[0]) + "." + parts[1] + "." + Base64URL.encode(shape)
            #expect(await verificationCode { try await verifier.verify(forged) } == .badSignature, "a \(shape.count)-byte signature")
        }
    }

    /// A pooled verify context is set up for one algorithm's padding: an RSA key without `alg`,
    /// checked as RS256 and PS256 in turn, never verifies one's signature with the other's context.
    @Test func pooledContextsNeverCrossPKCS1AndPSS() throws {
        let rs256 = try SigningKey.generate(.rs256, keyID: "k")
        let ps256 = try rs256.signing(with: .ps256)
        var members = try #require(try rs256.publicJWK().json.objectValue)
        members["alg"] = nil
        let rsToken = try CompactJWS(parsing: signedToken(["sub": .string("a")], key: rs256))
        let psToken = try CompactJWS(parsing: signedToken(["sub": .string("a")], key: ps256))
        for (good, algorithm) in [(psToken, JWSAlgorithm.ps256), (rsToken, .rs256)] {
            let key = try JWK(json: .object(members))
            for _ in 0..<10 {
                #expect(!psToken.hasValidSignature(key: key, algorithm: .rs256))
                #expect(!rsToken.hasValidSignature(key: key, algorithm: .ps256))
            }
            #expect(good.hasValidSignature(key: key, algorithm: algorithm))
        }
    }

    /// The signing input is read in place from the parsed token, also when it came as a substring.
    @Test func aSubstringTokenKeepsItsSigningInput() throws {
        let key = try SigningKey.generate(.es256, keyID: "k")
        let token = try signedToken(["sub": .string("a")], key: key)
        let jws = try CompactJWS(parsing: ("xx" + token + "yy").dropFirst(2).dropLast(2))
        #expect(jws.signingInput == Array(token.split(separator: ".")[0...1].joined(separator: ".").utf8))
        #expect(jws.hasValidSignature(key: try key.publicJWK(), algorithm: .es256))
    }
}
