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

/// A file-backed `TokenStore`: named profiles, a file each, beside the store's path
/// (docs/storage.md, "Format 2").
///
/// - The store's path holds a small marker; every profile is a file of its own in `<path>.d`, so
///   a token call, a save or a login costs the same with one profile or ten thousand, and
///   processes working on different profiles do not wait for each other. A store written by an
///   older LoginKit (one file holding every profile) is read as it is and migrated in place, at
///   its first save, atomically: a crash leaves the old file or the new store, never a mix. An
///   older LoginKit meeting the new store refuses it as newer and leaves it untouched.
/// - Writes are durable and atomic (temp file, `fsync`, `rename`, directory `fsync`): a crash at any
///   instant leaves a profile's old file or its new one. A transaction over several profiles
///   commits through a journal first.
/// - The directories are created `0700`, the files `0600`; a file that group or others can read, a
///   directory they can write, or either owned by another user is refused with an error that says
///   how to fix it (for a shared directory such as `/tmp`: use a private one). The store's own
///   directory must not be a symbolic link (links higher up its path are followed).
/// - ``withExclusiveAccess(to:_:)`` holds an in-process lock for the profile and advisory
///   `flock`s: `<path>.shared.lock` shared and the profile's own lock exclusive (entered through
///   `<path>.lock`, which a whole-store transaction holds exclusive, so that it is never starved);
///   ``withExclusiveAccess(_:)`` holds `<path>.lock` and `<path>.shared.lock` exclusive. Each
///   re-reads what it changes once it holds them: tasks and processes take turns.
///   Before a refresh, `AuthService` asks it whether a save would go through (room on the file
///   system, a real write and flush of a file the profile's size in its directory): when the new
///   refresh token could not be kept, no refresh is sent.
/// - Reads are served from memory; before a profile is returned the identities (inode, mtime,
///   size) of the store's path and of the profile's file are compared, so a change by another
///   process is noticed. (`AuthService`'s cached path checks at most once per 10 ms: docs/refresh.md.)
/// - Optional AES-256-GCM sealing of every profile file with the store's one key (``StoreSealing``),
///   given, or kept by a ``StoreKeyProvider`` (the Secret Service, the kernel keyring) and named in
///   the files; a profile's name is bound into its seal.
/// - A corrupt file is never silently replaced: reading it throws `.corrupt` naming the path; the
///   next save first moves it aside to `<file>.corrupt-<time>`. A file from a newer LoginKit, one
///   sealed with another key, or one with unsafe permissions is never overwritten.
///
/// Concurrency contract: an actor; use one per store per process (several are safe, just slower,
/// and a change through one reaches `AuthService`'s cached token calls on another within 10 ms).
public actor IDTokenStore: TokenStore {
    /// The store's path: the marker of the store (or, before the first save, its older single file).
    public nonisolated let path: String
    /// `<path>.lock`: entered by every transaction, held exclusive by whole-store ones (and by every
    /// transaction of an older LoginKit).
    package nonisolated let lockPath: String
    /// `<path>.shared.lock`: held shared by per-profile transactions, exclusive by whole-store ones.
    package nonisolated let sharedLockPath: String
    /// `<path>.d`: the profiles' files.
    package nonisolated let profileDirectory: String
    /// Whether saves are sealed for sure: with a key given in code, a key file, the environment,
    /// or a chosen provider. An `.automatic` store tells what it does through ``protection()``.
    package nonisolated let isSealed: Bool
    let keys: StoreKeys
    let directory: String
    /// Whole-store transactions of this process, one at a time.
    nonisolated let processLock = AsyncLock()
    /// Per-profile transactions of this process, one at a time per profile.
    nonisolated let profileLocks = NamedAsyncLocks()
    private nonisolated let interactiveLock = AsyncLock()
    nonisolated let lockTimeout: Duration
    /// The format 1 file as last read.
    var cache: (identity: FileIdentity, profiles: [String: StoredProfile], sealing: FileSealing)?
    /// The format 2 marker as last read.
    var markerCache: (identity: FileIdentity, marker: StoreDirectoryFormat.Marker)?
    /// Format 2 profiles as last read or written, by the identity of their file.
    var profileCache: [String: (identity: FileIdentity, profile: StoredProfile)] = [:]
    /// The journal as last read (by its identity), while one exists.
    var journalCache: (identity: FileIdentity, journal: StoreDirectoryFormat.Journal)?
    /// Moves on with every load that starts and every write: a load that suspended on a key
    /// provider stores what it read only when nothing newer was read or written meanwhile.
    var cacheEpoch: UInt64 = 0
    /// A migration is reading the file: it may read a plain file although the store seals.
    var isMigrating = false
    /// The plain format 2 marker whose sealing this instance settled (a whole-store step), and
    /// when: per-profile saves go on plain without asking again for a minute.
    var settledPlainMarker: (identity: FileIdentity, at: ContinuousClock.Instant)?
    /// Whether this instance swept the temp files crashed writers may have left in the directory.
    var sweptProfileDirectory = false
    /// What ``changeStamp()`` answers from, without a hop onto this actor.
    nonisolated let fileWatch: StoreFileWatch
    /// The watch of each profile a caller asked a stamp for (``changeStampSource(for:)``).
    nonisolated let profileWatches = LockedState<[String: StoreFileWatch]>([:])

    /// A store at `path`, or at the default path when `path` is `nil`: `$LOGINKIT_STORE`, else
    /// `$XDG_STATE_HOME/loginkit/tokens.json`, else `~/.local/state/loginkit/tokens.json`.
    ///
    /// - Parameters:
    ///   - path: the store's path; `nil` for the default path.
    ///   - sealing: how the files are sealed; plain `0600` JSON by default. The environment
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
        self.sharedLockPath = path + ".shared.lock"
        self.profileDirectory = path + ".d"
        self.fileWatch = StoreFileWatch(paths: [path, path + ".d"])
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
        switch try await currentShape() {
        case .missing: return nil
        case .single(let contents): return contents.profiles[name]
        case .directory(let marker): return try await readProfile(name, marker: marker)
        }
    }

    public func profileNames() async throws(TokenStoreError) -> [String] {
        switch try await currentShape() {
        case .missing: return []
        case .single(let contents): return contents.profiles.keys.sorted()
        case .directory: return try readProfileNames().sorted()
        }
    }

    /// The store's format: `nil` before its first save, 1 for a single file (not migrated yet), 2.
    package func formatVersion() async throws(TokenStoreError) -> Int? {
        switch try await currentShape() {
        case .missing: nil
        case .single: 1
        case .directory: StoreDirectoryFormat.version
        }
    }

    /// How the store is protected now: sealed with which key provider or key, or plain and
    /// why; for a store not written yet, and for a plain one that the next save will seal, what
    /// that save will do. May ask a key provider (bounded, never prompts).
    ///
    /// - Throws: `TokenStoreError` when the store cannot be read (`.keyUnavailable`, `.unavailable`…).
    public func protection() async throws(TokenStoreError) -> StoreProtection {
        let current: FileSealing?
        switch try await currentShape() {
        case .missing: current = nil
        case .single(let contents): current = contents.sealing
        case .directory(let marker): current = try await sealing(of: marker)
        }
        var protection: StoreProtection
        if let sealing = current, sealing.protection.isSealed || (sealing.isChosenPlaintext && keys.keepsChosenPlaintext) {
            protection = sealing.protection
        } else {
            let next = await keys.preview()
            protection = next
            if current != nil, next.isSealed {
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
    /// provider or key of your choice. Every profile file is rewritten (each names its key, so a
    /// crash half-way leaves a readable store), then the marker; the key the store was sealed with
    /// before is removed from its provider once all of that is durable. Later saves keep the new
    /// sealing. A single-file store is migrated to format 2 first.
    ///
    /// - Returns: the new protection.
    /// - Throws: `TokenStoreError` `.unavailable` when the target cannot be used (nothing changes),
    ///   and what reading the current store throws.
    public func migrate(to target: StoreSealing) async throws -> StoreProtection {
        try await storeAccess { () async throws -> StoreProtection in
            let state = try await settle(migrating: true)
            try sweepTemporaryFiles()
            var destination = target
            if case .automatic(var automatic) = target {
                automatic.usesExplicitKey = false
                automatic.allowsPlaintextFallback = false
                destination = .automatic(automatic)
            }
            let before: FileSealing?
            let sealing: FileSealing
            switch state {
            case .replaceable(.broken(let error)):
                throw error
            case .replaceable(let replaceable):
                if case .single(let contents, _) = replaceable { before = contents.sealing } else { before = nil }
                sealing = try await keys.choose(destination, forMigration: true)
                let source = if case .single(_, let source) = replaceable { source } else { "" }
                _ = try await migrateToDirectory(replaceable.profiles, sealing: sealing, source: source)
            case .ready(let marker):
                before = try await self.sealing(of: marker)
                sealing = try await keys.choose(destination, forMigration: true)
                try await reseal(marker: marker, with: sealing)
            }
            // Only a key this store made (its id starts with the store's prefix): a copied or
            // edited file must not make us delete another store's key.
            if let old = before?.reference, old != sealing.reference, old.id.hasPrefix(keys.keyIDPrefix) { await keys.removeKey(old) }
            return sealing.protection
        }
    }

    public nonisolated(nonsending) func withExclusiveAccess<T>(
        _ body: (inout TokenStoreTransaction) async throws -> T
    ) async throws -> T {
        try await storeAccess { () async throws -> T in
            switch try await settle(migrating: false) {
            case .ready(let marker):
                return try await wholeStoreTransaction(marker: marker, body)
            case .replaceable(let state):
                return try await replacingTransaction(state, scope: nil, stamped: false, body).result
            }
        }
    }

    /// Runs `body` holding the whole store: this process's whole-store lock, then `<path>.lock` and
    /// `<path>.shared.lock` exclusive (every per-profile transaction has ended, none begins).
    nonisolated(nonsending) func storeAccess<T>(_ body: () async throws -> T) async throws -> T {
        try await processLock.withLock {
            try prepareDirectory()
            let gate = try await FileLock.acquire(lockPath, timeout: lockTimeout, shared: false)
            let shared: FileLock
            do {
                // Holding the turnstile: only per-profile transactions (shared) can hold this one.
                shared = try await FileLock.acquire(
                    sharedLockPath, timeout: lockTimeout, shared: false, heldBy: "transactions on single profiles of this store (saves, refreshes)")
            } catch {
                gate.release()
                throw error
            }
            do {
                let result = try await body()
                shared.release()
                gate.release()
                return result
            } catch {
                shared.release()
                gate.release()
                throw error
            }
        }
    }

    /// The exclusive access to one profile; with `stamped`, also the profile's change stamp read
    /// after the write and before its lock is released. A store that is not ready for it (not in
    /// format 2 yet, a journal to apply, a sealing to settle, or unreadable) is handled holding the
    /// whole store instead.
    package nonisolated(nonsending) func profileAccess<T>(
        to name: String, stamped: Bool, _ body: (inout TokenStoreTransaction) async throws -> T
    ) async throws -> (result: T, stamp: UInt64?) {
        try await profileLocks.withLock(name) {
            try prepareDirectory()
            let gate = try await FileLock.acquire(lockPath, timeout: lockTimeout, shared: true)
            let shared: FileLock
            do {
                shared = try await FileLock.acquire(sharedLockPath, timeout: lockTimeout, shared: true)
                gate.release()
            } catch {
                gate.release()
                throw error
            }
            let ready: StoreDirectoryFormat.Marker?
            do {
                ready = try await readyMarker()
            } catch {
                shared.release()
                throw error
            }
            guard let marker = ready else {
                shared.release()
                return try await storeAccess { () async throws -> (result: T, stamp: UInt64?) in
                    switch try await settle(migrating: false) {
                    case .ready(let marker):
                        // Every per-profile transaction is excluded already.
                        let outcome = try await profileTransaction(name, marker: marker, stamped: false, body)
                        if outcome.wrote { try await sealIfDue(marker) }
                        return (outcome.result, stamped ? profileWatch(for: name).stamp() : nil)
                    case .replaceable(let state):
                        return try await replacingTransaction(state, scope: name, stamped: stamped, body)
                    }
                }
            }
            let lock: FileLock
            do {
                lock = try await FileLock.acquire(try profileLockPath(for: name), timeout: lockTimeout, shared: false)
            } catch {
                shared.release()
                throw error
            }
            do {
                let outcome = try await profileTransaction(name, marker: marker, stamped: stamped, body)
                lock.release()
                shared.release()
                return (outcome.result, outcome.stamp)
            } catch {
                lock.release()
                shared.release()
                throw error
            }
        }
    }

    /// One profile's transaction, holding its locks.
    private nonisolated(nonsending) func profileTransaction<T>(
        _ name: String, marker: StoreDirectoryFormat.Marker, stamped: Bool, _ body: (inout TokenStoreTransaction) async throws -> T
    ) async throws -> (result: T, stamp: UInt64?, wrote: Bool) {
        let (current, recovered) = try await readProfileForUpdate(name, marker: marker)
        var transaction = TokenStoreTransaction(profiles: current.map { [name: $0] } ?? [:], scope: name)
        transaction.recoveredFrom = recovered
        let file = profileFilePath(for: name)
        let store = path
        transaction.saveCheck = { () throws(TokenStoreError) in try StoreFileSystem.checkCanWrite(file, store: store) }
        let result = try await body(&transaction)
        try transaction.checkScope(store: "IDTokenStore")
        let writes = transaction.hasChanges || (recovered != nil && transaction[name] != nil)
        if writes {
            try await saveProfile(name, transaction[name], marker: marker, movingAside: recovered != nil,
                indexedBefore: recovered == nil ? Self.indexedAttributes(of: current) : nil)
        }
        return (result, stamped ? profileWatch(for: name).stamp() : nil, writes)
    }

    /// Runs `body` holding `<path>.login.lock` (waiting at most `timeout`), so that one interactive
    /// login runs at a time across the processes sharing this store; the store's locks stay free.
    public nonisolated(nonsending) func withInteractiveLogin<T>(
        for name: String, timeout: Duration, _ body: () async throws -> T
    ) async throws -> T {
        try await interactiveLock.withLock {
            try prepareDirectory()
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

    /// The watch behind ``changeStampSource(for:)``: the store's path and the profile's file.
    nonisolated func profileWatch(for name: String) -> StoreFileWatch {
        profileWatches.withLock { watches in
            if let watch = watches[name] { return watch }
            let watch = StoreFileWatch(paths: stampPaths(for: name))
            watches[name] = watch
            return watch
        }
    }

    /// What a profile's change stamp follows: the store's path, the profile's file, and the journal
    /// (while one is left by a commit cut short, its entries are the profile).
    package nonisolated func stampPaths(for name: String) -> [String] {
        [path, profileFilePath(for: name), journalPath]
    }

    /// After a write by this store: the stamps of `names` (every profile's when `nil`) and the
    /// store's move on at once.
    func noteWritten(_ names: [String]?) {
        fileWatch.changed()
        let watches = profileWatches.withLock { watches in names.map { $0.compactMap { watches[$0] } } ?? Array(watches.values) }
        for watch in watches { watch.changed() }
    }

    // MARK: Reading

    /// What the format 1 file holds and how it is sealed.
    typealias FileContents = (profiles: [String: StoredProfile], sealing: FileSealing?)

    /// What the store's path holds now.
    enum Shape {
        /// Nothing: no store yet.
        case missing
        /// A format 1 file (every profile in it), not migrated yet.
        case single(FileContents)
        /// A format 2 marker; the profiles are in the directory.
        case directory(StoreDirectoryFormat.Marker)
    }

    /// What the store's path holds, from memory while its identity is the one read before.
    ///
    /// - Throws: `.corrupt` (also for a marker whose directory is gone), `.unsupportedVersion`,
    ///   what opening a format 1 file throws.
    func currentShape() async throws(TokenStoreError) -> Shape {
        guard let identity = try StoreFileSystem.identity(of: path) else {
            cache = nil
            markerCache = nil
            return .missing
        }
        if let cache, cache.identity == identity { return .single((cache.profiles, cache.sealing)) }
        if let markerCache, markerCache.identity == identity { return .directory(markerCache.marker) }
        // Another writer changed the store: cached token calls must not go on serving what this
        // read has just seen replaced (they would, until the watches' next look).
        if cache != nil || markerCache != nil { noteWritten(nil) }
        guard let (readIdentity, bytes) = try StoreFileSystem.readFile(path) else {
            cache = nil
            markerCache = nil
            return .missing
        }
        try StoreFileSystem.checkStoreDirectory(directory)
        let header = try StoreFormat.header(bytes, path: path)
        guard header.version == StoreDirectoryFormat.version else {
            markerCache = nil
            return .single(try await load(identity))
        }
        let marker = try StoreDirectoryFormat.decodeMarker(bytes, path: path)
        do {
            try StoreFileSystem.checkStoreDirectory(profileDirectory, forbiddenBits: 0o077)
        } catch where error.code == .io && error.errno == ENOENT {
            throw TokenStoreError(
                .corrupt, path: path,
                "\(path) is a format 2 store, but its directory \(profileDirectory) is missing; neither is changed — restore the directory, or move \(path) aside to start a new store")
        }
        // A store sealed with a key its user gave reads no plain store: whoever put one there would
        // choose the issuer, endpoints and client its next refresh trusts. `migrate(to:)` alone
        // reads one, to seal it.
        if marker.sealing == nil, keys.sealsWithGivenKey, !isMigrating {
            throw TokenStoreError(
                .corrupt, path: path,
                "\(path) is not sealed, but this store seals with a key; it is not read — it is kept, and the next save moves it aside (to seal an existing plain store, run its migration: `loginkit store migrate`)")
        }
        cache = nil
        markerCache = (readIdentity, marker)
        return .directory(marker)
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

    /// A format 1 file.
    private func loadFromDisk() async throws(TokenStoreError) -> FileContents {
        cacheEpoch &+= 1
        let epoch = cacheEpoch
        guard let (identity, bytes) = try StoreFileSystem.readFile(path) else {
            cache = nil
            return ([:], nil)
        }
        let header = try StoreFormat.header(bytes, path: path)
        guard header.version == 1 else {
            // Migrated by another process while this one looked: read again from the top.
            throw TokenStoreError(.corrupt, path: path, "\(path) changed its format while it was read; try again")
        }
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

    /// How the next save seals: as the store this transaction read is sealed (its key checked with
    /// its provider, and stored again if the provider lost it), else as the store's sealing chooses
    /// for a new (or plain, or set-aside) store. Called holding the store's lock.
    func sealingForSave(read: FileSealing?) async throws(TokenStoreError) -> FileSealing {
        if let sealing = read {
            if sealing.protection.isSealed {
                try await keys.ensureStored(sealing)
                return sealing
            }
            if sealing.isChosenPlaintext, keys.keepsChosenPlaintext { return sealing }
        }
        return try await keys.sealingForNewFile()
    }

    // MARK: Writing

    /// One `lstat` when the directory exists (the check); `mkdir` first when it does not.
    nonisolated func prepareDirectory() throws(TokenStoreError) {
        do {
            try StoreFileSystem.checkStoreDirectory(directory)
        } catch where error.code == .io && error.errno == ENOENT {
            try StoreFileSystem.ensureDirectory(directory)
            try StoreFileSystem.checkStoreDirectory(directory)
        }
    }
}

/// `withExclusiveAccess(to:_:)` locks the one profile (``TokenStore``'s default asks for this).
extension IDTokenStore: ProfileLockingStore {}
