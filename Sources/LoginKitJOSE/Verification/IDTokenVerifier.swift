#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif
internal import LoginKitHTTP

/// Where a verifier gets its keys.
public protocol JWKSProvider: Sendable {
    /// The keys that may verify a token signed with `algorithm` whose header names `keyID`.
    /// A provider that fetches may refetch once when none match (a key rotation).
    ///
    /// - Throws: `TokenVerificationError` `.keySetUnavailable` when no key set can be had.
    func candidates(keyID: String?, algorithm: JWSAlgorithm) async throws(TokenVerificationError) -> [JWK]
}

/// A fixed key set, for servers configured with their issuer's keys and for tests.
public struct StaticJWKS: JWKSProvider {
    /// The keys.
    package let keySet: JWKSet

    /// A provider that always answers from `keySet` and never fetches.
    public init(_ keySet: JWKSet) {
        self.keySet = keySet
    }

    public func candidates(keyID: String?, algorithm: JWSAlgorithm) async throws(TokenVerificationError) -> [JWK] {
        keySet.candidates(keyID: keyID, algorithm: algorithm)
    }
}

/// Verifies ID tokens (and other JWTs): shape, algorithm, key, signature, then claims.
///
/// Order matters: claims are only looked at once the signature holds. Checks, with `leeway` applied
/// to every time comparison:
/// - the header's `typ` is not an access token's (`at+jwt` or `application/at+jwt`, any case;
///   RFC 9068 §2.1, RFC 8725 §3.11): an access token is never taken for an ID token;
/// - `alg` in `allowedAlgorithms` (never `none`, never an HMAC);
/// - a key whose `kid` matches the header's (when the header has no `kid`, the key set must offer
///   exactly one suitable key), whose type fits `alg`, and whose own `alg`/`use` allow it;
/// - `iss` == `issuer`; `aud` contains `audience`, and when `aud` has several values `azp` must be
///   present and equal `audience` (OIDC Core §3.1.3.7); `exp` present and `now < exp + leeway`;
///   `nbf` (if present) `now >= nbf - leeway`; `iat` (required unless `requiresIssuedAt` is off)
///   `iat <= now + leeway`; `nonce` equal to the one sent, when one was sent.
///
/// Concurrency contract: a value type; `verify` may run concurrently from any number of tasks.
public struct IDTokenVerifier: Sendable {
    /// What tokens must look like.
    public struct Configuration: Sendable {
        /// The expected `iss`, exactly.
        public var issuer: String
        /// The expected audience: the client ID for ID tokens.
        public var audience: String
        /// Algorithms accepted. Default: every supported asymmetric algorithm.
        public var allowedAlgorithms: Set<JWSAlgorithm> = JWSAlgorithm.standard
        /// Allowed clock skew for `exp`, `nbf` and `iat`. Default 60 s.
        public var leeway: Duration = .seconds(60)
        /// Whether `aud` is checked. Default `true`; off only for inspecting tokens (`loginkit verify`
        /// without `--audience`).
        package var checksAudience = true
        /// Whether `iat` must be present (OIDC requires it for ID tokens). Default `true`.
        package var requiresIssuedAt: Bool = true
        /// The longest token accepted. Default 64 KiB.
        package var maximumTokenLength: Int = CompactJWS.defaultMaximumLength

        /// Rules for ID tokens from `issuer` for `audience` (the client ID): every standard
        /// asymmetric algorithm, 60 s leeway, `aud` and `iat` required, until changed.
        public init(issuer: String, audience: String) {
            self.issuer = issuer
            self.audience = audience
        }
    }

    /// The rules.
    package let configuration: Configuration
    private let keys: any JWKSProvider
    private let now: @Sendable () -> Date

    /// A verifier with keys from `keys`, on the system clock.
    public init(configuration: Configuration, keys: any JWKSProvider) {
        self.init(configuration: configuration, keys: keys, now: { Date() })
    }

    /// A verifier with keys from `keys` and the time from `now` (a fixed clock in tests).
    package init(configuration: Configuration, keys: any JWKSProvider, now: @escaping @Sendable () -> Date) {
        self.configuration = configuration
        self.keys = keys
        self.now = now
    }

