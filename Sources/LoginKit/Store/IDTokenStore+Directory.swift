#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKitHTTP
import LoginKitJOSE
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A store that can name the profiles carrying an attribute without reading every profile.
package protocol AttributeIndexedStore: TokenStore {
    /// The profiles that may carry `attribute` (a superset: check each), sorted; `nil` when the
    /// store keeps no index of it (read every profile).
    func profileNames(carrying attribute: String) async throws -> [String]?
}

/// Format 2: a file per profile (docs/storage.md).
extension IDTokenStore {
    /// The attributes whose profiles the store indexes (`<path>.d/index/<attribute>/`): the
    /// default profile's mark and the hosts the credential helpers serve, which the CLI looks up
    /// on every run.
    static let indexedAttributes = ["default", "docker_registries", "git_hosts"]

    /// The file of profile `name`.
    package nonisolated func profileFilePath(for name: String) -> String {
        profileDirectory + "/p-" + StoreProfileFileName.encode(name) + ".json"
    }

    nonisolated var journalPath: String { profileDirectory + "/journal.json" }

    /// The temp file the marker is written through (swept with the store's other temp files).
    nonisolated var markerTemporaryPath: String {
        directory + "/." + path[path.index(after: path.lastIndex(of: "/") ?? path.startIndex)...] + ".tmp-marker"
    }

    nonisolated func indexDirectory(_ attribute: String) -> String {
        profileDirectory + "/index/" + attribute
    }

    /// The lock file of profile `name` (its directory made again when someone removed it).
    nonisolated func profileLockPath(for name: String) throws(TokenStoreError) -> String {
        let locks = profileDirectory + "/locks"
        if access(locks, F_OK) != 0 { try StoreFileSystem.makeDirectory(locks) }
        return locks + "/p-" + StoreProfileFileName.encode(name) + ".lock"
    }

    // MARK: Reading

    /// The marker, when a per-profile transaction can go ahead under the shared lock: the store is
    /// in format 2, has no journal to replay, its key is at hand, and a plain store's sealing was
    /// settled. `nil`: a whole-store step comes first (``settle(migrating:)``).
    func readyMarker() async throws(TokenStoreError) -> StoreDirectoryFormat.Marker? {
        let shape: Shape
        do {
            shape = try await currentShape()
        } catch where error.code == .corrupt || error.code == .keyUnavailable {
            return nil
        }
        guard case .directory(let marker) = shape, marker.resealing != true else { return nil }
        guard try StoreFileSystem.identity(of: journalPath) == nil else { return nil }
        if marker.sealing != nil {
            do {
                _ = try await sealing(of: marker)
            } catch where error.code == .keyUnavailable {
                return nil
            }
        } else if !plainSettled, !plainStaysPlain(marker) {
            // The store would be sealed now (a keyring became reachable, a key was set): every
            // file is rewritten by a whole-store step that writes. Asking makes no key and never
            // prompts.
            if await keys.preview().isSealed { return nil }
            // Plain it stays, as a new store's sealing decides it: the fallback reported once,
            // refused (`.unavailable`) where it is not allowed; the decision holds for a minute.
            guard try await keys.sealingForNewFile().key == nil else { return nil }
            notePlainSettled(marker)
        }
        return marker
    }

    /// Whether this instance settled the plain store's sealing within the last minute, for the
    /// marker there now.
    private var plainSettled: Bool {
        guard let settled = settledPlainMarker, settled.identity == markerCache?.identity else { return false }
        return ContinuousClock.now < settled.at.advanced(by: .seconds(60))
    }

    /// Whether a plain store stays plain at its next save without asking any key provider: the
    /// store was opened plain, or the store is plain by choice and this store keeps that choice.
    private func plainStaysPlain(_ marker: StoreDirectoryFormat.Marker) -> Bool {
        if case .none = keys.sealing { return true }
        return marker.storage == "plaintext" && keys.keepsChosenPlaintext
    }

    /// How the marker says every file is sealed (the key looked up, from memory after the first time).
    func sealing(of marker: StoreDirectoryFormat.Marker) async throws(TokenStoreError) -> FileSealing {
        guard let sealed = marker.sealing else {
            return marker.storage == "plaintext" ? .chosenPlaintext : .plain("")
        }
        return try await keys.key(for: sealed.key)
    }

