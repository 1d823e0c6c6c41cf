/// The claims of a JWT (RFC 7519), strictly typed where the registered claims are concerned:
/// `iss`/`sub`/`nonce`/`azp` must be strings, `aud` a string or an array of strings, `exp`/`nbf`/
/// `iat` numbers (NumericDate, seconds since 1970).
public struct JWTClaims: Sendable {
    /// Every claim, as parsed.
    package let all: [String: JSONValue]
    /// `iss`.
    public let issuer: String?
    /// `sub`.
    public let subject: String?
    /// `aud`, as a list (a single string becomes one element).
    public let audience: [String]
    /// `exp`, in seconds since 1970.
    public let expiresAt: Double?
    /// `nbf`, in seconds since 1970.
    package let notBefore: Double?
    /// `iat`, in seconds since 1970.
    package let issuedAt: Double?
    /// `nonce`.
    package let nonce: String?
    /// `azp`.
    package let authorizedParty: String?

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
        // The registered claims, in one pass over the members (no hashing per name).
        var registered = RegisteredClaims()
        for (name, claim) in claims where name.utf8.count <= 5 {
            switch name {
            case "iss": registered.iss = claim
            case "sub": registered.sub = claim
            case "aud": registered.aud = claim
            case "exp": registered.exp = claim
            case "nbf": registered.nbf = claim
            case "iat": registered.iat = claim
            case "azp": registered.azp = claim
            case "nonce": registered.nonce = claim
            default: break
            }
        }
        // Checked in a fixed order, so that the first wrong claim named does not depend on the
        // dictionary's order.
        func string(_ claim: JSONValue?, _ name: String) throws(TokenVerificationError) -> String? {
            guard let claim else { return nil }
            guard let text = claim.stringValue else { throw TokenVerificationError(.malformed, "the \"\(name)\" claim is not a string") }
            return text
        }
        func date(_ claim: JSONValue?, _ name: String) throws(TokenVerificationError) -> Double? {
            guard let claim else { return nil }
            guard let seconds = claim.doubleValue, seconds.isFinite else {
                throw TokenVerificationError(.malformed, "the \"\(name)\" claim is not a number")
            }
            return seconds
        }
        self.all = claims
        self.issuer = try string(registered.iss, "iss")
        self.subject = try string(registered.sub, "sub")
        self.nonce = try string(registered.nonce, "nonce")
        self.authorizedParty = try string(registered.azp, "azp")
        self.expiresAt = try date(registered.exp, "exp")
        self.notBefore = try date(registered.nbf, "nbf")
        self.issuedAt = try date(registered.iat, "iat")
        switch registered.aud {
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

    /// The registered claims' values as found, before their types are checked.
    private struct RegisteredClaims {
        var iss, sub, aud, exp, nbf, iat, azp, nonce: JSONValue?
    }
}

/// A JWT whose signature and claims have been verified.
public struct VerifiedJWT: Sendable {
    /// The token's parts.
    package let jws: CompactJWS
    /// The verified claims.
    public let claims: JWTClaims
    /// The algorithm it was verified with.
    package let algorithm: JWSAlgorithm
}