    /// Verifies `token` and returns its claims.
    ///
    /// - Parameter nonce: the nonce sent in the authentication request, if any.
    /// - Throws: `TokenVerificationError` with the code of the first check that failed.
    public func verify(_ token: some StringProtocol, nonce: String? = nil) async throws(TokenVerificationError) -> VerifiedJWT {
        let jws = try CompactJWS(parsing: token, maximumLength: configuration.maximumTokenLength)
        if let tokenType = jws.tokenType, Self.accessTokenTypes.contains(tokenType.lowercased()) {
            throw TokenVerificationError(
                .wrongTokenType, "the token is an access token (typ \"\(printableExcerpt(tokenType))\"), not an ID token"
            )
        }
        let algorithm = try allowedAlgorithm(jws.algorithmName)
        let candidates = try await keys.candidates(keyID: jws.keyID, algorithm: algorithm)
        guard !candidates.isEmpty else {
            throw TokenVerificationError(
                .unknownKey,
                jws.keyID.map { "the issuer's key set has no \(algorithm) key with kid \"\(printableExcerpt($0))\"" }
                    ?? "the issuer's key set has no \(algorithm) key"
            )
        }
        if jws.keyID == nil && candidates.count > 1 {
            throw TokenVerificationError(.unknownKey, "the token names no kid and the key set has \(candidates.count) possible keys")
        }
        guard candidates.contains(where: { jws.hasValidSignature(key: $0, algorithm: algorithm) }) else {
            throw TokenVerificationError(.badSignature, "the \(algorithm) signature does not verify with the issuer's key")
        }
        let claims = try JWTClaims(payload: jws.payload)
        try check(claims, nonce: nonce)
        return VerifiedJWT(jws: jws, claims: claims, algorithm: algorithm)
    }

    /// `seconds` as a whole number for a message, clamped: `Int(_:)` traps beyond `Int`'s range, and
    /// a signed token may well say `"exp": -1e300`.
    private static func wholeSeconds(_ seconds: Double) -> Int {
        guard seconds.isFinite else { return 0 }
        return Int(min(max(seconds, -1e15), 1e15))
    }

    /// The `typ` values of JWT access tokens (RFC 9068 §2.1), lowercased.
    private static let accessTokenTypes = ["at+jwt", "application/at+jwt"]

    private func allowedAlgorithm(_ name: String) throws(TokenVerificationError) -> JWSAlgorithm {
        guard let algorithm = JWSAlgorithm(rawValue: name) else {
            // No supported algorithm is `none` or an HMAC: these only name why the token is refused.
            if name.lowercased() == "none" {
                throw TokenVerificationError(.algorithmNotAllowed, "unsigned tokens (alg \"none\") are never accepted")
            }
            if name.uppercased().hasPrefix("HS") {
                throw TokenVerificationError(
                    .algorithmNotAllowed, "HMAC (\(printableExcerpt(name))) is refused: the issuer's keys are public keys"
                )
            }
            throw TokenVerificationError(.algorithmNotAllowed, "unsupported algorithm \"\(printableExcerpt(name))\"")
        }
        guard configuration.allowedAlgorithms.contains(algorithm) else {
            throw TokenVerificationError(.algorithmNotAllowed, "\(algorithm) is not in the allowed algorithms")
        }
        return algorithm
    }

    /// Checks the claims of a token whose signature already verified.
    package func check(_ claims: JWTClaims, nonce: String? = nil) throws(TokenVerificationError) {
        guard let issuer = claims.issuer else { throw TokenVerificationError(.wrongIssuer, "the token has no \"iss\" claim") }
        guard issuer == configuration.issuer else {
            let found = printableExcerpt(issuer, limit: 200)
            let expected = printableExcerpt(configuration.issuer, limit: 200)
            throw TokenVerificationError(.wrongIssuer, "the token was issued by \"\(found)\", expected \"\(expected)\"")
        }
        guard !configuration.checksAudience || claims.audience.contains(configuration.audience) else {
            let audience = printableExcerpt(configuration.audience, limit: 200)
            throw TokenVerificationError(.wrongAudience, "the token is not meant for \"\(audience)\"")
        }
        if configuration.checksAudience, claims.audience.count > 1 || claims.authorizedParty != nil {
            guard claims.authorizedParty == configuration.audience else {
                let audience = printableExcerpt(configuration.audience, limit: 200)
                throw TokenVerificationError(.wrongAudience, "the token has several audiences and its \"azp\" is not \"\(audience)\"")
            }
        }
        let current = now().timeIntervalSince1970
        let leeway = configuration.leeway.seconds
        guard let expiresAt = claims.expiresAt else { throw TokenVerificationError(.malformed, "the token has no \"exp\" claim") }
        guard current < expiresAt + leeway else {
            throw TokenVerificationError(.expired, "the token expired \(Self.wholeSeconds(current - expiresAt)) s ago")
        }
        if let notBefore = claims.notBefore, current < notBefore - leeway {
            throw TokenVerificationError(.notYetValid, "the token is not valid for another \(Self.wholeSeconds(notBefore - current)) s")
        }
        if let issuedAt = claims.issuedAt {
            guard issuedAt <= current + leeway else {
                throw TokenVerificationError(.issuedInFuture, "the token was issued \(Self.wholeSeconds(issuedAt - current)) s in the future; check the clock")
            }
        } else if configuration.requiresIssuedAt {
            throw TokenVerificationError(.malformed, "the token has no \"iat\" claim")
        }
        if let nonce {
            guard claims.nonce == nonce else {
                throw TokenVerificationError(.nonceMismatch, "the token's nonce does not match the one sent")
            }
        }
    }
}