    /// The sealing a write uses: the marker's, its key checked with its provider (stored again if
    /// the provider lost it, at most once a minute).
    func sealingForWrite(_ marker: StoreDirectoryFormat.Marker) async throws(TokenStoreError) -> FileSealing {
        let sealing = try await sealing(of: marker)
        if sealing.protection.isSealed { try await keys.ensureStored(sealing) }
        return sealing
    }

    /// The journal while one exists (a multi-profile commit not finished): its entries are the
    /// store's truth for the profiles they name.
    func currentJournal() throws(TokenStoreError) -> StoreDirectoryFormat.Journal? {
        guard let identity = try StoreFileSystem.identity(of: journalPath) else {
            journalCache = nil
            return nil
        }
        if let journalCache, journalCache.identity == identity { return journalCache.journal }
        guard let (readIdentity, bytes) = try StoreFileSystem.readFile(journalPath) else {
            journalCache = nil
            return nil
        }
        let journal = try StoreDirectoryFormat.decodeJournal(bytes, path: journalPath)
        journalCache = (readIdentity, journal)
        return journal
    }

    /// Profile `name` of a format 2 store, from memory while its file's identity is unchanged.
    func readProfile(_ name: String, marker: StoreDirectoryFormat.Marker, readingPlain: Bool = false) async throws(TokenStoreError) -> StoredProfile? {
        if let journal = try currentJournal(), let entry = journal.entries.last(where: { $0.name == name }) {
            guard let document = entry.document else { return nil }
            guard let bytes = Base64URL.decode(document) else {
                throw TokenStoreError(.corrupt, path: journalPath, "\(journalPath) is a damaged commit journal; it is left untouched")
            }
            return try await open(bytes, name: name, marker: marker, path: journalPath, readingPlain: readingPlain)
        }
        let file = profileFilePath(for: name)
        // Another writer changed the file since this store read it: cached token calls must not go
        // on serving what this read has just seen replaced (they would, until the watch's next look).
        guard let identity = try StoreFileSystem.identity(of: file) else {
            if profileCache.removeValue(forKey: name) != nil { noteWritten([name]) }
            return nil
        }
        if let cached = profileCache[name] {
            if cached.identity == identity { return cached.profile }
            noteWritten([name])
        }
        cacheEpoch &+= 1
        let epoch = cacheEpoch
        let started = ContinuousClock.now
        let profile: StoredProfile
        let readIdentity: FileIdentity
        do {
            guard let (identity, bytes) = try StoreFileSystem.readFile(file) else {
                profileCache[name] = nil
                return nil
            }
            readIdentity = identity
            profile = try await open(bytes, name: name, marker: marker, path: file, readingPlain: readingPlain)
            Telemetry.recordStoreOperation("read", store: "file", outcome: "success", since: started)
        } catch {
            Telemetry.recordStoreOperation("read", store: "file", outcome: "failed", since: started)
            throw error
        }
        // Remembered only when no other load or write began while a provider was asked.
        if cacheEpoch == epoch { profileCache[name] = (readIdentity, profile) }
        return profile
    }

    /// A profile file's bytes opened as profile `name`. A plain file in a store that seals is
    /// refused, but for `readingPlain`: the migration that seals a plain store reads it.
    private func open(
        _ bytes: [UInt8], name: String, marker: StoreDirectoryFormat.Marker, path: String, readingPlain: Bool
    ) async throws(TokenStoreError) -> StoredProfile {
        let document = try StoreDirectoryFormat.decodeProfileDocument(bytes, path: path)
        let storeSeals = !readingPlain && marker.resealing != true && (marker.sealing != nil || keys.sealsWithGivenKey)
        guard let sealed = document.sealed else {
            return try StoreDirectoryFormat.openProfile(document, name: name, key: nil, storeSeals: storeSeals, path: path)
        }
        var sealing = try await keys.key(for: sealed.key)
        do {
            return try StoreDirectoryFormat.openProfile(document, name: name, key: sealing.key, storeSeals: storeSeals, path: path)
        } catch where error.code == .wrongKey && sealing.reference != nil {
            // The key this process found earlier was replaced in its provider since: look it up again.
            if let reference = sealing.reference { keys.forget(reference) }
            sealing = try await keys.key(for: sealed.key)
            return try StoreDirectoryFormat.openProfile(document, name: name, key: sealing.key, storeSeals: storeSeals, path: path)
        }
    }

