#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import LoginKitJOSE
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A file-backed `TokenStore`: named profiles in one JSON file (docs/storage.md).
///
/// - Writes are durable and atomic (temp file, `fsync`, `rename`, directory `fsync`): a crash at any
///   instant leaves the old file or the new one.
/// - The directory is created `0700`, the file `0600`; a file that group or others can read, a
///   directory they can write, or either owned by another user is refused with an error that says
///   how to fix it (for a shared directory such as `/tmp`: use a private one). The store's own
///   directory must not be a symbolic link (links higher up its path are followed).
/// - ``withExclusiveAccess(_:)`` holds an in-process lock and an advisory `flock` on `<path>.lock`
///   (never deleted), and re-reads the file once it holds them: tasks and processes take turns.
/// - Reads are served from memory; before anything is handed out the file's inode, mtime and size
///   are compared, so a change by another process is noticed. (`AuthService`'s cached path checks
///   at most once per 10 ms: docs/refresh.md.)
/// - Optional AES-256-GCM sealing of the whole payload (``StoreSealing``).
/// - A corrupt file is never silently replaced: reading it throws `.corrupt` naming the path; the
///   next save first moves it aside to `<path>.corrupt-<time>`. A file from a newer LoginKit, one
///   sealed with another key, or one with unsafe permissions is never overwritten.
///
/// Concurrency contract: an actor; use one per file per process (several are safe, just slower, and
/// a change through one reaches `AuthService`'s cached token calls on another within 10 ms).
public actor IDTokenStore: TokenStore {
    /// The store file.
    public nonisolated let path: String
    /// The lock file beside it.
    public nonisolated let lockPath: String
    /// Whether saves are sealed.
    public nonisolated let isSealed: Bool
    private let key: SymmetricKey?
    private let directory: String
    private nonisolated let processLock = AsyncLock()
    private nonisolated let interactiveLock = AsyncLock()
    private nonisolated let lockTimeout: Duration
    private var cache: (identity: FileIdentity, profiles: [String: StoredProfile])?
    /// What ``changeStamp()`` answers from, without a hop onto this actor.
    nonisolated let fileWatch: StoreFileWatch

    /// A store at `path`, or at ``defaultPath(environment:)`` when `path` is `nil`.
    ///
    /// - Parameters:
    ///   - path: the store file; `nil` for ``defaultPath(environment:)``.
    ///   - sealing: how the file is sealed; plain `0600` JSON by default. The environment
    ///     (`LOGINKIT_STORE_KEY`) is consulted only when the caller passes `.environment`.
    ///   - lockTimeout: the longest wait for the store's lock held by another process; then the
    ///     operation fails with `.lockTimedOut` naming the holder. Default 30 s.
    ///   - environment: where `LOGINKIT_STORE`, `XDG_STATE_HOME`, `HOME` and the sealing key are
    ///     looked up; the process environment by default.
    /// - Throws: `TokenStoreError` `.invalidKey` when the sealing key cannot be read.
    public init(
        path: String? = nil,
        sealing: StoreSealing = .none,
        lockTimeout: Duration = .seconds(30),
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(TokenStoreError) {
        self.lockTimeout = lockTimeout
        let path = path ?? Self.defaultPath(environment: environment)
        self.path = path
        self.lockPath = path + ".lock"
        self.fileWatch = StoreFileWatch(path: path)
        self.directory = StoreFileSystem.parentDirectory(of: path)
        self.key = try sealing.resolveKey(environment: environment)
        self.isSealed = key != nil
    }

    /// `$LOGINKIT_STORE`, else `$XDG_STATE_HOME/loginkit/tokens.json`, else
    /// `~/.local/state/loginkit/tokens.json`.
    public static func defaultPath(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let store = environment["LOGINKIT_STORE"], !store.isEmpty { return store }
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") { return state + "/loginkit/tokens.json" }
        var home = environment["HOME"] ?? ""
        if home.isEmpty, let entry = getpwuid(geteuid()), let directory = entry.pointee.pw_dir {
            home = String(cString: directory)
        }
        return home + "/.local/state/loginkit/tokens.json"
    }

    public func profile(named name: String) throws(TokenStoreError) -> StoredProfile? {
        try currentProfiles()[name]
    }

    public func profileNames() throws(TokenStoreError) -> [String] {
        try currentProfiles().keys.sorted()
    }

    public nonisolated(nonsending) func withExclusiveAccess<T>(
        _ body: (inout TokenStoreTransaction) async throws -> T
    ) async throws -> T {
        try await processLock.withLock {
            try await prepareDirectory()
            let lock = try await FileLock.acquire(lockPath, timeout: lockTimeout)
            do {
                let (profiles, recovered) = try await readForUpdate()
                var transaction = TokenStoreTransaction(profiles: profiles)
                transaction.recoveredFrom = recovered
                let result = try await body(&transaction)
                if transaction.hasChanges || (recovered != nil && !transaction.profiles.isEmpty) {
                    try await write(transaction.profiles, movingAsideCorruptFile: recovered != nil)
                }
                lock.release()
                return result
            } catch {
                lock.release()
                throw error
            }
        }
    }

    /// Runs `body` holding `<path>.login.lock` (waiting at most `timeout`), so that one interactive
    /// login runs at a time across the processes sharing this store; the store's lock stays free.
    public nonisolated(nonsending) func withInteractiveLogin<T>(
        for name: String, timeout: Duration, _ body: () async throws -> T
    ) async throws -> T {
        try await interactiveLock.withLock {
            try await prepareDirectory()
            let lock = try await FileLock.acquire(path + ".login.lock", timeout: timeout)
            do {
                let result = try await body()
                lock.release()
                return result
            } catch {
                lock.release()
                throw error
            }
        }
    }

    // MARK: Reading

    private func currentProfiles() throws(TokenStoreError) -> [String: StoredProfile] {
        guard let identity = try StoreFileSystem.identity(of: path) else {
            cache = nil
            return [:]
        }
        if let cache, cache.identity == identity { return cache.profiles }
        // Another writer changed the file: cached token calls must not go on serving what this
        // read has just seen replaced (they would, until the watch's next look).
        if cache != nil { fileWatch.changed(to: identity) }
        return try load()
    }

    private func load() throws(TokenStoreError) -> [String: StoredProfile] {
        try Telemetry.storeOperation("read", store: "file") { () throws(TokenStoreError) in try loadFromDisk() }
    }

    private func loadFromDisk() throws(TokenStoreError) -> [String: StoredProfile] {
        guard let (identity, bytes) = try StoreFileSystem.readFile(path) else {
            cache = nil
            return [:]
        }
        try StoreFileSystem.checkStoreDirectory(directory)
        let profiles = try StoreFormat.decode(bytes, path: path, key: key)
        cache = (identity, profiles)
        return profiles
    }

    /// The profiles as on disk now (the cache only when the file's identity still matches it);
    /// a corrupt file reads as empty plus the error, so that the
    /// caller's save can replace it (after moving it aside). Every other error is thrown.
    private func readForUpdate() throws(TokenStoreError) -> ([String: StoredProfile], TokenStoreError?) {
        do {
            return (try currentProfiles(), nil)
        } catch where error.code == .corrupt {
            cache = nil
            return ([:], error)
        }
    }

    // MARK: Writing

    private func prepareDirectory() throws(TokenStoreError) {
        try StoreFileSystem.ensureDirectory(directory)
        try StoreFileSystem.checkStoreDirectory(directory)
    }

    private func write(_ profiles: [String: StoredProfile], movingAsideCorruptFile: Bool) throws(TokenStoreError) {
        try Telemetry.storeOperation("write", store: "file") { () throws(TokenStoreError) in
            try writeToDisk(profiles, movingAsideCorruptFile: movingAsideCorruptFile)
        }
    }

    private func writeToDisk(_ profiles: [String: StoredProfile], movingAsideCorruptFile: Bool) throws(TokenStoreError) {
        let bytes = try StoreFormat.encode(profiles, path: path, key: key)
        let identity: FileIdentity?
        do {
            if movingAsideCorruptFile, try StoreFileSystem.identity(of: path) != nil {
                _ = try StoreFileSystem.moveAside(path)
            }
            StoreFileSystem.removeStaleTemporaryFiles(for: path)
            try StoreFileSystem.writeAtomically(bytes, to: path)
            identity = try StoreFileSystem.identity(of: path)
        } catch {
            fileWatch.changed(to: nil)  // whatever is on disk now, cached reads must look again
            throw error
        }
        if let identity {
            cache = (identity, profiles)
        }
        fileWatch.changed(to: identity)
    }
}
