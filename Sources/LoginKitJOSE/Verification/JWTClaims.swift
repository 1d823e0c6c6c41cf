/// The claims of a JWT (RFC 7519), strictly typed where the registered claims are concerned:
/// `iss`/`sub`/`nonce`/`azp` must be strings, `aud` a string or an array of strings, `exp`/`nbf`/
/// `iat` numbers (NumericDate, seconds since 1970).
public struct JWTClaims: Sendable {
    /// Every claim, as parsed.
    public let all: [String: JSONValue]
    /// `iss`.
    public let issuer: String?
    /// `sub`.
    public let subject: String?
    /// `aud`, as a list (a single string becomes one element).
    public let audience: [String]
    /// `exp`, in seconds since 1970.
    public let expiresAt: Double?
    /// `nbf`, in seconds since 1970.
    public let notBefore: Double?
    /// `iat`, in seconds since 1970.
    public let issuedAt: Double?
    /// `nonce`.
    public let nonce: String?
    /// `azp`.
    public let authorizedParty: String?

    /// Parses a JWT payload.
    ///
    /// - Throws: `TokenVerificationError` `.malformed` for invalid JSON, a non-object, or a
    ///   registered claim of the wrong type.
    package init(payload: some Collection<UInt8>) throws(TokenVerificationError) {
        let value: JSONValue
        do {
            value = try JSONValue.parse(payload)
        } catch {
            throw TokenVerificationError(.malformed, "the claims are not valid JSON: \(error)", underlying: error)
        }
        guard let claims = value.objectValue else { throw TokenVerificationError(.malformed, "the claims are not a JSON object") }
        func string(_ name: String) throws(TokenVerificationError) -> String? {
            guard let claim = claims[name] else { return nil }
            guard let text = claim.stringValue else { throw TokenVerificationError(.malformed, "the \"\(name)\" claim is not a string") }
            return text
        }
        func date(_ name: String) throws(TokenVerificationError) -> Double? {
            guard let claim = claims[name] else { return nil }
            guard let seconds = claim.doubleValue, seconds.isFinite else {
                throw TokenVerificationError(.malformed, "the \"\(name)\" claim is not a number")
            }
            return seconds
        }
        self.all = claims
        self.issuer = try string("iss")
        self.subject = try string("sub")
        self.nonce = try string("nonce")
        self.authorizedParty = try string("azp")
        self.expiresAt = try date("exp")
        self.notBefore = try date("nbf")
        self.issuedAt = try date("iat")
        switch claims["aud"] {
        case nil: self.audience = []
        case .string(let single)?: self.audience = [single]
        case .array(let values)?:
            var audience: [String] = []
            for value in values {
                guard let text = value.stringValue else {
                    throw TokenVerificationError(.malformed, "the \"aud\" claim holds a non-string")
                }
                audience.append(text)
            }
            self.audience = audience
        default:
            throw TokenVerificationError(.malformed, "the \"aud\" claim is neither a string nor an array of strings")
        }
    }

    /// The claim named `name`.
    public subscript(name: String) -> JSONValue? { all[name] }
}

/// A JWT whose signature and claims have been verified.
public struct VerifiedJWT: Sendable {
    /// The token's parts.
    package let jws: CompactJWS
    /// The verified claims.
    public let claims: JWTClaims
    /// The algorithm it was verified with.
    public let algorithm: JWSAlgorithm
}