    /// Profile `name` for a transaction that may replace it: a corrupt file (or one whose key is
    /// gone) reads as no profile plus the error, and the save moves it aside first.
    func readProfileForUpdate(_ name: String, marker: StoreDirectoryFormat.Marker) async throws(TokenStoreError) -> (StoredProfile?, TokenStoreError?) {
        do {
            return (try await readProfile(name, marker: marker), nil)
        } catch where error.code == .corrupt || error.code == .keyUnavailable {
            profileCache[name] = nil
            return (nil, error)
        }
    }

    /// The names of a format 2 store's profiles: one `readdir`, plus a read of each file whose
    /// name is too long to be its file name.
    func readProfileNames() throws(TokenStoreError) -> Set<String> {
        var names = Set<String>()
        for entry in try StoreFileSystem.entries(of: profileDirectory) where entry.hasPrefix("p-") && entry.hasSuffix(".json") {
            if let name = name(encoded: String(entry.dropFirst(2).dropLast(5))) { names.insert(name) }
        }
        if let journal = try currentJournal() {
            for entry in journal.entries {
                if entry.document == nil { names.remove(entry.name) } else { names.insert(entry.name) }
            }
        }
        return names
    }

    /// The name an encoded file name stands for; a hashed one is read from its file (`nil` when
    /// that file does not name a profile whose hash it is).
    fileprivate func name(encoded: String) -> String? {
        if let name = StoreProfileFileName.decode(encoded) { return name }
        guard encoded.hasPrefix("~") else { return nil }
        let file = profileDirectory + "/p-" + encoded + ".json"
        guard let bytes = try? StoreFileSystem.readFile(file)?.1,
              let document = try? StoreDirectoryFormat.decodeProfileDocument(bytes, path: file),
              StoreProfileFileName.encode(document.name) == encoded
        else { return nil }
        return document.name
    }

    // MARK: Writing

    /// The indexed attributes `profile` carries.
    static func indexedAttributes(of profile: StoredProfile?) -> [String] {
        guard let profile else { return [] }
        return indexedAttributes.filter { profile.attributes[$0] != nil }
    }

    /// Saves (or, with `nil`, removes) profile `name`, holding its lock and the shared lock.
    /// `indexedBefore`: the indexed attributes of the profile the transaction read (its entries
    /// are the only ones to remove); `nil` when unknown.
    func saveProfile(
        _ name: String, _ profile: StoredProfile?, marker: StoreDirectoryFormat.Marker, movingAside: Bool, indexedBefore: [String]? = nil
    ) async throws(TokenStoreError) {
        let started = ContinuousClock.now
        do {
            if let profile {
                let file = profileFilePath(for: name)
                let sealing = try await sealingForWrite(marker)
                let bytes = try StoreDirectoryFormat.encodeProfile(profile, name: name, sealing: sealing, path: file)
                try writeProfileBytes(name, bytes, attributes: Self.indexedAttributes(of: profile), movingAside: movingAside, indexedBefore: indexedBefore)
                if let identity = try StoreFileSystem.identity(of: file) { profileCache[name] = (identity, profile) }
            } else {
                try removeProfileFile(name, movingAside: movingAside)
                profileCache[name] = nil
            }
            cacheEpoch &+= 1
            noteWritten([name])
            Telemetry.recordStoreOperation("write", store: "file", outcome: "success", since: started)
        } catch {
            profileCache[name] = nil
            cacheEpoch &+= 1
            noteWritten([name])  // whatever is on disk now, cached reads must look again
            Telemetry.recordStoreOperation("write", store: "file", outcome: "failed", since: started)
            throw error
        }
    }

    /// Writes a profile file: its index entries first (made durable when new), the file, then the
    /// entries of attributes it no longer carries removed — the index is never missing a profile.
    /// `indexedBefore`: the attributes whose entries the profile had (`nil`: unknown, every one
    /// is removed that it does not carry).
    func writeProfileBytes(
        _ name: String, _ bytes: [UInt8], attributes: [String], movingAside: Bool, indexedBefore: [String]? = nil
    ) throws(TokenStoreError) {
        let encoded = StoreProfileFileName.encode(name)
        let file = profileDirectory + "/p-" + encoded + ".json"
        if movingAside, try StoreFileSystem.identity(of: file) != nil { _ = try StoreFileSystem.moveAside(file) }
        for attribute in attributes {
            let index = indexDirectory(attribute)
            let entry = index + "/p-" + encoded
            // A missing index directory (removed by hand) is not made again holding this profile
            // alone: readers without it read every profile.
            guard try StoreFileSystem.identity(of: entry) == nil, access(index, F_OK) == 0 else { continue }
            do {
                try StoreFileSystem.writeNewFile([], to: entry)
            } catch where error.errno == EEXIST {}
            try StoreFileSystem.syncDirectory(index)
        }
        try StoreFileSystem.writeAtomically(bytes, to: file, through: profileDirectory + "/.p-" + encoded + ".json.tmp")
        removeIndexEntries(encoded, keeping: attributes, among: indexedBefore)
    }

