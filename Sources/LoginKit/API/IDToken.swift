public import LoginKitJOSE

/// An OpenID Connect ID token: the compact JWT as issued.
///
/// `description` (and so `String(reflecting:)`, `debugPrint` and `dump`) never shows the token,
/// only that there is one.
/// Claims are decoded on demand and are not verified by decoding; the kit verifies ID tokens
/// (`IDTokenVerifier`, from LoginKitJOSE) before storing them.
public struct IDToken: Sendable, Hashable, Codable, CustomStringConvertible, CustomReflectable {
    /// The compact JWT.
    public let rawValue: String

    /// Wraps a compact JWT as it was received; nothing is decoded or verified.
    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// The token's claims, decoded without verification.
    ///
    /// - Throws: `TokenVerificationError` `.malformed` when it is not a JWT.
    public func unverifiedClaims() throws(TokenVerificationError) -> JWTClaims {
        try JWTClaims(payload: CompactJWS(parsing: rawValue).payload)
    }

    /// Decodes the token from a JSON string, as the store writes it; nothing is verified.
    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { "IDToken(redacted, \(rawValue.utf8.count) bytes)" }
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}
