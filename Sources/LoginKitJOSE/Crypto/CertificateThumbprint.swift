internal import COpenSSL

/// The thumbprint a certificate-bound access token names (RFC 8705 §3.1): the `x5t#S256` member
/// of its `cnf` claim.
package enum CertificateThumbprint {
    /// base64url (no padding) of the SHA-256 of the DER encoding of the first certificate in the
    /// PEM file at `path` (a chain's first certificate is the client's own; other PEM blocks before
    /// it, such as a private key, are skipped).
    ///
    /// - Throws: `TokenVerificationError` `.invalidKey` when the file cannot be opened or holds no
    ///   PEM certificate (the message names the file, never its contents), `.cryptoFailure` when
    ///   OpenSSL fails to encode or digest it.
    package static func sha256(pemCertificateFile path: String) throws(TokenVerificationError) -> String {
        ERR_clear_error()
        guard let file = BIO_new_file(path, "r") else {
            let reason = openSSLErrorDescription()
            throw TokenVerificationError(.invalidKey, "could not open the certificate file \(path): \(reason)")
        }
        defer { _ = BIO_free(file) }
        return try sha256(firstCertificateIn: file, named: "\(path) holds")
    }

    /// The thumbprint of the first certificate in `pem` (PEM text in memory, read in place: it may
    /// hold a key too, which is neither copied nor kept).
    ///
    /// - Throws: `TokenVerificationError` `.invalidKey` when `pem` holds no certificate.
    package static func sha256(pem: UnsafeRawBufferPointer) throws(TokenVerificationError) -> String {
        ERR_clear_error()
        guard let base = pem.baseAddress, pem.count > 0, pem.count < Int(Int32.max), let memory = BIO_new_mem_buf(base, Int32(pem.count)) else {
            throw TokenVerificationError(.invalidKey, "the bytes hold no PEM certificate (-----BEGIN CERTIFICATE-----)")
        }
        defer { _ = BIO_free(memory) }
        return try sha256(firstCertificateIn: memory, named: "the bytes hold")
    }

    /// The thumbprint of the first PEM certificate `bio` reads; `holder` begins the message of the
    /// error when there is none ("<path> holds", "the bytes hold").
    ///
    /// - Throws: `TokenVerificationError` `.invalidKey` (no certificate), `.cryptoFailure` (OpenSSL
    ///   cannot encode or hash it).
    private static func sha256(firstCertificateIn bio: OpaquePointer, named holder: String) throws(TokenVerificationError) -> String {
        guard let certificate = PEM_read_bio_X509(bio, nil, nil, nil) else {
            ERR_clear_error()
            throw TokenVerificationError(.invalidKey, "\(holder) no PEM certificate (-----BEGIN CERTIFICATE-----)")
        }
        defer { X509_free(certificate) }
        let length = i2d_X509(certificate, nil)
        guard length > 0 else { throw EVPKey.failure("i2d_X509") }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return i2d_X509(certificate, &cursor)
        }
        guard written == length else { throw EVPKey.failure("i2d_X509") }
        return Base64URL.encode(try MessageDigest.sha256(der))
    }
}
