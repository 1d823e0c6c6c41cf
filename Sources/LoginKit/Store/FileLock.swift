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
    private let descriptor: Int32
    /// Whether releasing closes the descriptor (`false`: a ``KeptLockFile``'s, unlocked and kept).
    private let closesOnRelease: Bool

    /// Opens (creating `0600`) and locks `path`, waiting at most `timeout`.
    ///
    /// - Throws: `TokenStoreError` (`.lockFailed`, `.lockTimedOut`, unsafe lock file), `CancellationError`.
    static func acquire(_ path: String, timeout: Duration) async throws -> FileLock {
        try await acquire(descriptor: try openLockFile(path), path: path, timeout: timeout, closesOnRelease: true)
    }

    /// Opens (creating `0600`) and locks `path` shared (`LOCK_SH`) or exclusive, on a descriptor of
    /// its own: two acquisitions in one process exclude each other as two processes' do (`flock`
    /// belongs to the open file description), so the store's per-profile and whole-store
    /// transactions need no in-process bookkeeping to exclude each other. A shared holder does not
    /// record its process ID (there may be many).
    /// `heldBy` says who holds it when a timeout comes (shared holders record no process ID).
    static func acquire(_ path: String, timeout: Duration, shared: Bool, heldBy holders: String? = nil) async throws -> FileLock {
        try await acquire(descriptor: try openLockFile(path), path: path, timeout: timeout, closesOnRelease: true, shared: shared, heldBy: holders)
    }

    /// Locks `kept`'s lock file through the descriptor it keeps open (reopened when the file was
    /// deleted meanwhile), waiting at most `timeout`. Releasing unlocks it and keeps it open: a
    /// store that saves again and again spares the `open`, `fstat` and `close` of each save.
    ///
    /// The caller serialises acquisitions of one `kept` (the store's in-process lock).
    static func acquire(_ kept: KeptLockFile, timeout: Duration) async throws -> FileLock {
        try await acquire(descriptor: try kept.descriptor(), path: kept.path, timeout: timeout, closesOnRelease: false)
    }

    private static func acquire(descriptor: Int32, path: String, timeout: Duration, closesOnRelease: Bool, shared: Bool = false, heldBy holders: String? = nil
    ) async throws -> FileLock {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        var pause = Duration.milliseconds(1)
        while true {
            if flock(descriptor, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) == 0 {
                if !shared { recordHolder(descriptor) }
                return FileLock(descriptor: descriptor, closesOnRelease: closesOnRelease)
            }
            let code = errno
            guard code == EWOULDBLOCK || code == EINTR else {
                if closesOnRelease { close(descriptor) }
                throw TokenStoreError(.lockFailed, path: path, "could not lock \(path): \(StoreFileSystem.errnoText(code))", errno: code)
            }
            guard clock.now < deadline else {
                let holder = holders ?? describeHolder(descriptor)
                if closesOnRelease { close(descriptor) }
                throw TokenStoreError(
                    .lockTimedOut, path: path,
                    "\(path) stayed locked for more than \(timeout) by \(holder); if that process is stuck or stopped, resume or end it")
            }
            do {
                try await Task.sleep(for: min(pause, deadline - clock.now))
            } catch {
                if closesOnRelease { close(descriptor) }
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

    private init(descriptor: Int32, closesOnRelease: Bool) {
        self.descriptor = descriptor
        self.closesOnRelease = closesOnRelease
    }

    /// Releases the lock (closing the descriptor releases the `flock`; a kept one is unlocked).
    consuming func release() {
        Self.unlock(descriptor, closing: closesOnRelease)
        discard self
    }

    deinit {
        Self.unlock(descriptor, closing: closesOnRelease)
    }

    private static func unlock(_ descriptor: Int32, closing: Bool) {
        if closing {
            close(descriptor)
        } else {
            _ = flock(descriptor, LOCK_UN)
        }
    }
}

/// A store's lock file, kept open between its saves (``FileLock/acquire(_:timeout:)``).
///
/// `@unchecked Sendable`, safe because: the descriptor is read and replaced only inside the
/// mutex of `state` (a `LockedState`), and it is used by one acquisition at a time (the store's
/// in-process lock serialises them); `deinit` closes it when nothing holds the object.
final class KeptLockFile: @unchecked Sendable {  // safe: the proof is in the comment above
    let path: String
    private let state = LockedState<Int32?>(nil)

    init(path: String) { self.path = path }

    /// The open descriptor: opened (and checked) the first time, and again whenever the path no
    /// longer names the file it has open (deleted, or the file or its directory moved and a new one
    /// made): a lock on a file others no longer open would exclude nobody. One `stat` and one
    /// `fstat` per acquisition, against the `open`, `fstat` and `close` of opening it every time.
    func descriptor() throws(TokenStoreError) -> Int32 {
        try state.withLock { (descriptor: inout Int32?) throws(TokenStoreError) -> Int32 in
            if let open = descriptor {
                var held = stat(), named = stat()
                if fstat(open, &held) == 0, stat(path, &named) == 0, held.st_dev == named.st_dev, held.st_ino == named.st_ino {
                    return open
                }
                close(open)
                descriptor = nil
            }
            let opened = try FileLock.openLockFile(path)
            descriptor = opened
            return opened
        }
    }

    deinit {
        state.withLock { descriptor in
            if let descriptor { close(descriptor) }
        }
    }
}
