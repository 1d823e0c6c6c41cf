#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
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
///   Before a refresh, `AuthService` asks it whether a save would go through (room on the file
///   system, a real write and flush of a file the store's size in its directory): when the new
///   refresh token could not be kept, no refresh is sent.
/// - Reads are served from memory; before a profile is returned the file's inode, mtime and size
///   are compared, so a change by another process is noticed. (`AuthService`'s cached path checks
///   at most once per 10 ms: docs/refresh.md.)
/// - Optional AES-256-GCM sealing of the whole payload (``StoreSealing``), with the key given, or
///   kept by a ``StoreKeyProvider`` (the Secret Service, the kernel keyring) and named in the file.
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
    package nonisolated let lockPath: String
    /// Whether saves are sealed for sure: with a key given in code, a key file, the environment,
    /// or a chosen provider. An `.automatic` store tells what it does through ``protection()``.
    package nonisolated let isSealed: Bool
    private let keys: StoreKeys
    private let directory: String
    private nonisolated let processLock = AsyncLock()
    private nonisolated let interactiveLock = AsyncLock()
    private nonisolated let lockTimeout: Duration
    /// `<path>.lock`, kept open between saves.
    private nonisolated let lockFile: KeptLockFile
    /// Whether this store has swept the temp files a crashed writer may have left (once, at its
    /// first write, and again after a write of its own failed).
    private var sweptTemporaryFiles = false
    private var cache: (identity: FileIdentity, profiles: [String: StoredProfile], sealing: FileSealing)?
    /// Moves on with every load that starts and every write: a load that suspended on a key
    /// provider stores what it read only when nothing newer was read or written meanwhile.
    private var cacheEpoch: UInt64 = 0
    /// A migration is reading the file: it may read a plain file although the store seals.
    private var isMigrating = false
    /// What ``changeStamp()`` answers from, without a hop onto this actor.
    nonisolated let fileWatch: StoreFileWatch

    /// A store at `path`, or at the default path when `path` is `nil`: `$LOGINKIT_STORE`, else
    /// `$XDG_STATE_HOME/loginkit/tokens.json`, else `~/.local/state/loginkit/tokens.json`.
    ///
    /// - Parameters:
    ///   - path: the store file; `nil` for the default path.
    ///   - sealing: how the file is sealed; plain `0600` JSON by default. The environment
    ///     (`LOGINKIT_STORE_KEY`) is consulted only when the caller passes `.environment`.
    ///   - lockTimeout: the longest wait for the store's lock held by another process; then the
    ///     operation fails with `.lockTimedOut` naming the holder. Default 30 s.
    ///   - environment: where `LOGINKIT_STORE`, `XDG_STATE_HOME`, `HOME` and the sealing key are
    ///     looked up; `nil` (the default) for the process environment.
    ///   Key providers (``StoreSealing/provider(_:)``, ``StoreSealing/automatic(_:)``) are asked
    ///   at the first access, never here.
    /// - Throws: `TokenStoreError` `.invalidKey` when an explicit sealing key cannot be read.
    public init(
        path: String? = nil,
        sealing: StoreSealing = .none,
        lockTimeout: Duration = .seconds(30),
        environment: [String: String]? = nil
    ) throws(TokenStoreError) {
        let environment = environment ?? ProcessInfo.processInfo.environment
        self.lockTimeout = lockTimeout
        let path = path ?? Self.defaultPath(environment: environment)
        self.path = path
        self.lockPath = path + ".lock"
        self.lockFile = KeptLockFile(path: path + ".lock")
        self.fileWatch = StoreFileWatch(path: path)
        self.directory = StoreFileSystem.parentDirectory(of: path)
        self.keys = try StoreKeys(sealing: sealing, path: path, environment: environment)
        self.isSealed = keys.sealsForSure
    }

    /// `$LOGINKIT_STORE`, else `$XDG_STATE_HOME/loginkit/tokens.json`, else
    /// `~/.local/state/loginkit/tokens.json`.
    package static func defaultPath(environment: [String: String]) -> String {
        if let store = environment["LOGINKIT_STORE"], !store.isEmpty { return store }
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") { return state + "/loginkit/tokens.json" }
        var home = environment["HOME"] ?? ""
        if home.isEmpty, let entry = getpwuid(geteuid()), let directory = entry.pointee.pw_dir {
            home = String(cString: directory)
        }
        return home + "/.local/state/loginkit/tokens.json"
    }

    public func profile(named name: String) async throws(TokenStoreError) -> StoredProfile? {
        try await currentProfiles()[name]
    }

    public func profileNames() async throws(TokenStoreError) -> [String] {
        try await currentProfiles().keys.sorted()
    }

    /// How the store file is protected now: sealed with which key provider or key, or plain and
    /// why; for a file not written yet, and for a plain file that the next save will seal, what
    /// that save will do. May ask a key provider (bounded, never prompts).
    ///
    /// - Throws: `TokenStoreError` when the file cannot be read (`.keyUnavailable`, `.unavailable`…).
    public func protection() async throws(TokenStoreError) -> StoreProtection {
        let read = try await currentFile()
        var protection: StoreProtection
        if let sealing = read.sealing, sealing.protection.isSealed || (sealing.isChosenPlaintext && keys.keepsChosenPlaintext) {
            protection = sealing.protection
        } else {
            let next = await keys.preview()
            protection = next
            if read.sealing != nil, next.isSealed {
                protection = StoreProtection(level: StoreProtection.plaintext, detail: "sealed with \(next.level) on the next save")
            }
        }
        if protection.level == "secret-service", protection.detail.isEmpty, let provider = keys.provider(named: protection.level) {
            let availability = await provider.availability()
            protection.detail = availability.isAvailable ? availability.detail : "not reachable now: \(availability.detail)"
        }
        if protection.isSealed {
            // Fell back to this level: say from what, and why.
            let skipped = await keys.reasonsBefore(protection.level)
            if !skipped.isEmpty {
                protection.detail = ([protection.detail].filter { !$0.isEmpty } + ["not " + skipped.joined(separator: "; not ")]).joined(separator: "; ")
            }
        }
        return protection
    }

    /// Rewrites the store sealed as `target` says (`loginkit store migrate`): `.automatic` to the
    /// first usable keyring (no plaintext fallback, no explicit key), `.none` to plain JSON, or a
    /// provider or key of your choice. The key the file was sealed with before is removed from its
    /// provider once the new file is durable. Later saves keep the new sealing.
    ///
    /// - Returns: the new protection.
    /// - Throws: `TokenStoreError` `.unavailable` when the target cannot be used (nothing changes),
    ///   and what reading the current file throws.
    public func migrate(to target: StoreSealing) async throws -> StoreProtection {
        try await processLock.withLock {
            try prepareDirectory()
            let lock = try await FileLock.acquire(lockFile, timeout: lockTimeout)
            do {
                isMigrating = true
                let read: FileContents
                do {
                    defer { isMigrating = false }
                    read = try await currentFile()
                }
                let profiles = read.profiles
                let before = read.sealing
                var destination = target
                if case .automatic(var automatic) = target {
                    automatic.usesExplicitKey = false
                    automatic.allowsPlaintextFallback = false
                    destination = .automatic(automatic)
                }
                let sealing = try await keys.choose(destination, forMigration: true)
                try write(profiles, sealing: sealing, movingAsideCorruptFile: false)
                // Only a key this store made (its id starts with the store's prefix): a copied or
                // edited file must not make us delete another store's key.
                if let old = before?.reference, old != sealing.reference, old.id.hasPrefix(keys.keyIDPrefix) { await keys.removeKey(old) }
                lock.release()
                return sealing.protection
            } catch {
                lock.release()
                throw error
            }
        }
    }

    public nonisolated(nonsending) func withExclusiveAccess<T>(
        _ body: (inout TokenStoreTransaction) async throws -> T
    ) async throws -> T {
        try await exclusiveAccess(stamped: false, body).result
    }

    /// The exclusive access; with `stamped`, also the change stamp read after the write and before
    /// the file lock is released (``TokenStoreChangeStamp/withExclusiveAccessStamped(to:_:)``).
    package nonisolated(nonsending) func exclusiveAccess<T>(
        stamped: Bool, _ body: (inout TokenStoreTransaction) async throws -> T
    ) async throws -> (result: T, stamp: UInt64?) {
        try await processLock.withLock {
            try await prepareDirectory()
            let lock = try await FileLock.acquire(lockFile, timeout: lockTimeout)
            do {
                let (profiles, read, recovered) = try await readForUpdate()
                var transaction = TokenStoreTransaction(profiles: profiles)
                transaction.recoveredFrom = recovered
                let path = self.path
                transaction.saveCheck = { () throws(TokenStoreError) in try StoreFileSystem.checkCanWrite(path) }
                let result = try await body(&transaction)
                if transaction.hasChanges || (recovered != nil && !transaction.profiles.isEmpty) {
                    // A key is looked up or made only for a write, still under the lock.
                    let sealing = try await sealingForSave(read: read)
                    try await write(transaction.profiles, sealing: sealing, movingAsideCorruptFile: recovered != nil)
                }
                let stamp = stamped ? fileWatch.stamp() : nil
                lock.release()
                return (result, stamp)
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

    /// What the file holds now and how it is sealed (`nil`: there is no file).
    private typealias FileContents = (profiles: [String: StoredProfile], sealing: FileSealing?)

    private func currentProfiles() async throws(TokenStoreError) -> [String: StoredProfile] {
        try await currentFile().profiles
    }

    private func currentFile() async throws(TokenStoreError) -> FileContents {
        guard let identity = try StoreFileSystem.identity(of: path) else {
            cache = nil
            return ([:], nil)
        }
        if let cache, cache.identity == identity { return (cache.profiles, cache.sealing) }
        // Another writer changed the file: cached token calls must not go on serving what this
        // read has just seen replaced (they would, until the watch's next look).
        if cache != nil { fileWatch.changed(to: identity) }
        return try await load(identity)
    }

    private func load(_ identity: FileIdentity) async throws(TokenStoreError) -> FileContents {
        let started = ContinuousClock.now
        do {
            let contents = try await loadAgainIfReplaced(identity)
            Telemetry.recordStoreOperation("read", store: "file", outcome: "success", since: started)
            return contents
        } catch {
            Telemetry.recordStoreOperation("read", store: "file", outcome: "failed", since: started)
            throw error
        }
    }

    /// The file read; read once more when its key was not found but the file is no longer the one
    /// seen before (another process migrated it while its old key was being looked up, and removed
    /// that key) — only then, not for every read of a file whose key is really gone.
    private func loadAgainIfReplaced(_ identity: FileIdentity) async throws(TokenStoreError) -> FileContents {
        do {
            return try await loadFromDisk()
        } catch where error.code == .keyUnavailable {
            guard try StoreFileSystem.identity(of: path) != identity else { throw error }
            return try await loadFromDisk()
        }
    }

    private func loadFromDisk() async throws(TokenStoreError) -> FileContents {
        cacheEpoch &+= 1
        let epoch = cacheEpoch
        guard let (identity, bytes) = try StoreFileSystem.readFile(path) else {
            cache = nil
            return ([:], nil)
        }
        try StoreFileSystem.checkStoreDirectory(directory)
        let header = try StoreFormat.header(bytes, path: path)
        // A store sealed with a key its user gave reads no plain file: whoever put one there would
        // choose the issuer, endpoints and client its next refresh trusts, which the key's
        // authentication would otherwise rule out. `migrate(to:)` alone reads one, to seal it.
        if header.sealed == nil, keys.sealsWithGivenKey, !isMigrating {
            throw TokenStoreError(
                .corrupt, path: path,
                "\(path) is not sealed, but this store seals with a key; it is not read — it is kept, and the next save moves it aside (to seal an existing plain store, run its migration: `loginkit store migrate`)")
        }
        // Only a sealed file needs a key, and its header says whose (a provider may be asked: the
        // actor may take other calls meanwhile, which read the file again themselves).
        var sealing = header.sealed == nil
            ? (header.storage == "plaintext" ? FileSealing.chosenPlaintext : FileSealing.plain(""))
            : try await keys.key(for: header.sealed?.key)
        let profiles: [String: StoredProfile]
        do {
            profiles = try StoreFormat.decode(bytes, header: header, path: path, key: sealing.key)
        } catch where error.code == .wrongKey && sealing.reference != nil {
            // The key this process found earlier was replaced in its provider since (a key lost
            // and made anew by another process): look it up once more.
            if let reference = sealing.reference { keys.forget(reference) }
            sealing = try await keys.key(for: header.sealed?.key)
            profiles = try StoreFormat.decode(bytes, header: header, path: path, key: sealing.key)
        }
        // Remembered only when no other load or write began while a provider was asked: what
        // they saw is newer than these bytes.
        if cacheEpoch == epoch { cache = (identity, profiles, sealing) }
        return (profiles, sealing)
    }

    /// How the next save seals: as the file this transaction read is sealed (its key checked with
    /// its provider, and stored again if the provider lost it), else as the store's sealing chooses
    /// for a new (or plain, or set-aside) file. Called holding the file lock.
    private func sealingForSave(read: FileSealing?) async throws(TokenStoreError) -> FileSealing {
        if let sealing = read {
            if sealing.protection.isSealed {
                try await keys.ensureStored(sealing)
                return sealing
            }
            if sealing.isChosenPlaintext, keys.keepsChosenPlaintext { return sealing }
        }
        return try await keys.sealingForNewFile()
    }

    /// The profiles as on disk now (the cache only when the file's identity still matches it);
    /// a corrupt file reads as empty plus the error, so that the
    /// caller's save can replace it (after moving it aside). Every other error is thrown.
    private func readForUpdate() async throws(TokenStoreError) -> ([String: StoredProfile], FileSealing?, TokenStoreError?) {
        do {
            let read = try await currentFile()
            return (read.profiles, read.sealing, nil)
        } catch where error.code == .corrupt || error.code == .keyUnavailable {
            cache = nil
            return ([:], nil, error)
        }
    }

    // MARK: Writing

    /// One `lstat` when the directory exists (the check); `mkdir` first when it does not.
    private func prepareDirectory() throws(TokenStoreError) {
        do {
            try StoreFileSystem.checkStoreDirectory(directory)
        } catch where error.code == .io && error.errno == ENOENT {
            try StoreFileSystem.ensureDirectory(directory)
            try StoreFileSystem.checkStoreDirectory(directory)
        }
    }

    private func write(_ profiles: [String: StoredProfile], sealing: FileSealing, movingAsideCorruptFile: Bool) throws(TokenStoreError) {
        try Telemetry.storeOperation("write", store: "file") { () throws(TokenStoreError) in
            try writeToDisk(profiles, sealing: sealing, movingAsideCorruptFile: movingAsideCorruptFile)
        }
    }

    private func writeToDisk(_ profiles: [String: StoredProfile], sealing: FileSealing, movingAsideCorruptFile: Bool) throws(TokenStoreError) {
        let bytes = try StoreFormat.encode(
            profiles, path: path, key: sealing.key, reference: sealing.reference, chosenPlaintext: sealing.isChosenPlaintext)
        let identity: FileIdentity?
        do {
            if movingAsideCorruptFile, try StoreFileSystem.identity(of: path) != nil {
                _ = try StoreFileSystem.moveAside(path)
            }
            if !sweptTemporaryFiles {
                StoreFileSystem.removeStaleTemporaryFiles(for: path)
                sweptTemporaryFiles = true
            }
            try StoreFileSystem.writeAtomically(bytes, to: path)
            identity = try StoreFileSystem.identity(of: path)
        } catch {
            sweptTemporaryFiles = false  // a temp file of ours may be left: the next write sweeps
            fileWatch.changed(to: nil)  // whatever is on disk now, cached reads must look again
            throw error
        }
        cacheEpoch &+= 1
        if let identity {
            cache = (identity, profiles, sealing)
        }
        fileWatch.changed(to: identity)
    }
}
