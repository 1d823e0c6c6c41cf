import Foundation
import LoginKitHTTP
import LoginKitJOSE
import LoginKitTestSupport
import Testing

/// A wall clock the test moves by hand.
final class TestWallClock: Sendable {
    private let current: LockedState<Date>

    init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
        current = LockedState(start)
    }

    var now: Date { current.withLock { $0 } }

    func advance(by seconds: Double) {
        current.withLock { $0 = $0.addingTimeInterval(seconds) }
    }

    /// The closure verifiers take.
    var reader: @Sendable () -> Date { { self.now } }
}

/// Signs `claims` with `key`.
func signedToken(_ claims: [String: JSONValue], key: SigningKey, header: [String: JSONValue] = [:]) throws -> String {
    try CompactJWS.sign(payload: Array(JSONValue.object(claims).serialized.utf8), with: key, extraHeader: header)
}

/// Standard ID-token claims valid at `now`.
func idTokenClaims(now: Date, issuer: String = "https://issuer.test", audience: JSONValue = .string("client-1")) -> [String: JSONValue] {
    let seconds = Int(now.timeIntervalSince1970)
    return [
        "iss": .string(issuer), "sub": .string("user-1"), "aud": audience,
        "iat": .number("\(seconds)"), "exp": .number("\(seconds + 300)"),
    ]
}

/// A verifier for `key`'s tokens from `https://issuer.test` to `client-1`, on `clock`.
func verifier(for key: SigningKey, clock: TestWallClock, allowed: Set<JWSAlgorithm> = JWSAlgorithm.standard) throws -> IDTokenVerifier {
    var configuration = IDTokenVerifier.Configuration(issuer: "https://issuer.test", audience: "client-1")
    configuration.allowedAlgorithms = allowed
    return IDTokenVerifier(configuration: configuration, keys: StaticJWKS(JWKSet(keys: [try key.publicJWK()])), now: clock.reader)
}

/// The verification error code a call threw, or nil.
func verificationCode<T>(_ operation: () async throws -> T) async -> TokenVerificationError.Code? {
    (await thrown(operation) as? TokenVerificationError)?.code
}
