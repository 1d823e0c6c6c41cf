import LoginKitHTTP
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
/// Waiting never blocks a thread and always ends: attempts are non-blocking (`LOCK_NB`), with a
/// backoff from 1 to 50 ms between them; cancelling the task ends the wait at once
/// (`CancellationError`), and after `timeout` it ends with `.lockTimedOut` naming the holder. The
/// holder writes its process ID into the lock file, so that the error can say who it is and
/// whether it is stopped (a process suspended with Ctrl-Z keeps its locks).
struct FileLock: ~Copyable {
    /// A descriptor of this lock's own: closing it releases the `flock`.
    private let descriptor: Int32

    /// Opens (creating `0600`) and locks `path`, waiting at most `timeout`.
    ///
    /// - Throws: `TokenStoreError` (`.lockFailed`, `.lockTimedOut`, unsafe lock file), `CancellationError`.
    static func acquire(_ path: String, timeout: Duration) async throws -> FileLock {
        try await acquire(descriptor: try openLockFile(path), path: path, timeout: timeout)
    }

    /// Opens (creating `0600`) and locks `path` shared (`LOCK_SH`) or exclusive, on a descriptor of
    /// its own: two acquisitions in one process exclude each other as two processes' do (`flock`
    /// belongs to the open file description), so the store's per-profile and whole-store
    /// transactions need no in-process bookkeeping to exclude each other. A shared holder does not
    /// record its process ID (there may be many).
    /// `heldBy` says who holds it when a timeout comes (shared holders record no process ID).
    static func acquire(_ path: String, timeout: Duration, shared: Bool, heldBy holders: String? = nil) async throws -> FileLock {
        try await acquire(descriptor: try openLockFile(path), path: path, timeout: timeout, shared: shared, heldBy: holders)
    }

    private static func acquire(
        descriptor: Int32, path: String, timeout: Duration, shared: Bool = false, heldBy holders: String? = nil
    ) async throws -> FileLock {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        var pause = Duration.milliseconds(1)
        while true {
            if flock(descriptor, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) == 0 {
                if !shared { recordHolder(descriptor) }
                return FileLock(descriptor: descriptor)
            }
            let code = errno
            guard code == EWOULDBLOCK || code == EINTR else {
                close(descriptor)
                throw TokenStoreError(.lockFailed, path: path, "could not lock \(path): \(StoreFileSystem.errnoText(code))", errno: code)
            }
            guard clock.now < deadline else {
                let holder = holders ?? describeHolder(descriptor)
                close(descriptor)
                throw TokenStoreError(
                    .lockTimedOut, path: path,
                    "\(path) stayed locked for more than \(timeout) by \(holder); if that process is stuck or stopped, resume or end it")
            }
            do {
                try await Task.sleep(for: min(pause, deadline - clock.now))
            } catch {
                close(descriptor)
                throw CancellationError()
            }
            pause = min(pause * 2, .milliseconds(50))
        }
    }

    /// Opens the lock file, refusing one that is not a regular file of ours with safe permissions.
    fileprivate static func openLockFile(_ path: String) throws(TokenStoreError) -> Int32 {
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0o600)
        guard descriptor >= 0 else {
            throw TokenStoreError(.lockFailed, path: path, "could not open the lock file \(path): \(StoreFileSystem.errnoText(errno))", errno: errno)
        }
        var info = stat()
        do throws(TokenStoreError) {
            guard fstat(descriptor, &info) == 0 else { throw StoreFileSystem.ioError("inspect", path) }
            guard info.st_mode & S_IFMT == S_IFREG else {
                throw TokenStoreError(.lockFailed, path: path, "the lock file \(path) is not a regular file; remove it")
            }
            try StoreFileSystem.checkOwnership(info, path: path, forbiddenBits: 0o022, fix: "chmod 600 \(path)")
        } catch {
            close(descriptor)
            throw error
        }
        return descriptor
    }

    /// Writes this process's ID into the lock file (best effort: it only serves error messages),
    /// unless it is there already (a process that saves
    /// again and again then neither truncates nor rewrites the file: on ext4 a truncate-and-write
    /// makes the close start writeback of the lock file, which the save's `fsync`s then wait for).
    private static func recordHolder(_ descriptor: Int32) {
        let text = Array("\(getpid())\n".utf8)
        var current = [UInt8](repeating: 0, count: 32)
        let count = current.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        if count == text.count, current.prefix(count).elementsEqual(text) { return }
        guard ftruncate(descriptor, 0) == 0 else { return }
        _ = text.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
    }

    /// "process 1234 (loginkit, stopped)", from the lock file and /proc; "another process" when unknown.
    private static func describeHolder(_ descriptor: Int32) -> String {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        guard count > 0, let pid = Int32(String(decoding: buffer[..<count], as: UTF8.self).split(separator: "\n").first ?? ""), pid > 0 else {
            return "another process"
        }
        var details: [String] = []
        if let name = readSmallFile("/proc/\(pid)/comm")?.split(separator: "\n").first {
            details.append(printableExcerpt(String(name), limit: 32))  // another process's name: escaped
        }
        if let status = readSmallFile("/proc/\(pid)/stat"), let end = status.lastIndex(of: ")") {
            let state = status[status.index(after: end)...].split(separator: " ").first
            if state == "T" || state == "t" { details.append("stopped") }
        }
        return "process \(pid)" + (details.isEmpty ? "" : " (\(details.joined(separator: ", ")))")
    }

    private static func readSmallFile(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 512)
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        return count > 0 ? String(decoding: buffer[..<count], as: UTF8.self) : nil
    }

    private init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    /// Releases the lock: closing the descriptor releases the `flock`.
    consuming func release() {
        close(descriptor)
        discard self
    }

    deinit {
        close(descriptor)
    }
}
