import LoginKitHTTP

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

extension CurlHTTPClient.TLS {
    /// The largest client certificate file read for the check: 1 MiB (a chain is a few KiB).
    static let maximumCertificateFileSize = 1024 * 1024

    /// Checks the client certificate settings before any connection uses them: both files or
    /// neither; the key a private file (`CredentialFile.checkPrivate`); the certificate file holding
    /// a PEM certificate. libcurl loads both files itself whenever it opens a connection; what it
    /// finds wrong then (a certificate it cannot parse, an encrypted key, a key that does not match)
    /// fails that request with `NetworkError.Code.tls` and libcurl's `CURLE_SSL_CERTPROBLEM`.
    ///
    /// - Throws: `NetworkError` `.invalidRequest`, naming the file and the problem, never what the
    ///   file holds.
    func checkClientCertificate() throws(NetworkError) {
        switch (clientCertificate, clientKey) {
        case (nil, nil):
            return
        case (let certificate?, nil):
            throw NetworkError(
                .invalidRequest,
                "the TLS client certificate \(certificate) has no key: set TLS.clientKey to the path of its private key, or set neither"
            )
        case (nil, let key?):
            throw NetworkError(
                .invalidRequest,
                "the TLS client key \(key) has no certificate: set TLS.clientCertificate to the path of its certificate, or set neither"
            )
        case (let certificate?, let key?):
            try CredentialFile.checkPrivate(key, what: "the TLS client key")
            let text = try CredentialFile.readPublic(
                certificate, what: "the TLS client certificate", limit: Self.maximumCertificateFileSize)
            guard text.contains("-----BEGIN CERTIFICATE-----") else {
                throw NetworkError(
                    .invalidRequest,
                    "the TLS client certificate \(certificate) holds no PEM certificate (-----BEGIN CERTIFICATE-----); TLS.clientCertificate takes a PEM file"
                )
            }
        }
    }
}

/// The checks on the files of a TLS client certificate. `checkPrivate` keeps the rule LoginKit's
/// store applies to its own files and to private keys (`StoreFileSystem.readFile` in LoginKit,
/// which this module cannot import): a regular file, reached without following a symbolic link,
/// owned by the user, with no permission for group or others.
enum CredentialFile {
    /// Refuses `path` unless it is a regular file of the user's own that group and others cannot
    /// access (mode `0600` or stricter), reached without following a symbolic link. Only the
    /// file's metadata is read, never its bytes.
    ///
    /// - Throws: `NetworkError` `.invalidRequest`.
    static func checkPrivate(_ path: String, what: String) throws(NetworkError) {
        // O_NONBLOCK: opening a FIFO put in the key's place returns at once instead of waiting
        // for a writer; fstat then refuses it.
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard descriptor >= 0 else {
            let code = errno
            if code == ELOOP {
                throw NetworkError(
                    .invalidRequest,
                    "\(what) \(path) is a symbolic link; LoginKit reads private keys only from regular files, so name the file itself"
                )
            }
            throw openFailure(path, what: what, code)
        }
        defer { _ = close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            throw NetworkError(.invalidRequest, "could not inspect \(what) \(path): \(errorText(errno))")
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw NetworkError(.invalidRequest, "\(what) \(path) is not a regular file")
        }
        guard info.st_uid == geteuid() else {
            throw NetworkError(
                .invalidRequest,
                "\(what) \(path) belongs to another user (uid \(info.st_uid)); LoginKit only uses private keys you own. Move it away or fix its owner."
            )
        }
        let mode = info.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            throw NetworkError(
                .invalidRequest,
                "\(what) \(path) is accessible by other users (mode \(String(mode, radix: 8))); run `chmod 600 \(path)`, and replace the key and its certificate if you think it leaked."
            )
        }
    }

    /// The text of a file that holds nothing secret (a certificate), at most `limit` bytes; symbolic
    /// links are followed.
    ///
    /// - Throws: `NetworkError` `.invalidRequest`.
    static func readPublic(_ path: String, what: String, limit: Int) throws(NetworkError) -> String {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else { throw openFailure(path, what: what, errno) }
        defer { _ = close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            throw NetworkError(.invalidRequest, "could not inspect \(what) \(path): \(errorText(errno))")
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw NetworkError(.invalidRequest, "\(what) \(path) is not a regular file")
        }
        guard Int(info.st_size) <= limit else {
            throw NetworkError(
                .invalidRequest, "\(what) \(path) is larger than \(limit) bytes; it is not a certificate file")
        }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeMutableBytes { buffer -> Int in
                guard let base = buffer.baseAddress else { return 0 }
                return read(descriptor, base + offset, buffer.count - offset)
            }
            if count < 0 {
                let code = errno
                if code == EINTR { continue }
                throw NetworkError(.invalidRequest, "could not read \(what) \(path): \(errorText(code))")
            }
            if count == 0 { break }  // shrank while reading: what was read is checked
            offset += count
        }
        return String(decoding: bytes.prefix(offset), as: UTF8.self)
    }

    private static func openFailure(_ path: String, what: String, _ code: Int32) -> NetworkError {
        if code == ENOENT {
            return NetworkError(.invalidRequest, "\(what) \(path) does not exist")
        }
        return NetworkError(.invalidRequest, "could not open \(what) \(path): \(errorText(code))")
    }

    private static func errorText(_ code: Int32) -> String {
        String(cString: strerror(code))
    }
}
