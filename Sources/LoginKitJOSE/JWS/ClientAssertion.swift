internal import LoginKitHTTP

/// What signs the JWTs a confidential client authenticates with (RFC 7523 §2.2, OpenID Connect
/// Core §9): a private key (`private_key_jwt`) or the client secret itself (`client_secret_jwt`,
/// HS256).
///
/// `description` names the method and algorithm only, never the key or the secret.
package struct ClientAssertionSigner: Sendable, CustomStringConvertible, CustomReflectable {
    enum Kind: Sendable {
        case key(SigningKey)
        case secret([UInt8])
    }

    let kind: Kind

    /// `private_key_jwt` with `key` (its algorithm and `kid`).
    package static func privateKey(_ key: SigningKey) -> ClientAssertionSigner {
        ClientAssertionSigner(kind: .key(key))
    }

    /// `client_secret_jwt`: HS256 under the client secret.
    ///
    /// - Throws: `TokenVerificationError` `.invalidKey` for a secret under 32 bytes, which RFC 7518 §3.2
    ///   forbids for HS256 (use `client_secret_basic` with such a secret).
    package static func clientSecret(_ secret: String) throws(TokenVerificationError) -> ClientAssertionSigner {
        let bytes = Array(secret.utf8)
        guard bytes.count >= 32 else {
            throw TokenVerificationError(
                .invalidKey, "client_secret_jwt (HS256) needs a client secret of at least 32 bytes (RFC 7518 §3.2); this one has \(bytes.count)")
        }
        return ClientAssertionSigner(kind: .secret(bytes))
    }

    /// The token endpoint's name for the method: `private_key_jwt` or `client_secret_jwt`.
    package var method: String {
        switch kind {
        case .key: "private_key_jwt"
        case .secret: "client_secret_jwt"
        }
    }

    /// The JWS `alg` the assertions carry.
    package var algorithmName: String {
        switch kind {
        case .key(let key): key.algorithm.rawValue
        case .secret: "HS256"
        }
    }

    package var description: String { "ClientAssertionSigner(\(method), \(algorithmName))" }

    /// No children: `dump` and debuggers show the description, never the secret's bytes.
    package var customMirror: Mirror { Mirror(self, children: [:]) }

    /// `claims` as a signed compact JWT with `typ: JWT`, `alg` and (for a key that has one) `kid`.
    ///
    /// - Throws: `TokenVerificationError` when signing fails.
    package func sign(claims: [String: JSONValue]) throws(TokenVerificationError) -> String {
        let payload = Array(JSONValue.object(claims).serialized.utf8)
        switch kind {
        case .key(let key):
            return try CompactJWS.sign(payload: payload, with: key, extraHeader: ["typ": .string("JWT")])
        case .secret(let secret):
            let header: JSONValue = .object(["alg": .string("HS256"), "typ": .string("JWT")])
            let signingInput = Base64URL.encode(Array(header.serialized.utf8)) + "." + Base64URL.encode(payload)
            return signingInput + "." + Base64URL.encode(try HMACSHA256.authenticationCode(Array(signingInput.utf8), key: secret))
        }
    }
}
