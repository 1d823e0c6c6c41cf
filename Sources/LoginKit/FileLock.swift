import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An advisory `flock` on a lock file that is never deleted (deleting it would let two processes
/// lock two different files). The lock dies with the process, so a crash never leaves it held.
///
/// Taking it never blocks a cooperative thread: an uncontended lock is taken at once with
/// `LOCK_NB`; a contended one waits in a blocking `flock` on a Dispatch thread.
struct FileLock: ~Copyable {
    private let descriptor: Int32

    /// Opens (creating `0600`) and locks `path`.
    static func acquire(_ path: String) async throws(TokenStoreError) -> FileLock {
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else {
            throw TokenStoreError(.lockFailed, path: path, "could not open the lock file \(path): \(StoreFileSystem.errnoText(errno))", errno: errno)
        }
        var info = stat()
        do throws(TokenStoreError) {
            guard fstat(descriptor, &info) == 0 else { throw StoreFileSystem.ioError("inspect", path) }
            try StoreFileSystem.checkOwnership(info, path: path, forbiddenBits: 0o022, fix: "chmod 600 \(path)")
        } catch {
            close(descriptor)
            throw error
        }
        if flock(descriptor, LOCK_EX | LOCK_NB) == 0 { return FileLock(descriptor: descriptor) }
        guard errno == EWOULDBLOCK || errno == EINTR else {
            let code = errno
            close(descriptor)
            throw TokenStoreError(.lockFailed, path: path, "could not lock \(path): \(StoreFileSystem.errnoText(code))", errno: code)
        }
        let result: Int32 = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                var outcome: Int32
                repeat {
                    outcome = flock(descriptor, LOCK_EX) == 0 ? 0 : errno
                } while outcome == EINTR
                continuation.resume(returning: outcome)
            }
        }
        guard result == 0 else {
            close(descriptor)
            throw TokenStoreError(.lockFailed, path: path, "could not lock \(path): \(StoreFileSystem.errnoText(result))", errno: result)
        }
        return FileLock(descriptor: descriptor)
    }

    private init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    /// Releases the lock (closing the descriptor releases the `flock`).
    consuming func release() {
        close(descriptor)
        discard self
    }

    deinit {
        close(descriptor)
    }
}
