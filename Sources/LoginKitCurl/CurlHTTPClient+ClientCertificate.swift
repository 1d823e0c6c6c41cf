internal import CCurl
import LoginKitHTTP

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

extension CurlHTTPClient.TLS {
    /// The largest client certificate file read: 1 MiB (a chain is a few KiB).
    static let maximumCertificateFileSize = 1024 * 1024
    /// The largest client key file read: 1 MiB (a PEM key is a few KiB).
    static let maximumKeyFileSize = 1024 * 1024

    /// Reads the client certificate and its key once, before any connection uses them, and checks
    /// them: both files or neither; each a regular file reached without following a symbolic link;
    /// the key a private file in a directory only the user can write (`CredentialFile.readPrivate`);
    /// the certificate file at most 1 MiB, holding a PEM certificate. Every connection of the client
    /// then uses the bytes read here (`EasyHandle.applyClientOptions`), never the files again: a
    /// file replaced, loosened or swapped for a link afterwards changes nothing. What libcurl finds
    /// wrong in them when it opens a connection (a certificate it cannot parse, an encrypted key, a
    /// key that does not match) fails that request with `NetworkError.Code.tls` and libcurl's
    /// `CURLE_SSL_CERTPROBLEM`.
    ///
    /// - Returns: The bytes read, `nil` when neither file is set.
    /// - Throws: `NetworkError` `.invalidRequest`, naming the file and the problem, never what the
    ///   file holds.
    func readClientCertificate() throws(NetworkError) -> ClientCredential? {
        switch (clientCertificate, clientKey) {
        case (nil, nil):
            return nil
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
            let keyBytes = try CredentialFile.readPrivate(
                key, what: "the TLS client key", limit: Self.maximumKeyFileSize, kind: "key file")
            let certificateBytes = try CredentialFile.readRegular(
                certificate, what: "the TLS client certificate", limit: Self.maximumCertificateFileSize,
                kind: "certificate file")
            guard certificateBytes.contains("-----BEGIN CERTIFICATE-----") else {
                throw NetworkError(
                    .invalidRequest,
                    "the TLS client certificate \(certificate) holds no PEM certificate (-----BEGIN CERTIFICATE-----); TLS.clientCertificate takes a PEM file"
                )
            }
            return ClientCredential(certificate: certificateBytes, key: keyBytes)
        }
    }
}

extension CurlHTTPClient {
    /// Runs `body` with the bytes of the certificate file this client presents (as read when it was
    /// created: what every connection sends), in place, never copied — the file may hold a key too;
    /// `nil` without a client certificate. For the RFC 8705 check that a bound token names this
    /// certificate (`CertificateThumbprint.sha256(pem:)`).
    package func withPresentedCertificate<T, Failure: Error>(_ body: (UnsafeRawBufferPointer) throws(Failure) -> T) throws(Failure) -> T? {
        guard let certificate = driver.clientCredential?.certificate, let start = certificate.start else { return nil }
        return try body(UnsafeRawBufferPointer(start: start, count: certificate.count))
    }
}

/// The client certificate and key a client read when it was created (`TLS.readClientCertificate`).
/// Every easy handle of the client points libcurl at these bytes (`CURLOPT_SSLCERT_BLOB`,
/// `CURLOPT_SSLKEY_BLOB`, not copied) and holds this value for as long as libcurl may read them.
struct ClientCredential: Sendable {
    /// The certificate file's bytes (PEM: the certificate, then any intermediates).
    let certificate: CredentialBytes
    /// The key file's bytes (PEM).
    let key: CredentialBytes
}

/// A file's bytes in memory of their own, overwritten with zeros when the last reference goes
/// (`loginkit_secure_zero`, which the compiler may not drop): the key's, and the certificate's,
/// which may hold a key too (a file with the key before its certificate). The bytes never pass
/// through a Swift `Array` or `String`, whose copies nobody zeroes.
///
/// Why `@unchecked Sendable` is safe: the buffer and `count` are written only by `fill`, which
/// `CredentialFile` calls before it hands the object to anyone, and by `deinit`, when no other
/// reference exists; in between they are only read (by libcurl, on the thread that uses a handle,
/// and by `contains`), and reads from several threads need no lock.
final class CredentialBytes: @unchecked Sendable {  // safe: see the proof above
    private let buffer: UnsafeMutableRawBufferPointer
    /// How many bytes of the buffer the file filled.
    private(set) var count = 0

    /// Room for `capacity` bytes (at least one, so that the buffer always has an address).
    init(capacity: Int) {
        buffer = .allocate(byteCount: max(capacity, 1), alignment: 1)
    }

    /// Where the bytes start; libcurl reads `count` bytes from here.
    var start: UnsafeRawPointer? {
        UnsafeRawPointer(buffer.baseAddress)
    }

    /// Reads `descriptor` until its end or until the buffer is full; the `errno` of a failed read,
    /// or `nil`.
    func fill(from descriptor: Int32) -> Int32? {
        guard let base = buffer.baseAddress else { return nil }
        while count < buffer.count {
            let result = read(descriptor, base + count, buffer.count - count)
            if result < 0 {
                let code = errno
                if code == EINTR { continue }
                return code
            }
            if result == 0 { break }  // shrank since it was inspected: what was read is what it holds
            count += result
        }
        return nil
    }

    /// Whether the bytes hold the ASCII text `marker`, searched in place.
    func contains(_ marker: String) -> Bool {
        let needle = Array(marker.utf8)
        guard let base = buffer.baseAddress, !needle.isEmpty, count >= needle.count else { return false }
        let bytes = UnsafeRawBufferPointer(start: base, count: count)
        for offset in 0...(count - needle.count) where bytes[offset] == needle[0] {
            if needle.indices.allSatisfy({ bytes[offset + $0] == needle[$0] }) { return true }
        }
        return false
    }