    /// Removes a profile's file (durably) and its index entries.
    func removeProfileFile(_ name: String, movingAside: Bool) throws(TokenStoreError) {
        let encoded = StoreProfileFileName.encode(name)
        let file = profileDirectory + "/p-" + encoded + ".json"
        if movingAside, try StoreFileSystem.identity(of: file) != nil {
            _ = try StoreFileSystem.moveAside(file)
        } else {
            guard unlink(file) == 0 || errno == ENOENT else { throw StoreFileSystem.ioError("remove", file) }
            try StoreFileSystem.syncDirectory(profileDirectory)
        }
        removeIndexEntries(encoded, keeping: [])
    }

    /// Index entries are a superset: one left by a crash only costs a reader a look.
    private func removeIndexEntries(_ encoded: String, keeping attributes: [String], among candidates: [String]? = nil) {
        for attribute in candidates ?? Self.indexedAttributes where !attributes.contains(attribute) {
            _ = unlink(indexDirectory(attribute) + "/p-" + encoded)
        }
    }

    // MARK: Whole-store steps (holding `<path>.lock` and `<path>.shared.lock` exclusive)

    /// What a whole-store step finds at the store's path.
    enum StoreState {
        /// Format 2, ready for transactions: its journal applied, a plain store's sealing settled.
        case ready(StoreDirectoryFormat.Marker)
        /// Anything else: a transaction runs on what it holds, and a write replaces it with a
        /// format 2 store (``replaceStore(_:with:)``).
        case replaceable(Replaceable)
    }

    enum Replaceable {
        /// A format 1 file, and the SHA-256 (hex) of its bytes.
        case single(FileContents, source: String)
        case missing
        /// A store that cannot be read (corrupt, or its key gone): read as empty, moved aside by a write.
        case broken(TokenStoreError)

        var profiles: [String: StoredProfile] {
            if case .single(let contents, _) = self { return contents.profiles }
            return [:]
        }

        var recovered: TokenStoreError? {
            if case .broken(let error) = self { return error }
            return nil
        }
    }

    /// What the store is, after applying a journal and settling a plain store's sealing; nothing
    /// is migrated or moved aside here — only a transaction that writes does that.
    func settle(migrating: Bool) async throws(TokenStoreError) -> StoreState {
        let wasMigrating = isMigrating
        isMigrating = migrating || wasMigrating
        defer { isMigrating = wasMigrating }
        let shape: Shape
        do {
            shape = try await currentShape()
        } catch where error.code == .corrupt || error.code == .keyUnavailable {
            // A marker whose directory is gone is never replaced by an empty store.
            if try StoreFileSystem.identity(of: profileDirectory) == nil, isMarker(path) { throw error }
            return .replaceable(.broken(error))
        }
        switch shape {
        case .missing:
            return .replaceable(.missing)
        case .single(let contents):
            return .replaceable(.single(contents, source: try sourceDigest()))
        case .directory(let marker):
            if marker.sealing != nil {
                do {
                    _ = try await sealing(of: marker)
                } catch where error.code == .keyUnavailable {
                    return .replaceable(.broken(error))
                }
            }
            if let journal = try currentJournal() { try replay(journal) }
            if marker.resealing == true {
                // A change of sealing cut short: finished with the marker's own key.
                return .ready(try await reseal(marker: marker, with: try await sealing(of: marker)))
            }
            return .ready(marker)
        }
    }

    /// After a transaction that wrote to a plain store (holding the whole store): every file is
    /// sealed when the store's sealing chooses a key now (a keyring became reachable, a key was
    /// given). Only a write does this — a transaction that only reads makes no key.
    func sealIfDue(_ marker: StoreDirectoryFormat.Marker) async throws(TokenStoreError) {
        guard marker.sealing == nil, !plainStaysPlain(marker) else { return }
        let current = try await sealing(of: marker)
        let next = try await sealingForSave(read: current)
        guard next.key != nil || next.isChosenPlaintext != current.isChosenPlaintext else {
            notePlainSettled(marker)
            return
        }
        try await reseal(marker: marker, with: next)
    }

