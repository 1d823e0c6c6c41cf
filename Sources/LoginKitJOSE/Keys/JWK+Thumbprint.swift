extension JWK {
    /// The members RFC 7638 §3.2 requires for this key's type, and no others: `e`, `kty`, `n` (RSA);
    /// `crv`, `kty`, `x`, `y` (EC); `crv`, `kty`, `x` (OKP). What a DPoP proof's `jwk` carries.
    package var requiredMembers: JSONValue {
        let names: [String] =
            switch keyType {
            case .rsa: ["e", "kty", "n"]
            case .ec: ["crv", "kty", "x", "y"]
            case .okp: ["crv", "kty", "x"]
            }
        var members: [String: JSONValue] = [:]
        for name in names {
            if let value = json[name] { members[name] = value }
        }
        return .object(members)
    }

    /// The RFC 7638 SHA-256 thumbprint: base64url without padding of the SHA-256 of
    /// ``requiredMembers`` serialised with its members in lexicographic order and no whitespace
    /// (the value of a token's `cnf.jkt`, RFC 9449 §6.1).
    ///
    /// - Throws: `TokenVerificationError` `.cryptoFailure` when OpenSSL cannot hash.
    package func thumbprint() throws(TokenVerificationError) -> String {  // typed: .cryptoFailure, OpenSSL refusing to hash
        // MessageDigest's one failure, OpenSSL refusing to hash, is typed; nothing a key holds can cause it.
        Base64URL.encode(try MessageDigest.sha256(Array(requiredMembers.serialized.utf8)))
    }
}