    deinit {
        if let base = buffer.baseAddress { loginkit_secure_zero(base, buffer.count) }
        buffer.deallocate()
    }
}

/// Reading the files of a TLS client certificate. `readPrivate` keeps the rule LoginKit's store
/// applies to its own files and to private keys (`StoreFileSystem.readFile` and
/// `checkStoreDirectory` in LoginKit, which this module cannot import): a regular file, reached
/// without following a symbolic link, owned by the user, with no permission for group or others, in
/// a directory group and others cannot write. Each check is made on the descriptor the bytes are
/// then read from, so what was checked is what is used.
enum CredentialFile {
    /// The bytes of `path`, at most `limit`, when it is a regular file of the user's own that group
    /// and others cannot access (mode `0600` or stricter), reached without following a symbolic
    /// link, in a directory that group and others cannot write.
    ///
    /// - Throws: `NetworkError` `.invalidRequest`, naming the file (or its directory), never quoting it.
    static func readPrivate(_ path: String, what: String, limit: Int, kind: String) throws(NetworkError) -> CredentialBytes {
        let descriptor = try openWithoutFollowing(path, what: what)
        defer { _ = close(descriptor) }
        let info = try regularFileStatus(descriptor, path, what: what)
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
        try checkDirectory(of: path, what: what)
        return try readAll(descriptor, size: Int(info.st_size), path, what: what, limit: limit, kind: kind)
    }

    /// The bytes of `path`, at most `limit`, when it is a regular file reached without following a
    /// symbolic link; for a file that holds nothing secret (a certificate).
    ///
    /// - Throws: `NetworkError` `.invalidRequest`, naming the file, never quoting it.
    static func readRegular(_ path: String, what: String, limit: Int, kind: String) throws(NetworkError) -> CredentialBytes {
        let descriptor = try openWithoutFollowing(path, what: what)
        defer { _ = close(descriptor) }
        let info = try regularFileStatus(descriptor, path, what: what)
        return try readAll(descriptor, size: Int(info.st_size), path, what: what, limit: limit, kind: kind)
    }

    /// Refuses `path` when group or others can write the directory that holds it: they could put
    /// another file in its place. A shared directory (sticky, like `/tmp`) is refused too, as the
    /// store refuses one.
    ///
    /// - Throws: `NetworkError` `.invalidRequest`, naming the directory.
    static func checkDirectory(of path: String, what: String) throws(NetworkError) {
        let directory = parentDirectory(of: path)
        var info = stat()
        guard stat(directory, &info) == 0 else {
            throw NetworkError(
                .invalidRequest, "could not inspect the directory \(directory) that holds \(what) \(path): \(errorText(errno))")
        }
        let mode = info.st_mode & 0o7777
        guard mode & 0o022 != 0 else { return }
        if mode & S_ISVTX != 0 {
            throw NetworkError(
                .invalidRequest,
                "\(what) \(path) is in \(directory), a shared directory (sticky, writable by other users: mode \(String(mode, radix: 8))); move it to a directory only you can write."
            )
        }
        throw NetworkError(
            .invalidRequest,
            "\(what) \(path) is in \(directory), which other users can write (mode \(String(mode, radix: 8))) and so put another file in its place; run `chmod go-w \(directory)` if the directory is yours alone, or move the file to a directory only you can write."
        )
    }

    /// The directory that holds `path`: what comes before its last `/` (split on the UTF-8 bytes),
    /// `/` for a file at the root, `.` for a bare name.
    static func parentDirectory(of path: String) -> String {
        let bytes = Array(path.utf8)
        guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else { return "." }
        return slash == 0 ? "/" : String(decoding: bytes[..<slash], as: UTF8.self)
    }

    /// Opens `path` for reading, refusing a symbolic link (`O_NOFOLLOW`).
    ///
    /// - Throws: `NetworkError` `.invalidRequest`.
    private static func openWithoutFollowing(_ path: String, what: String) throws(NetworkError) -> Int32 {
        // O_NONBLOCK: opening a FIFO put in the file's place returns at once instead of waiting
        // for a writer; fstat then refuses it.
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard descriptor >= 0 else {
            let code = errno
            if code == ELOOP {
                throw NetworkError(
                    .invalidRequest,
                    "\(what) \(path) is a symbolic link; LoginKit reads client certificates and keys only from the files themselves, so name the file it points to"
                )
            }
            throw openFailure(path, what: what, code)
        }
        return descriptor
    }

    /// The open file's bytes, `size` as `fstat` gave it, when that is at most `limit`.
    ///
    /// - Throws: `NetworkError` `.invalidRequest`.
    private static func readAll(
        _ descriptor: Int32, size: Int, _ path: String, what: String, limit: Int, kind: String
    ) throws(NetworkError) -> CredentialBytes {
        guard size <= limit else {
            throw NetworkError(.invalidRequest, "\(what) \(path) is larger than \(limit) bytes; it is not a \(kind)")
        }
        let bytes = CredentialBytes(capacity: size)
        if let code = bytes.fill(from: descriptor) {
            throw NetworkError(.invalidRequest, "could not read \(what) \(path): \(errorText(code))")
        }
        return bytes
    }

    /// The status of the open file `descriptor` (`path`, named `what` in errors), which must be a
    /// regular file.
    ///
    /// - Throws: `NetworkError` `.invalidRequest`.
    private static func regularFileStatus(_ descriptor: Int32, _ path: String, what: String) throws(NetworkError) -> stat {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            throw NetworkError(.invalidRequest, "could not inspect \(what) \(path): \(errorText(errno))")
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw NetworkError(.invalidRequest, "\(what) \(path) is not a regular file")
        }
        return info
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
