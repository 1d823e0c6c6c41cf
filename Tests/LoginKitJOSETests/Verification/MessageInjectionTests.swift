import Foundation
import LoginKitJOSE
import LoginKitTestSupport
import Testing

/// Strings a token or a key set chose (`kid`, `alg`, `iss`, `kty`) never reach an error's message or
/// description raw: no newline to forge a log line, no ESC to drive the terminal, no flood.
@Suite struct MessageInjectionTests {
    static let clock = TestWallClock()
    static let hostile = "k\n\u{1B}[31mred\r\u{7F}\u{9B}2J"

    /// No C0 control (newline, ESC…), DEL or C1 control (CSI…).
    func isOneCleanLine(_ text: String) -> Bool {
        !text.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }
    }

    func verificationError<T>(_ operation: () async throws -> T) async throws -> TokenVerificationError {
        let error = await thrown(operation)
        return try #require(error as? TokenVerificationError)
    }

    func verifier(_ key: SigningKey) throws -> IDTokenVerifier {
        IDTokenVerifier(
            configuration: .init(issuer: "https://issuer.test", audience: "client-1"),
            keys: StaticJWKS(JWKSet(keys: [try key.publicJWK()])), now: Self.clock.reader
        )
    }

    @Test func aHostileKidIsEscaped() async throws {
        let published = try SigningKey.generate(.es256, keyID: "published")
        let hostile = try SigningKey.generate(.es256, keyID: Self.hostile)
        let token = try signedToken(idTokenClaims(now: Self.clock.now), key: hostile)
        let error = try await verificationError { try await verifier(published).verify(token) }
        #expect(error.code == .unknownKey)
        #expect(isOneCleanLine(error.description))
        #expect(isOneCleanLine(error.message))
        #expect(!error.description.unicodeScalars.contains("\u{1B}"))
        #expect(!error.description.unicodeScalars.contains("\n"))
        #expect(error.message.contains(#"k\u{A}\u{1B}[31mred"#))  // escaped, still readable
    }

    @Test func aHostileIssuerIsEscaped() async throws {
        let key = try SigningKey.generate(.es256, keyID: "k")
        let token = try signedToken(idTokenClaims(now: Self.clock.now, issuer: "https://evil\n\u{1B}]0;pwned\u{7}"), key: key)
        let error = try await verificationError { try await verifier(key).verify(token) }
        #expect(error.code == .wrongIssuer)
        #expect(isOneCleanLine(error.description))
    }

    @Test func aHostileAlgorithmNameIsEscaped() async throws {
        let key = try SigningKey.generate(.es256, keyID: "k")
        let payload = Base64URL.encode(Array(JSONValue.object(idTokenClaims(now: Self.clock.now)).serialized.utf8))
        for alg in ["HS256\n\u{1B}[2J", "XX\r\n\u{1B}[2Jforged line"] {
            let header = Base64URL.encode(Array(JSONValue.object(["alg": .string(alg), "kid": .string("k")]).serialized.utf8))
            let error = try await verificationError { try await verifier(key).verify(header + "." + payload + ".AA") }
            #expect(error.code == .algorithmNotAllowed)
            #expect(isOneCleanLine(error.description), "\(alg.debugDescription)")
        }
    }

    @Test func aHostileKeyTypeOrCurveIsEscaped() async throws {
        for text in [#"{"kty":"\u001b[31m\nX"}"#, #"{"kty":"EC","crv":"P-\u001b[2J\n","x":"AQ","y":"AQ"}"#, #"{"kty":"OKP","crv":"\u009b2J","x":"AQ"}"#] {
            let error = try await verificationError { try JWK(jsonText: Array(text.utf8)) }
            #expect(error.code == .malformed)
            #expect(isOneCleanLine(error.description), "\(text)")
        }
    }

    @Test func aLongKidIsCut() async throws {
        let published = try SigningKey.generate(.es256, keyID: "published")
        let long = try SigningKey.generate(.es256, keyID: String(repeating: "a", count: 10_000))
        let token = try signedToken(idTokenClaims(now: Self.clock.now), key: long)
        let error = try await verificationError { try await verifier(published).verify(token) }
        #expect(error.code == .unknownKey)
        #expect(error.description.count < 300)
        #expect(error.message.contains("..."))
    }

    @Test func everyMessageIsOneLineWhateverWasInterpolated() {
        let error = TokenVerificationError(.malformed, "line one\nline two \u{1B}[0m\u{202E}")
        #expect(error.message == #"line one\u{A}line two \u{1B}[0m\u{202E}"#)
        #expect(TokenVerificationError(.malformed, "plain — unchanged").message == "plain — unchanged")
    }
}
