internal import COpenSSL

/// Message digests through OpenSSL, for the package's own use (tests that build signature encodings
/// by hand; PKCE's S256).
package enum MessageDigest {
    /// SHA-256 of `bytes` (32 bytes).
    ///
    /// - Throws: `TokenVerificationError` `.cryptoFailure` when OpenSSL fails.
    package static func sha256(_ bytes: [UInt8]) throws(TokenVerificationError) -> [UInt8] {
        var hash = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard EVP_Digest(bytes, bytes.count, &hash, &length, FetchedDigest.sha256.raw, nil) == 1 else {
            throw EVPKey.failure("EVP_Digest")
        }
        return Array(hash.prefix(Int(length)))
    }
}

/// HMAC through OpenSSL: `client_secret_jwt` (HS256, RFC 7518 §3.2) signs with it, and the dev
/// identity provider checks such assertions with it.
package enum HMACSHA256 {
    /// HMAC-SHA-256 of `bytes` under `key` (32 bytes).
    ///
    /// - Throws: `TokenVerificationError` `.cryptoFailure` when OpenSSL fails.
    package static func authenticationCode(_ bytes: [UInt8], key: [UInt8]) throws(TokenVerificationError) -> [UInt8] {
        var code = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard key.count < Int(Int32.max), HMAC(FetchedDigest.sha256.raw, key, Int32(key.count), bytes, bytes.count, &code, &length) != nil else {
            throw EVPKey.failure("HMAC")
        }
        return Array(code.prefix(Int(length)))
    }

    /// Whether `a` and `b` are equal, in time that depends on their length only.
    package static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.count == b.count && CRYPTO_memcmp(a, b, a.count) == 0
    }
}
