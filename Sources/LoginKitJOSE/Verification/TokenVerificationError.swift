public import LoginKitHTTP

/// A token, a key or sealed data did not pass LoginKit's checks, or the cryptography behind them
/// failed: a token that is malformed, signed with an unknown key or a bad signature, expired, or
/// issued by or for someone else; a key that cannot be used to sign or seal; sealed data that was
/// altered or opened with the wrong key; OpenSSL or its random generator failing. Do not trust
/// what was being checked; a fresh token (log in, refresh) or a correct key may help.
///
/// Match on `code`. `message` says what failed and never contains the token, a key or a claim
/// value that could be a secret (issuers and audiences are named; they are public).
public struct TokenVerificationError: LoginKitError {
    /// What failed. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case malformed, algorithmNotAllowed, unknownKey, badSignature, expired, notYetValid
            case issuedInFuture, wrongIssuer, wrongAudience, nonceMismatch, keySetUnavailable, subjectChanged
            case unsafeKey, keySetTooLarge, wrongTokenType, invalidKey, authenticationFailed, cryptoFailure
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// Not a well-formed compact JWS / JWT (bad base64url, bad JSON, missing or mistyped claims,
        /// too large), or sealed data too short to be a sealed box.
        public static let malformed = Code(.malformed)
        /// The header's `alg` is `none`, an HMAC, unknown, or not in the caller's allow-list.
        public static let algorithmNotAllowed = Code(.algorithmNotAllowed)
        /// No key in the issuer's key set matches the header's `kid` (even after one refetch).
        public static let unknownKey = Code(.unknownKey)
        /// The signature does not verify with the key.
        public static let badSignature = Code(.badSignature)
        /// `exp` has passed (beyond the leeway).
        public static let expired = Code(.expired)
        /// `nbf` is still ahead (beyond the leeway).
        public static let notYetValid = Code(.notYetValid)
        /// `iat` is in the future (beyond the leeway).
        public static let issuedInFuture = Code(.issuedInFuture)
        /// `iss` is not the expected issuer.
        public static let wrongIssuer = Code(.wrongIssuer)
        /// `aud` does not contain the expected audience, or `azp` does not match it.
        public static let wrongAudience = Code(.wrongAudience)
        /// `nonce` is missing or differs from the one sent.
        public static let nonceMismatch = Code(.nonceMismatch)
        /// The issuer's key set could not be fetched or parsed.
        public static let keySetUnavailable = Code(.keySetUnavailable)
        /// A refreshed ID token names another user (`sub`), issuer or audience than the one it
        /// replaces (OpenID Connect Core §12.2).
        public static let subjectChanged = Code(.subjectChanged)
        /// A key is refused as unsafe to verify with: an RSA exponent that is even or below 3, an RSA
        /// modulus under 2048 or over 16384 bits, an EC point not on its curve.
        public static let unsafeKey = Code(.unsafeKey)
        /// The key set holds more keys than accepted (``JWKSet/defaultMaximumKeyCount``); none is used.
        public static let keySetTooLarge = Code(.keySetTooLarge)
        /// The header's `typ` says the token is not an ID token: an access token (`at+jwt`, RFC 9068).
        public static let wrongTokenType = Code(.wrongTokenType)
        /// A key given to sign or seal with cannot be used: not a private key LoginKit reads, the
        /// wrong size, type or curve for the algorithm, or too weak (an HMAC secret under 32 bytes).
        public static let invalidKey = Code(.invalidKey)
        /// Sealed data does not open: it was altered, or the key is not the one it was sealed with.
        /// Nothing decrypted is returned.
        public static let authenticationFailed = Code(.authenticationFailed)
        /// OpenSSL failed to sign, digest or generate random bytes; the message has its reason.
        public static let cryptoFailure = Code(.cryptoFailure)

        public var description: String { base.rawValue }
    }

    /// What failed, what to do next, the error underneath (a `NetworkError` for
    /// `keySetUnavailable`) and where it was thrown.
    public let details: ErrorDetails<Code>

    /// A verification or cryptographic failure; `message` is kept to one line with control
    /// characters escaped, whatever header or claim text was interpolated into it.
    public init(
        _ code: Code, _ message: String, underlying: (any Error)? = nil,
        file: String = #fileID, line: Int = #line
    ) {
        self.details = ErrorDetails(code, message, underlying: underlying, file: file, line: line)
    }
}
