internal import COpenSSL

/// Message digests through OpenSSL, for the package's own use (tests that build signature encodings
/// by hand; PKCE's S256).
package enum MessageDigest {
    /// SHA-256 of `bytes` (32 bytes).
    ///
    /// - Throws: `CryptoError` `.operationFailed` when OpenSSL fails.
    package static func sha256(_ bytes: [UInt8]) throws(CryptoError) -> [UInt8] {
        var hash = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard EVP_Digest(bytes, bytes.count, &hash, &length, FetchedDigest.sha256.raw, nil) == 1 else {
            throw EVPKey.failure("EVP_Digest")
        }
        return Array(hash.prefix(Int(length)))
    }
}
