#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import LoginKitHTTP

extension IdentitySource {
    /// The identity of the file at `path` now (a symbolic link followed, as a projected volume's
    /// are), or `nil` when it cannot be inspected.
    static func identityOfFile(at path: String) -> FileIdentity? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return StoreFileSystem.identity(info)
    }

    /// How many times in all a file that changes while it is read is read.
    static let fileReadAttempts = 3

    /// The token in the file at `path` (a symbolic link followed), trimmed, and the identity the
    /// file had before the read that gave it. A file that changed during the read — rewritten in
    /// place, or replaced by a rename — is read again, three times in all; then the last read is
    /// taken when it holds a token, and kept with the identity from before it, so that the next
    /// caller reads the file again. `beforeRead` runs between the identity check and each read,
    /// with the attempt's number from 0 (for tests, which change the file there).
    ///
    /// - Throws: `LoginError` `.invalidConfiguration` for a file that is missing, cannot be read,
    ///   is no regular file, is larger than 64 KiB, holds no token, or that its group or other
    ///   users can write; `ServerError` `.unavailable` when it kept changing and its last read held
    ///   no token.
    func readTokenFile(_ path: String, beforeRead: (Int) -> Void = { _ in }) throws -> FetchedToken {
        var attempt = 0
        while true {
            let reading = try readFileOnce(path, attempt: attempt, beforeRead: beforeRead)
            attempt += 1
            guard !reading.changed || attempt >= Self.fileReadAttempts else { continue }
            if let problem = Self.problem(with: reading.token) {
                if reading.changed {
                    throw ServerError(
                        .unavailable,
                        "\(displayName): kept changing while it was read (\(attempt) times) and holds no token yet; try again once the platform has written it")
                }
                throw LoginError(.invalidConfiguration, "\(displayName): \(problem)")
            }
            return FetchedToken(token: reading.token, statedExpiry: nil, validator: .file(reading.identity))
        }
    }

    /// One read of the file at `path`: its trimmed text, its identity before the read, and whether
    /// the file changed during the read (the descriptor's identity after it differs, or the path
    /// now leads to another file).
    private func readFileOnce(
        _ path: String, attempt: Int, beforeRead: (Int) -> Void
    ) throws -> (token: String, identity: FileIdentity, changed: Bool) {
        // O_NONBLOCK: a FIFO put at the path must not hang the opener; it is refused below.
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else {
            let code = errno
            if code == ENOENT {
                throw LoginError(.invalidConfiguration, "\(displayName): no such file; check the path, and that the platform puts the token there")
            }
            throw LoginError(.invalidConfiguration, "\(displayName): cannot be opened: \(systemErrorMessage(code))")
        }
        defer { closeDescriptor(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            let code = errno
            throw LoginError(.invalidConfiguration, "\(displayName): cannot be inspected: \(systemErrorMessage(code))")
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw LoginError(.invalidConfiguration, "\(displayName): not a regular file")
        }
        // Whoever can write the file chooses the identity this process presents. A platform's
        // file is its owner's alone to write (a projected token: root, 0644).
        let mode = info.st_mode & 0o777
        guard mode & 0o022 == 0 else {
            throw LoginError(
                .invalidConfiguration,
                "\(displayName): other users can write it (mode \(String(mode, radix: 8))), so they choose the identity it gives;"
                    + " run `chmod go-w \(printableExcerpt(path, limit: 200))` and make sure it holds the workload's token")
        }
        let before = StoreFileSystem.identity(info)
        beforeRead(attempt)
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 8192)
        while bytes.count <= Self.maximumTokenLength {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                let code = errno
                if code == EINTR { continue }
                throw LoginError(.invalidConfiguration, "\(displayName): cannot be read: \(systemErrorMessage(code))")
            }
            if count == 0 { break }
            bytes.append(contentsOf: buffer[..<count])
        }
        guard bytes.count <= Self.maximumTokenLength else {
            throw LoginError(.invalidConfiguration, "\(displayName): larger than 64 KiB, so it holds no token")
        }
        var after = stat()
        let unchanged = fstat(descriptor, &after) == 0 && StoreFileSystem.identity(after) == before && Self.identityOfFile(at: path) == before
        return (Self.trimmed(String(decoding: bytes, as: UTF8.self)), before, !unchanged)
    }
}
