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
        guard let certificate = PEM_read_bio_X509(file, nil, nil, nil) else {
            ERR_clear_error()
            throw TokenVerificationError(.invalidKey, "\(path) holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
        }
        defer { X509_free(certificate) }
        return try thumbprint(of: certificate)
    }

    /// The thumbprint of the first certificate in `pem` (PEM text in memory, read in place: it may
    /// hold a key too, which is neither copied nor kept).
    ///
    /// - Throws: `TokenVerificationError` `.invalidKey` when `pem` holds no certificate.
    package static func sha256(pem: UnsafeRawBufferPointer) throws(TokenVerificationError) -> String {
        ERR_clear_error()
        guard let base = pem.baseAddress, pem.count > 0, pem.count < Int(Int32.max), let memory = BIO_new_mem_buf(base, Int32(pem.count)) else {
            throw TokenVerificationError(.invalidKey, "no PEM certificate (-----BEGIN CERTIFICATE-----)")
        }
        defer { _ = BIO_free(memory) }
        guard let certificate = PEM_read_bio_X509(memory, nil, nil, nil) else {
            ERR_clear_error()
            throw TokenVerificationError(.invalidKey, "no PEM certificate (-----BEGIN CERTIFICATE-----)")
        }
        defer { X509_free(certificate) }
        return try thumbprint(of: certificate)
    }

    /// base64url(SHA-256(DER of `certificate`)).
    private static func thumbprint(of certificate: OpaquePointer) throws(TokenVerificationError) -> String {
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
