internal import COpenSSL

/// A private key that signs JWS (RS256 … PS384, ES256/ES384, EdDSA): for the dev identity provider
/// and for tests. Generated with OpenSSL's `EVP_PKEY_generate`.
///
/// `description` names the algorithm and key ID only; the private key is never printed.
package struct SigningKey: Sendable, CustomStringConvertible {
    /// The algorithm this key signs with.
    package let algorithm: JWSAlgorithm
    /// The `kid` put in the headers it signs and in its package JWK.
    package let keyID: String
    let key: EVPKey

    /// Generates a fresh key: RSA 2048 bits for RS*/PS*, P-256/P-384 for ES256/ES384, Ed25519 for EdDSA.
    ///
    /// - Throws: `CryptoError` when OpenSSL fails.
    package static func generate(_ algorithm: JWSAlgorithm, keyID: String, rsaBits: Int = 2048) throws(CryptoError) -> SigningKey {
        let name: String
        switch algorithm.keyType {
        case .rsa: name = "RSA"
        case .ec: name = "EC"
        case .okp: name = "ED25519"
        }
        guard let context = EVP_PKEY_CTX_new_from_name(nil, name, nil) else { throw EVPKey.failure("creating a key context") }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_keygen_init(context) == 1 else { throw EVPKey.failure("EVP_PKEY_keygen_init") }
        switch algorithm.keyType {
        case .rsa:
            guard rsaBits >= 2048, EVP_PKEY_CTX_set_rsa_keygen_bits(context, Int32(rsaBits)) == 1 else {
                throw CryptoError(.invalidKey, "RSA keys must have at least 2048 bits")
            }
        case .ec:
            let group = algorithm == .es256 ? "P-256" : "P-384"
            guard EVP_PKEY_CTX_set_group_name(context, group) == 1 else { throw EVPKey.failure("setting the EC curve") }
        case .okp:
            break
        }
        var key: OpaquePointer?
        guard EVP_PKEY_generate(context, &key) == 1, let key else { throw EVPKey.failure("EVP_PKEY_generate") }
        return SigningKey(algorithm: algorithm, keyID: keyID, key: EVPKey(taking: key))
    }

    /// The package half as a JWK (with `kid`, `alg` and `use: sig`), for a JWKS document.
    package func publicJWK() throws(TokenVerificationError) -> JWK {
        try JWK(publicKey: key, keyType: algorithm.keyType, keyID: keyID, algorithm: algorithm)
    }

    /// The same private key signing with `algorithm`, which must fit it (RS256 ↔ PS256, …): for tests
    /// of algorithm confusion between tokens made with one key.
    ///
    /// - Throws: `CryptoError` `.invalidKey` when `algorithm` needs another key type or curve.
    package func signing(with algorithm: JWSAlgorithm, keyID: String? = nil) throws(CryptoError) -> SigningKey {
        guard algorithm.keyType == self.algorithm.keyType, algorithm.ecCurve?.name == self.algorithm.ecCurve?.name else {
            throw CryptoError(.invalidKey, "a \(self.algorithm) key cannot sign \(algorithm)")
        }
        return SigningKey(algorithm: algorithm, keyID: keyID ?? self.keyID, key: key)
    }

    /// Signs `input` and returns the JWS signature bytes (raw `r || s` for ECDSA).
    package func sign(_ input: [UInt8]) throws(CryptoError) -> [UInt8] {
        try key.sign(input, algorithm: algorithm)
    }

    package var description: String { "SigningKey(\(algorithm), kid: \(keyID))" }
}
