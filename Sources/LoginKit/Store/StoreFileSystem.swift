import LoginKitHTTP
#if canImport(Glibc)
import CProcessControl
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What identifies one version of the store file: a rename gives a new inode, a rewrite a new
/// mtime or size, a `chmod`/`chown` a new ctime. Compared before cached contents are handed out, so
/// permissions are re-checked whenever they change.
struct FileIdentity: Hashable, Sendable {
    let device: UInt64
    let inode: UInt64
    let modificationSeconds: Int
    let modificationNanoseconds: Int
    let changeSeconds: Int
    let changeNanoseconds: Int
    let size: Int64
}

/// The POSIX operations the file store needs, each failing with a `TokenStoreError` that names
/// the path and the errno text.
package enum StoreFileSystem {
    /// The largest store file read: 16 MiB (a store holds a few KiB per profile).
    static let maximumFileSize = 16 * 1024 * 1024

    static func errnoText(_ code: Int32) -> String {
        String(cString: strerror(code))
    }

    static func ioError(_ action: String, _ path: String, _ code: Int32 = errno) -> TokenStoreError {
        if code == ENOSPC || code == EDQUOT {
            return TokenStoreError(
                .noSpace, path: path, "could not \(action) \(path): \(errnoText(code)); free space on its file system (or raise the quota)", errno: code)
        }
        return TokenStoreError(.io, path: path, "could not \(action) \(path): \(errnoText(code))", errno: code)
    }

    /// Failures tests inject into the writes in a directory, by directory path: the `errno` every
    /// write of a file there then fails with. Empty outside tests.
    private static let injectedWriteFailures = LockedState<[String: Int32]>([:])

    /// For tests: every write of a file in `directory` (the store's, and the save check's) fails
    /// with `code` from now on, as on a full disk (`ENOSPC`); `nil` ends it. Each test uses a
    /// temporary directory of its own, so tests running at the same time do not meet.
    package static func injectWriteFailure(_ code: Int32?, in directory: String) {
        injectedWriteFailures.withLock { $0[directory] = code }
    }

    /// The `errno` a write in `directory` fails with when a test injected one (one lock and an
    /// empty-dictionary check otherwise).
    /// A failure injected for a directory applies to the directories under it (a store's profile
    /// directory is under the store's).
    private static func injectedWriteFailure(in directory: String) -> Int32? {
        injectedWriteFailures.withLock { failures in
            guard !failures.isEmpty else { return nil }
            if let code = failures[directory] { return code }
            return failures.first { directory.hasPrefix($0.key + "/") }?.value
        }
    }

    /// `writeAll`, unless a test injected a failure for `directory`.
    private static func writeUnlessInjected(_ bytes: [UInt8], to descriptor: Int32, in directory: String) -> Int32 {
        injectedWriteFailure(in: directory) ?? writeAll(bytes, to: descriptor)
    }

    /// The identity of `path`, or `nil` when it does not exist.
    static func identity(of path: String) throws(TokenStoreError) -> FileIdentity? {
        var info = stat()
        guard stat(path, &info) == 0 else {
            if errno == ENOENT { return nil }
            throw ioError("inspect", path)
        }
        return identity(info)
    }

    static func identity(_ info: stat) -> FileIdentity {
        FileIdentity(
            device: UInt64(info.st_dev), inode: UInt64(info.st_ino),
            modificationSeconds: Int(info.st_mtim.tv_sec), modificationNanoseconds: Int(info.st_mtim.tv_nsec),
            changeSeconds: Int(info.st_ctim.tv_sec), changeNanoseconds: Int(info.st_ctim.tv_nsec),
            size: Int64(info.st_size)
        )
    }

    /// Refuses a file or directory that another user owns, or that group/others may read
    /// (`forbiddenBits` 0o077 for files) or write (0o022 for directories).
    static func checkOwnership(_ info: stat, path: String, forbiddenBits: mode_t, fix: String) throws(TokenStoreError) {
        guard info.st_uid == geteuid() else {
            throw TokenStoreError(
                .wrongOwner, path: path,
                "\(path) belongs to another user (uid \(info.st_uid)); LoginKit only uses private files you own. Move it away or fix its owner."
            )
        }
        let mode = info.st_mode & 0o777
        guard mode & forbiddenBits == 0 else {
            throw TokenStoreError(
                .insecurePermissions, path: path,
                "\(path) is accessible by other users (mode \(String(mode, radix: 8))); run `\(fix)`, and replace what it holds (log in again, or a new key) if you think it leaked."
            )
        }
    }

    /// A private file's bytes (`nil` when it does not exist), read as the store's own file is: a
    /// regular file, not a link, the user's own, no access for group or others. The CLI reads its
    /// private key and token files through this.
    ///
    /// - Throws: `TokenStoreError` (`.insecurePermissions`, `.wrongOwner`, `.io`, …).
    package static func readPrivateFile(_ path: String) throws(TokenStoreError) -> [UInt8]? {
        try readFile(path)?.1
    }

    /// Reads the whole file, checking owner and permissions on the open descriptor.
    /// `nil` when the file does not exist.
    static func readFile(_ path: String) throws(TokenStoreError) -> (FileIdentity, [UInt8])? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else {
            if errno == ENOENT { return nil }
            if errno == ELOOP {
                throw TokenStoreError(.insecurePermissions, path: path, "\(path) is a symbolic link; LoginKit reads only regular files")
            }
            throw ioError("open", path)
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw ioError("inspect", path) }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw TokenStoreError(.corrupt, path: path, "\(path) is not a regular file")
        }
        try checkOwnership(info, path: path, forbiddenBits: 0o077, fix: "chmod 600 \(path)")
        guard Int(info.st_size) <= maximumFileSize else {
            throw TokenStoreError(.corrupt, path: path, "\(path) is larger than \(maximumFileSize) bytes; it is not a token store")
        }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeMutableBytes { buffer in
                read(descriptor, buffer.baseAddress! + offset, buffer.count - offset)  // non-empty: count > offset
            }
            if count < 0 {
                if errno == EINTR { continue }
                throw ioError("read", path)
            }
            if count == 0 { break }  // shrank while reading: what we have is checked by the parser
            offset += count
        }
        bytes.removeSubrange(offset...)
        return (identity(info), bytes)
    }

    /// Creates `directory` (and missing parents) with mode 0700, and checks the final directory.
    static func ensureDirectory(_ directory: String) throws(TokenStoreError) {
        var info = stat()
        if stat(directory, &info) != 0 {
            guard errno == ENOENT else { throw ioError("inspect", directory) }
            let parent = parentDirectory(of: directory)
            if parent != directory { try ensureDirectory(parent) }
            if mkdir(directory, 0o700) != 0 && errno != EEXIST { throw ioError("create the directory", directory) }
            guard stat(directory, &info) == 0 else { throw ioError("inspect", directory) }
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw TokenStoreError(.io, path: directory, "\(directory) is not a directory")
        }
    }

    /// What a store directory that others share or own should become instead.
    static let privateDirectoryAdvice = "put the store in a directory only you can write, such as ~/.local/state/loginkit"

    /// Checks the directory that holds the store: a real directory (not a symbolic link: `lstat`),
    /// owned by us, not writable by group or others. A shared directory (sticky, like `/tmp`) or
    /// one owned by someone else is refused with the advice to use a private one, never with a
    /// `chmod` of a directory that is meant to be shared.
    static func checkStoreDirectory(_ directory: String, forbiddenBits: mode_t = 0o022) throws(TokenStoreError) {
        var info = stat()
        var entry = Substring(directory)  // `lstat("link/")` would follow the link
        while entry.count > 1, entry.hasSuffix("/") { entry = entry.dropLast() }
        guard lstat(String(entry), &info) == 0 else { throw ioError("inspect", directory) }
        if info.st_mode & S_IFMT == S_IFLNK {
            let target = resolvedPath(directory).map { " (\($0))" } ?? ""
            throw TokenStoreError(
                .insecurePermissions, path: directory,
                "\(directory) is a symbolic link; LoginKit keeps tokens only in a real directory. Point the store at the directory it links to\(target), or replace the link with a directory."
            )
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw TokenStoreError(.io, path: directory, "\(directory) is not a directory")
        }
        guard info.st_uid == geteuid() else {
            throw TokenStoreError(
                .wrongOwner, path: directory,
                "\(directory) belongs to another user (uid \(info.st_uid)), who could replace the token files in it; \(privateDirectoryAdvice)."
            )
        }
        let mode = info.st_mode & 0o7777
        guard mode & forbiddenBits != 0 else { return }
        if mode & 0o022 == 0 {
            throw TokenStoreError(
                .insecurePermissions, path: directory,
                "\(directory) can be read by other users (mode \(String(mode, radix: 8))), and the names of its files are profile names; run `chmod 700 \(directory)`.")
        }
        if mode & S_ISVTX != 0 {
            throw TokenStoreError(
                .insecurePermissions, path: directory,
                "\(directory) is a shared directory (sticky, writable by other users: mode \(String(mode, radix: 8))), where others can create the files LoginKit puts beside the store; \(privateDirectoryAdvice)."
            )
        }
        throw TokenStoreError(
            .insecurePermissions, path: directory,
            "\(directory) can be written by other users (mode \(String(mode, radix: 8))); run `chmod 700 \(directory)` if it is yours alone, or \(privateDirectoryAdvice)."
        )
    }

    /// The canonical path of `path` (`realpath`), or `nil` when it does not resolve.
    static func resolvedPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Whether `path` is a Unix socket (a D-Bus session bus at `$XDG_RUNTIME_DIR/bus`).
    static func isSocket(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFSOCK
    }

    static func parentDirectory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let parent = String(path[..<slash])
        return parent.isEmpty ? "/" : parent
    }

    /// Replaces `path` with `bytes` durably and atomically through the fixed temp file `temporary`
    /// in the same directory, which only the holder of the lock over `path` writes (so a writer's
    /// crash leaves at most that one file, which the next writer truncates): created or truncated
    /// `0600`, never through a link, checked to be a regular file of ours; every byte written,
    /// `fsync`, `rename` over `path`, `fsync` of the directory.
    static func writeAtomically(
        _ bytes: [UInt8], to path: String, through temporary: String, beforeRename: () -> Void = {}
    ) throws(TokenStoreError) {
        let directory = parentDirectory(of: path)
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else { throw ioError("create a temporary file in", directory) }
        var closed = false
        defer { if !closed { close(descriptor) } }
        do throws(TokenStoreError) {
            var info = stat()
            guard fstat(descriptor, &info) == 0 else { throw ioError("inspect", temporary) }
            guard info.st_mode & S_IFMT == S_IFREG else { throw TokenStoreError(.io, path: temporary, "\(temporary) is not a regular file") }
            try checkOwnership(info, path: temporary, forbiddenBits: 0o077, fix: "rm \(temporary)")
            let failure = writeUnlessInjected(bytes, to: descriptor, in: directory)
            guard failure == 0 else { throw ioError("write", temporary, failure) }
            guard fsync(descriptor) == 0 else { throw ioError("flush", temporary) }
            closed = true
            guard close(descriptor) == 0 else { throw ioError("close", temporary) }
            beforeRename()
            guard rename(temporary, path) == 0 else { throw ioError("replace", path) }
        } catch {
            unlink(temporary)
            throw error
        }
        try syncDirectory(directory)
    }

    /// Writes a new `0600` file (`O_CREAT|O_EXCL`, never through a link) without flushing it: for
    /// a directory that is flushed as a whole (``syncFileSystem(of:)``) before anything names it.
    static func writeNewFile(_ bytes: [UInt8], to path: String) throws(TokenStoreError) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else { throw ioError("create", path) }
        let failure = writeUnlessInjected(bytes, to: descriptor, in: parentDirectory(of: path))
        let closed = close(descriptor)
        guard failure == 0 else { throw ioError("write", path, failure) }
        guard closed == 0 else { throw ioError("close", path) }
    }

    /// Makes every file written under `directory` durable: one `syncfs` of its file system on
    /// Linux (one flush for thousands of files), an `fsync` of each regular file elsewhere; then
    /// the directory's own `fsync`.
    static func syncFileSystem(of directory: String) throws(TokenStoreError) {
        #if canImport(Glibc)
        let descriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw ioError("open the directory", directory) }
        defer { close(descriptor) }
        guard loginkit_syncfs(descriptor) == 0 else { throw ioError("flush the file system of", directory) }
        #else
        for name in try entries(of: directory) {
            let file = directory + "/" + name
            let descriptor = open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            guard descriptor >= 0 else { continue }
            defer { close(descriptor) }
            guard fsync(descriptor) == 0 else { throw ioError("flush", file) }
        }
        #endif
        try syncDirectory(directory)
    }

    /// The names in `directory`, without `.` and `..`; `nil` when it does not exist.
    static func entries(of directory: String) throws(TokenStoreError) -> [String] {
        guard let handle = opendir(directory) else {
            if errno == ENOENT { return [] }
            throw ioError("list", directory)
        }
        defer { closedir(handle) }
        var names: [String] = []
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Creates `directory` `0700` unless it exists; an existing one must be a directory.
    static func makeDirectory(_ directory: String) throws(TokenStoreError) {
        if mkdir(directory, 0o700) == 0 { return }
        guard errno == EEXIST else { throw ioError("create the directory", directory) }
        var info = stat()
        guard lstat(directory, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
            throw TokenStoreError(.io, path: directory, "\(directory) is not a directory")
        }
    }

    /// Removes `path` and, when it is a directory (never followed through a link), everything
    /// under it; a missing path is no error.
    static func removeTree(_ path: String) throws(TokenStoreError) {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            if errno == ENOENT { return }
            throw ioError("inspect", path)
        }
        if info.st_mode & S_IFMT == S_IFDIR {
            for name in try entries(of: path) { try removeTree(path + "/" + name) }
            guard rmdir(path) == 0 || errno == ENOENT else { throw ioError("remove", path) }
        } else {
            guard unlink(path) == 0 || errno == ENOENT else { throw ioError("remove", path) }
        }
    }

    /// A new `0600` temp file beside `path` (`O_CREAT|O_EXCL`, never through a link), named so that
    /// ``removeStaleTemporaryFiles(for:)`` sweeps it if its writer dies: its descriptor and path.
    private static func createTemporaryFile(for path: String) throws(TokenStoreError) -> (Int32, String) {
        let directory = parentDirectory(of: path)
        let name = path[path.index(after: path.lastIndex(of: "/") ?? path.startIndex)...]
        var suffix = UInt64.random(in: 0...UInt64.max)
        var temporary = ""
        var descriptor: Int32 = -1
        for _ in 0..<8 {
            temporary = "\(directory)/.\(name).tmp-\(getpid())-\(String(suffix, radix: 36))"
            descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
            if descriptor >= 0 || errno != EEXIST { break }
            suffix = UInt64.random(in: 0...UInt64.max)
        }
        guard descriptor >= 0 else { throw ioError("create a temporary file in", directory) }
        return (descriptor, temporary)
    }

    /// Checks that a save of the store at `path` would go through now, before work whose result
    /// must be saved or is lost (a refresh: the provider retires the refresh token it is sent).
    /// Two checks: room on the file system for the new file beside the old one (`statvfs`: twice
    /// the current file plus 64 KiB, counting the blocks reserved for root when running as root),
    /// and a real write — a temp file as the atomic write makes it, filled to the store's size
    /// (at least 4 KiB), flushed, then removed. `access(W_OK)` is not enough: it says yes to root
    /// on a directory whose mode forbids writing, and knows nothing of a full disk or a quota.
    /// Call holding the store's lock (the temp file is swept like a crashed writer's otherwise).
    ///
    /// - Throws: `TokenStoreError` `.noSpace` (full file system or quota) or `.io` (no write
    ///   access, a read-only file system, …), naming the store and saying that nothing was sent.
    /// `files`: how many files the save writes (a migration writes one per profile): each takes a
    /// block and an inode at least.
    static func checkCanWrite(_ path: String, store: String? = nil, files: Int = 1) throws(TokenStoreError) {
        let directory = parentDirectory(of: path)
        let current = try identity(of: path)
        let size = max(0, Int(current?.size ?? 0))
        let store = store ?? path
        func refused(_ error: TokenStoreError) -> TokenStoreError {
            TokenStoreError(
                error.code, path: store,
                "the store \(store) cannot take a save now, so no refresh was sent (the provider would retire the stored refresh token, and its new one could not be kept): \(error.message)",
                errno: error.errno)
        }
        var info = statvfs()
        if statvfs(directory, &info) == 0 {
            let blockSize = UInt64(info.f_frsize > 0 ? info.f_frsize : info.f_bsize)
            let blocks = UInt64(geteuid() == 0 ? info.f_bfree : info.f_bavail)
            let (available, overflow) = blocks.multipliedReportingOverflow(by: blockSize)
            let needed = UInt64(size) * 2 + 64 * 1024 + (files > 1 ? UInt64(files) * 2 * blockSize : 0)
            let inodes = UInt64(info.f_favail)
            if files > 1, info.f_files > 0, inodes < UInt64(files) * 2 + 8 {
                throw refused(TokenStoreError(
                    .noSpace, path: directory,
                    "\(directory) has \(inodes) free inodes, and a save needs \(files * 2 + 8); free files on its file system",
                    errno: ENOSPC))
            }
            if !overflow, available < needed {
                throw refused(TokenStoreError(
                    .noSpace, path: directory,
                    "\(directory) has \(available / 1024) KiB free, and a save needs \(needed / 1024) KiB; free space on its file system",
                    errno: ENOSPC))
            }
        }
        let created: (Int32, String)
        do throws(TokenStoreError) {
            created = try createTemporaryFile(for: path)
        } catch {
            throw refused(error)
        }
        let (descriptor, temporary) = created
        defer {
            close(descriptor)
            unlink(temporary)
        }
        let failure = writeUnlessInjected([UInt8](repeating: 0, count: max(size, 4096)), to: descriptor, in: directory)
        guard failure == 0 else { throw refused(ioError("write", temporary, failure)) }
        guard fsync(descriptor) == 0 else { throw refused(ioError("flush", temporary)) }
    }

    /// Removes temp files a crashed writer left behind. Only call while holding the store's lock:
    /// every writer creates its temp file under the lock, so any temp file seen then is stale.
    static func removeStaleTemporaryFiles(for path: String) {
        let directory = parentDirectory(of: path)
        let prefix = ".\(path[path.index(after: path.lastIndex(of: "/") ?? path.startIndex)...]).tmp-"
        guard let handle = opendir(directory) else { return }
        defer { closedir(handle) }
        var stale: [String] = []
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name.hasPrefix(prefix) { stale.append(name) }
        }
        for name in stale { unlink("\(directory)/\(name)") }
    }

    /// `fsync` of a directory, so that a rename in it is durable.
    static func syncDirectory(_ directory: String) throws(TokenStoreError) {
        let descriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw ioError("open the directory", directory) }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw ioError("flush the directory", directory) }
    }

    /// Moves a corrupt store aside to `<path>.corrupt-<timestamp>` so that it is kept, not
    /// overwritten, and `fsync`s the directory so that the rename is durable before anything is
    /// written in the store's place.
    static func moveAside(_ path: String) throws(TokenStoreError) -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let target = "\(path).corrupt-\(now.tv_sec)-\(now.tv_nsec / 1_000_000)"
        guard rename(path, target) == 0 else { throw ioError("move aside", path) }
        try syncDirectory(parentDirectory(of: path))
        return target
    }
}