    /// A plain store's sealing was settled now: per-profile saves of this instance go on plain
    /// without asking again for a minute, while the marker is the one settled.
    func notePlainSettled(_ marker: StoreDirectoryFormat.Marker) {
        guard marker.sealing == nil, let identity = markerCache?.identity else { return }
        settledPlainMarker = (identity, .now)
    }

    /// The hex SHA-256 of the format 1 file's bytes: which file a migrated directory was made from.
    private func sourceDigest() throws(TokenStoreError) -> String {
        let bytes = try StoreFileSystem.readFile(path)?.1 ?? []
        let digest = (try? MessageDigest.sha256(bytes)) ?? []
        return digest.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    /// Writes `profiles` as a format 2 store in place of what `state` found: a format 1 file
    /// migrated (sealed as it was), a new store, or — for a broken one — the old store and its
    /// directory moved aside first.
    func replaceStore(_ state: Replaceable, with profiles: [String: StoredProfile]) async throws(TokenStoreError) {
        switch state {
        case .single(let contents, let source):
            _ = try await migrateToDirectory(profiles, sealing: try await sealingForSave(read: contents.sealing), source: source)
        case .missing:
            _ = try await migrateToDirectory(profiles, sealing: try await keys.sealingForNewFile(), source: "", operation: "write")
        case .broken:
            try moveStoreAside()
            _ = try await migrateToDirectory(profiles, sealing: try await keys.sealingForNewFile(), source: "", operation: "write")
        }
    }

    /// A transaction over a store that is not in format 2 (or cannot be read), holding the whole
    /// store: `body` sees what it holds (one profile of it with `name`), and only a change writes —
    /// then the store is replaced by a format 2 one. A transaction that only reads changes nothing.
    nonisolated(nonsending) func replacingTransaction<T>(
        _ state: Replaceable, scope name: String?, stamped: Bool, _ body: (inout TokenStoreTransaction) async throws -> T
    ) async throws -> (result: T, stamp: UInt64?) {
        let base = state.profiles
        var transaction = name.map { name in TokenStoreTransaction(profiles: base[name].map { [name: $0] } ?? [:], scope: name) }
            ?? TokenStoreTransaction(profiles: base)
        transaction.recoveredFrom = state.recovered
        let path = self.path
        // A write migrates: a file per profile (and index entries) where one file was.
        let files = base.count + 1
        transaction.saveCheck = { () throws(TokenStoreError) in try StoreFileSystem.checkCanWrite(path, files: files) }
        let result = try await body(&transaction)
        try transaction.checkScope(store: "IDTokenStore")
        if transaction.hasChanges || (state.recovered != nil && !transaction.profiles.isEmpty) {
            var profiles = base
            if let name { profiles[name] = transaction[name] } else { profiles = transaction.profiles }
            try await replaceStore(state, with: profiles)
        }
        return (result, stamped ? name.map { profileWatch(for: $0).stamp() } : nil)
    }

    /// Removes the temp files crashed writers may have left beside the store and in its directory
    /// (a save check's, whose name is random), once per store instance: one `readdir` of the
    /// directory, so only whole-store steps do it, never a per-profile save.
    func sweepTemporaryFiles() throws(TokenStoreError) {
        guard !sweptProfileDirectory else { return }
        StoreFileSystem.removeStaleTemporaryFiles(for: path)
        for entry in try StoreFileSystem.entries(of: profileDirectory) where entry.hasPrefix(".") && entry.contains(".tmp") {
            _ = unlink(profileDirectory + "/" + entry)
        }
        sweptProfileDirectory = true
    }

    /// Whether the file at `file` has a format 2 header.
    private nonisolated func isMarker(_ file: String) -> Bool {
        guard let bytes = try? StoreFileSystem.readFile(file)?.1, let header = try? StoreFormat.header(bytes, path: file) else { return false }
        return header.version == StoreDirectoryFormat.version
    }

    /// Moves the store's path and its directory aside (`.corrupt-<time>`), so that nothing of them
    /// is lost when a new store takes their place (a crash between the two leaves a directory no
    /// marker names, which the next migration moves aside too).
    private func moveStoreAside() throws(TokenStoreError) {
        if try StoreFileSystem.identity(of: path) != nil { _ = try StoreFileSystem.moveAside(path) }
        if try StoreFileSystem.identity(of: profileDirectory) != nil { _ = try StoreFileSystem.moveAside(profileDirectory) }
        cache = nil
        markerCache = nil
        profileCache = [:]
        journalCache = nil
        cacheEpoch &+= 1
        noteWritten(nil)
    }

    /// Writes `profiles` as a format 2 store in place of the format 1 file (or of nothing): a new
    /// directory under a temporary name, flushed, renamed into place; then the marker over the
    /// store's path — the commit point. A crash before it leaves the old file untouched (and
    /// leftovers the next attempt removes); after it, the new store complete. `source` names the
    /// format 1 file's bytes (empty: none): a directory a crashed migration of those same bytes
    /// left is removed, any other directory no marker names is moved aside, never deleted.
    /// Recorded as the store operation `operation` (`migrate`; `write` when it makes a new store).
    func migrateToDirectory(
        _ profiles: [String: StoredProfile], sealing: FileSealing, source: String, operation: String = "migrate"
    ) async throws(TokenStoreError) -> StoreDirectoryFormat.Marker {
        let started = ContinuousClock.now
        let base = String(profileDirectory[profileDirectory.index(after: profileDirectory.lastIndex(of: "/") ?? profileDirectory.startIndex)...])
        // Nothing names these while the store's path is not a marker: leftovers of a crashed migration.
        for entry in try StoreFileSystem.entries(of: directory) where entry.hasPrefix(base + ".migrating-") {
            try StoreFileSystem.removeTree(directory + "/" + entry)
        }
        if try StoreFileSystem.identity(of: profileDirectory) != nil {
            let made = (try? StoreFileSystem.readFile(profileDirectory + "/.source")?.1).map { String(decoding: $0, as: UTF8.self) }
            if !source.isEmpty, made == source {
                try StoreFileSystem.removeTree(profileDirectory)
            } else {
                _ = try StoreFileSystem.moveAside(profileDirectory)
            }
        }
        StoreFileSystem.removeStaleTemporaryFiles(for: path)

        let staging = profileDirectory + ".migrating-" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
        try StoreFileSystem.makeDirectory(staging)
        try StoreFileSystem.makeDirectory(staging + "/locks")
        try StoreFileSystem.makeDirectory(staging + "/index")
        for attribute in Self.indexedAttributes { try StoreFileSystem.makeDirectory(staging + "/index/" + attribute) }
        try StoreFileSystem.writeNewFile(Array(source.utf8), to: staging + "/.source")
        Self.reach(.directoryCreated, in: path)
        var written = 0
        for (name, profile) in profiles.sorted(by: { $0.key < $1.key }) {
            let encoded = StoreProfileFileName.encode(name)
            let bytes = try StoreDirectoryFormat.encodeProfile(profile, name: name, sealing: sealing, path: profileFilePath(for: name))
            try StoreFileSystem.writeNewFile(bytes, to: staging + "/p-" + encoded + ".json")
            for attribute in Self.indexedAttributes(of: profile) {
                try StoreFileSystem.writeNewFile([], to: staging + "/index/" + attribute + "/p-" + encoded)
            }
            written += 1
            Self.reach(.profileWritten(written), in: path)
        }
        try StoreFileSystem.syncFileSystem(of: staging)
        for subdirectory in ["/locks", "/index"] + Self.indexedAttributes.map({ "/index/" + $0 }) {
            try StoreFileSystem.syncDirectory(staging + subdirectory)
        }
        guard rename(staging, profileDirectory) == 0 else { throw StoreFileSystem.ioError("rename", staging) }
        try StoreFileSystem.syncDirectory(directory)
        Self.reach(.directoryRenamed, in: path)

        let marker = StoreDirectoryFormat.marker(for: sealing)
        try StoreFileSystem.writeAtomically(
            try StoreDirectoryFormat.encode(marker, path: path), to: path, through: markerTemporaryPath,
            beforeRename: { Self.reach(.markerWritten, in: path) })
        Self.reach(.markerRenamed, in: path)
        // The directory is the store's now: no later format 1 file (a restored backup) may name it
        // as a leftover of its own migration.
        if unlink(profileDirectory + "/.source") == 0 { try StoreFileSystem.syncDirectory(profileDirectory) }
        keys.remember(sealing)
        cache = nil
        profileCache = [:]
        journalCache = nil
        cacheEpoch &+= 1
        markerCache = try StoreFileSystem.identity(of: path).map { ($0, marker) }
        notePlainSettled(marker)
        noteWritten(nil)
        Telemetry.recordStoreOperation(operation, store: "file", outcome: "success", since: started)
        return marker
    }

    /// Rewrites every readable profile sealed with `sealing`, and the marker. The new marker is
    /// written first, marked `resealing` (the commit point: the store's sealing is the new one, and
    /// every reader opens either kind of file meanwhile — each sealed file names its key), then
    /// every file, then the marker without the mark. A crash half-way leaves every file readable,
    /// and the next whole-store step finishes the rewrite with the marker's key (no second key
    /// is made). A file that cannot be read is left as it is.
    @discardableResult
    func reseal(marker: StoreDirectoryFormat.Marker, with sealing: FileSealing) async throws(TokenStoreError) -> StoreDirectoryFormat.Marker {
        let next = StoreDirectoryFormat.marker(for: sealing)
        var profiles: [(String, StoredProfile)] = []
        for name in try readProfileNames().sorted() {
            do {
                if let profile = try await readProfile(name, marker: marker, readingPlain: marker.sealing == nil || marker.resealing == true) { profiles.append((name, profile)) }
            } catch where error.code == .corrupt || error.code == .keyUnavailable || error.code == .wrongKey {
                continue
            }
        }
        var resealing = next
        resealing.resealing = true
        try writeMarker(resealing)
        for (name, profile) in profiles {
            let bytes = try StoreDirectoryFormat.encodeProfile(profile, name: name, sealing: sealing, path: profileFilePath(for: name))
            try writeProfileBytes(name, bytes, attributes: Self.indexedAttributes(of: profile), movingAside: false)
        }
        try writeMarker(next)
        keys.remember(sealing)
        profileCache = [:]
        cacheEpoch &+= 1
        noteWritten(nil)
        return next
    }

    /// Replaces the marker (durably) and remembers it.
    private func writeMarker(_ marker: StoreDirectoryFormat.Marker) throws(TokenStoreError) {
        try StoreFileSystem.writeAtomically(try StoreDirectoryFormat.encode(marker, path: path), to: path, through: markerTemporaryPath)
        markerCache = try StoreFileSystem.identity(of: path).map { ($0, marker) }
    }

    /// A whole-store transaction over a format 2 store: every profile read, `body`, and the
    /// changes committed — one profile's directly, several through the journal.
    nonisolated(nonsending) func wholeStoreTransaction<T>(
        marker: StoreDirectoryFormat.Marker, _ body: (inout TokenStoreTransaction) async throws -> T
    ) async throws -> T {
        try await sweepTemporaryFiles()
        let (profiles, unreadable, recovered) = try await readAllProfilesForUpdate(marker)
        var transaction = TokenStoreTransaction(profiles: profiles)
        transaction.recoveredFrom = recovered
        let path = self.path
        transaction.saveCheck = { () throws(TokenStoreError) in try StoreFileSystem.checkCanWrite(path) }
        let result = try await body(&transaction)
        let changed = transaction.changedNames
        if !changed.isEmpty {
            try await commit(changed.map { ($0, transaction[$0]) }, marker: marker, unreadable: unreadable)
            try await sealIfDue(marker)
        }
        return result
    }

    /// Every profile; those that cannot be read are left out, named, with the first such error.
    private func readAllProfilesForUpdate(_ marker: StoreDirectoryFormat.Marker) async throws(TokenStoreError) -> ([String: StoredProfile], Set<String>, TokenStoreError?) {
        var recovered: TokenStoreError?
        var profiles: [String: StoredProfile] = [:]
        var unreadable = Set<String>()
        for name in try readProfileNames() {
            do {
                if let profile = try await readProfile(name, marker: marker) { profiles[name] = profile }
            } catch where error.code == .corrupt || error.code == .keyUnavailable {
                unreadable.insert(name)
                recovered = recovered ?? error
            }
        }
        return (profiles, unreadable, recovered)
    }

    /// Commits changed profiles: one directly; several through the journal (durable first, then
    /// applied, then removed), so that a crash leaves all of them changed or — until the next
    /// writer replays the journal, which readers already follow — none.
    private func commit(_ changes: [(String, StoredProfile?)], marker: StoreDirectoryFormat.Marker, unreadable: Set<String>) async throws(TokenStoreError) {
        if changes.count == 1, let (name, profile) = changes.first {
            try await saveProfile(name, profile, marker: marker, movingAside: unreadable.contains(name))
            return
        }
        let sealing = try await sealingForWrite(marker)
        var entries: [StoreDirectoryFormat.Journal.Entry] = []
        for (name, profile) in changes {
            let document = try profile.map { profile throws(TokenStoreError) in
                Base64URL.encode(try StoreDirectoryFormat.encodeProfile(profile, name: name, sealing: sealing, path: profileFilePath(for: name)))
            }
            entries.append(.init(name: name, document: document, attributes: Self.indexedAttributes(of: profile)))
        }
        let journal = StoreDirectoryFormat.Journal(entries: entries)
        do {
            try StoreFileSystem.writeAtomically(
                try StoreDirectoryFormat.encode(journal, path: journalPath), to: journalPath, through: profileDirectory + "/.journal.json.tmp")
            try replay(journal, movingAside: unreadable)
        } catch {
            profileCache = [:]
            journalCache = nil
            cacheEpoch &+= 1
            noteWritten(nil)
            throw error
        }
    }

    /// Applies a journal's entries, then removes it.
    /// Every entry is checked before anything is written: a document that is not a profile file
    /// of the entry's name refuses the whole journal (left untouched). A file the commit would have
    /// moved aside (unreadable) is moved aside, as by the commit.
    private func replay(_ journal: StoreDirectoryFormat.Journal, movingAside unreadable: Set<String> = []) throws(TokenStoreError) {
        var checked: [(name: String, bytes: [UInt8]?, attributes: [String])] = []
        for entry in journal.entries {
            var bytes: [UInt8]?
            if let document = entry.document {
                guard let decoded = Base64URL.decode(document),
                      (try? StoreDirectoryFormat.decodeProfileDocument(decoded, path: journalPath))?.name == entry.name
                else {
                    throw TokenStoreError(.corrupt, path: journalPath, "\(journalPath) is a damaged commit journal; it is left untouched")
                }
                bytes = decoded
            }
            checked.append((entry.name, bytes, entry.attributes.filter(Self.indexedAttributes.contains)))
        }
        for entry in checked {
            let file = profileFilePath(for: entry.name)
            let damaged = unreadable.contains(entry.name) || ((try? StoreFileSystem.readFile(file)).flatMap { $0 }.map { read in
                (try? StoreDirectoryFormat.decodeProfileDocument(read.1, path: file))?.name != entry.name
            } ?? false)
            if let bytes = entry.bytes {
                try writeProfileBytes(entry.name, bytes, attributes: entry.attributes, movingAside: damaged)
            } else {
                try removeProfileFile(entry.name, movingAside: damaged)
            }
            profileCache[entry.name] = nil
        }
        guard unlink(journalPath) == 0 || errno == ENOENT else { throw StoreFileSystem.ioError("remove", journalPath) }
        try StoreFileSystem.syncDirectory(profileDirectory)
        journalCache = nil
        cacheEpoch &+= 1
        noteWritten(journal.entries.map(\.name))
    }

    // MARK: Migration steps, for tests

    private static let migrationHooks = LockedState<[String: @Sendable (StoreMigrationStep) -> Void]>([:])

    /// For tests: runs `hook` at each step of migrating the store at `path` (`nil` removes it).
    package static func onMigrationStep(in path: String, _ hook: (@Sendable (StoreMigrationStep) -> Void)?) {
        migrationHooks.withLock { $0[path] = hook }
    }

    private static func reach(_ step: StoreMigrationStep, in path: String) {
        let hook = migrationHooks.withLock { $0.isEmpty ? nil : $0[path] }
        hook?(step)
    }
}

extension IDTokenStore: AttributeIndexedStore {
    /// From the index of a format 2 store (`nil` for a format 1 store and for an attribute not indexed).
    package func profileNames(carrying attribute: String) async throws -> [String]? {
        guard Self.indexedAttributes.contains(attribute), case .directory = try await currentShape() else { return nil }
        let index = indexDirectory(attribute)
        guard access(index, F_OK) == 0 else { return nil }
        var names = Set<String>()
        for entry in try StoreFileSystem.entries(of: index) where entry.hasPrefix("p-") {
            if let name = name(encoded: String(entry.dropFirst(2))) { names.insert(name) }
        }
        if let journal = try currentJournal() {
            for entry in journal.entries where entry.attributes.contains(attribute) { names.insert(entry.name) }
        }
        return names.sorted()
    }
}
