import Foundation
@testable import LoginKit
import LoginKitHTTP
import LoginKitJOSE
import LoginKitTestSupport
import Testing

/// The file store's format 2 where a store is damaged, unreadable, half-migrated or half-resealed,
/// or planted with files: nothing is lost, nothing is written outside the store, a read changes nothing.
@Suite(.timeLimit(.minutes(2)))
struct StoreDirectoryRecoveryTests {
    /// A profile directory no marker names (the marker moved aside by hand, or a crash between the
    /// two renames that set a broken store aside) is moved aside by the next migration, never deleted.
    @Test func aDirectoryNoMarkerNamesIsKeptNotDeleted() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            try await IDTokenStore(path: path).save(sampleProfile(1), as: "a")
            #expect(rename(path, path + ".corrupt-1-0") == 0)
            try await IDTokenStore(path: path).save(sampleProfile(2), as: "b")
            #expect(try !entriesBelow(directory, containing: "p-a.json").isEmpty, "profile a's file is kept aside")
            #expect(try await IDTokenStore(path: path).profileNames() == ["b"])
        }
    }

    /// A transaction that only reads a store it cannot open (its key gone) changes nothing: the
    /// store is moved aside only by a save, as format 1 did. A sealing migration of it fails.
    @Test func aReadOnlyTransactionOnAnUnreadableStoreChangesNothing() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let provider = MemoryKeyProvider()
            try await IDTokenStore(path: path, sealing: .provider(provider)).save(sampleProfile(1), as: "default")
            let before = try storeFiles(at: path)
            provider.loseAllKeys()
            let store = try IDTokenStore(path: path, sealing: .provider(provider))
            let recovered = try await store.withExclusiveAccess(to: "default") { transaction in
                #expect(transaction["default"] == nil)
                return transaction.recoveredFrom?.code
            }
            #expect(recovered == .keyUnavailable)
            _ = try await store.withExclusiveAccess { _ in }
            #expect(try storeFiles(at: path) == before)
            #expect(try entriesBelow(directory, containing: ".corrupt-").isEmpty)
            let error = await thrown { _ = try await store.migrate(to: .none) } as? TokenStoreError
            #expect(error?.code == .keyUnavailable)
            #expect(try storeFiles(at: path) == before)
            // A save starts over, keeping the old store aside.
            try await store.save(sampleProfile(2), as: "default")
            #expect(try await store.profile(named: "default") == sampleProfile(2))
            #expect(try !entriesBelow(directory, containing: ".corrupt-").isEmpty)
        }
    }

    /// A read-only transaction does not migrate a format 1 store (an older LoginKit sharing it
    /// goes on reading it); a save does.
    @Test func onlyASaveMigratesAFormatOneStore() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            try await IDTokenStore(path: path).save(sampleProfile(1), as: "a")
            // Back to format 1: the profile as one file, written by hand.
            let profile = try #require(try await IDTokenStore(path: path).profile(named: "a"))
            try FileManager.default.removeItem(atPath: path + ".d")
            try FileManager.default.removeItem(atPath: path)
            let encoder = JSONEncoder()
            encoder.dateEncodingStrategy = .secondsSince1970
            let profiles = try JSONSerialization.jsonObject(with: encoder.encode(["a": profile]))
            let document = try JSONSerialization.data(withJSONObject: ["format": "loginkit.tokens", "version": 1, "profiles": profiles])
            #expect(FileManager.default.createFile(atPath: path, contents: document, attributes: [.posixPermissions: 0o600]))
            let store = try IDTokenStore(path: path)
            #expect(try await store.withExclusiveAccess(to: "a") { $0["a"] } == profile)
            #expect(try await store.withExclusiveAccess { $0.profiles.count } == 1)
            #expect(try await store.formatVersion() == 1)
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == document)
            try await store.save(sampleProfile(2), as: "b")
            #expect(try await store.formatVersion() == 2)
            #expect(try await IDTokenStore(path: path).profile(named: "a") == profile)
        }
    }

    /// An index directory removed by hand is not made again holding one profile: readers then
    /// read every profile (`nil`), and never miss one.
    @Test func aMissingIndexIsNotMadeAgainIncomplete() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let store = try IDTokenStore(path: path)
            var hosts = sampleProfile(1)
            hosts.attributes["git_hosts"] = "example.com=me"
            try await store.save(hosts, as: "a")
            #expect(try await store.profileNames(carrying: "git_hosts") == ["a"])
            try FileManager.default.removeItem(atPath: path + ".d/index/git_hosts")
            try await store.save(hosts, as: "c")
            #expect(try await store.profileNames(carrying: "git_hosts") == nil)
        }
    }

    /// A journal's entries are checked before anything is written: an attribute that is not an
    /// indexed one never becomes a path.
    @Test func aJournalEntryCannotWriteOutsideTheStore() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let store = try IDTokenStore(path: path)
            try await store.save(sampleProfile(1), as: "b")
            let document = try Data(contentsOf: URL(fileURLWithPath: store.profileFilePath(for: "b")))
            let journal: [String: Any] = [
                "format": "loginkit.journal", "version": 2,
                "entries": [["name": "b", "document": Base64URL.encode(Array(document)), "attributes": ["../../escape"]]],
            ]
            #expect(FileManager.default.createFile(
                atPath: path + ".d/journal.json", contents: try JSONSerialization.data(withJSONObject: journal), attributes: [.posixPermissions: 0o600]))
            try await IDTokenStore(path: path).save(sampleProfile(2), as: "a")
            #expect(!FileManager.default.fileExists(atPath: directory + "/escape"))
            #expect(!FileManager.default.fileExists(atPath: path + ".d/journal.json"), "the journal was applied")
            #expect(try await IDTokenStore(path: path).profile(named: "b") == sampleProfile(1))
        }
    }

    /// A journal left by a commit cut short moves the stamps of the profiles it names at once.
    @Test func aLeftJournalIsFollowedByTheStamps() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let store = try IDTokenStore(path: path)
            try await store.save(sampleProfile(1), as: "a")
            let watch = StoreFileWatch(paths: store.stampPaths(for: "a"), recheckInterval: 0)
            let before = watch.stamp()
            let journal: [String: Any] = ["format": "loginkit.journal", "version": 2, "entries": [["name": "a", "attributes": [String]()]]]
            #expect(FileManager.default.createFile(
                atPath: path + ".d/journal.json", contents: try JSONSerialization.data(withJSONObject: journal), attributes: [.posixPermissions: 0o600]))
            #expect(watch.stamp() != before)
            #expect(try await IDTokenStore(path: path).profile(named: "a") == nil, "readers follow the journal")
        }
    }

    /// A marker naming a sealing this LoginKit does not know is a newer store: refused as such,
    /// nothing moved aside.
    @Test func aMarkerOfAnUnknownSealingIsNewerNotCorrupt() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            try await IDTokenStore(path: path).save(sampleProfile(1), as: "a")
            let marker = #"{"format":"loginkit.tokens","version":2,"layout":"directory","sealing":{"alg":"XC20P"}}"#
            try Data(marker.utf8).write(to: URL(fileURLWithPath: path))
            let store = try IDTokenStore(path: path)
            let error = await thrown { try await store.save(sampleProfile(2), as: "a") } as? TokenStoreError
            #expect(error?.code == .unsupportedVersion)
            #expect(try filesSetAside(in: directory).isEmpty)
        }
    }

    /// Profile names are file names: a profile directory others can list is refused.
    @Test func aProfileDirectoryOthersCanReadIsRefused() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            try await IDTokenStore(path: path).save(sampleProfile(1), as: "alice@example.com")
            #expect(chmod(path + ".d", 0o755) == 0)
            let error = await thrown { try await IDTokenStore(path: path).profile(named: "alice@example.com") } as? TokenStoreError
            #expect(error?.code == .insecurePermissions)
            #expect(error?.message.contains("chmod 700") == true)
        }
    }

    @Test func theEmptyNameIsAProfileLikeAnyOther() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            try await IDTokenStore(path: path).save(sampleProfile(1), as: "")
            let store = try IDTokenStore(path: path)
            #expect(try await store.profileNames() == [""])
            #expect(try await store.withExclusiveAccess { $0.profiles.keys.sorted() } == [""])
        }
    }

    /// A whole-store transaction waiting for single-profile ones says so when it times out, not
    /// which process last held a lock (shared holders record none).
    @Test func aWaitForSingleProfileTransactionsNamesThem() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let store = try IDTokenStore(path: path, lockTimeout: .milliseconds(100))
            try await store.save(sampleProfile(1), as: "a")
            let descriptor = open(path + ".shared.lock", O_RDWR | O_CLOEXEC)
            try #require(descriptor >= 0)
            defer { close(descriptor) }
            _ = Array("999999\n".utf8).withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
            try #require(flock(descriptor, LOCK_SH) == 0)
            let error = await thrown { try await store.withExclusiveAccess { _ in } } as? TokenStoreError
            #expect(error?.code == .lockTimedOut)
            #expect(error?.message.contains("999999") == false)
            #expect(error?.message.contains("single profiles") == true)
        }
    }

    // MARK: Sealing, migration leftovers, newer files

    /// A plain store opened `.automatic` without a usable keyring and without the plaintext
    /// fallback refuses a save (`.unavailable`), writing nothing, as a new store does; with the
    /// fallback it reports it once, and asks the keyrings once a minute, not at every save.
    @Test func aPlainStoreSavedThroughAutomaticSealingDecidesAsANewStoreDoes() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            try await IDTokenStore(path: path).save(sampleProfile(1), as: "a")
            let before = try storeFiles(at: path)
            let off = MemoryKeyProvider()
            off.isAvailable = false
            let strict = try IDTokenStore(
                path: path, sealing: .automatic(AutomaticSealing(providers: [off], usesExplicitKey: false, allowsPlaintextFallback: false)))
            let error = await thrown { try await strict.save(sampleProfile(2), as: "a") } as? TokenStoreError
            #expect(error?.code == .unavailable)
            #expect(try storeFiles(at: path) == before)

            let reports = LockedState<Int>(0)
            let lenient = try IDTokenStore(
                path: path, sealing: .automatic(AutomaticSealing(providers: [off], usesExplicitKey: false, onPlaintextFallback: { _ in reports.withLock { $0 += 1 } })))
            for counter in 3...5 { try await lenient.save(sampleProfile(counter), as: "a") }
            #expect(reports.withLock { $0 } == 1)
            #expect(try await lenient.profile(named: "a") == sampleProfile(5))
        }
    }

    /// A transaction that only reads makes no key and rewrites nothing, though a keyring became
    /// usable for a plain store; the next save seals every file.
    @Test func onlyAWriteSealsAPlainStoreWhoseKeyringBecameUsable() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let provider = MemoryKeyProvider()
            provider.isAvailable = false
            let sealing = StoreSealing.automatic(AutomaticSealing(providers: [provider], usesExplicitKey: false))
            try await IDTokenStore(path: path, sealing: sealing).save(sampleProfile(1), as: "a")
            try await IDTokenStore(path: path, sealing: sealing).save(sampleProfile(2), as: "b")
            let before = try storeFiles(at: path)
            provider.isAvailable = true
            let store = try IDTokenStore(path: path, sealing: sealing)
            #expect(try await store.withExclusiveAccess(to: "a") { $0["a"] } == sampleProfile(1))
            #expect(provider.ids.isEmpty, "no key made")
            #expect(try storeFiles(at: path) == before)
            try await store.save(sampleProfile(3), as: "a")
            #expect(provider.ids.count == 1)
            #expect(try storeIsSealed(at: path))
            #expect(!(try storeText(at: path)).contains("refresh-secret"))
            #expect(try await IDTokenStore(path: path, sealing: sealing).profile(named: "b") == sampleProfile(2))
        }
    }

    /// A migrated store's directory never names the format 1 file it was made from: a backup of
    /// that file put back later is migrated anew, and the directory — with every profile saved
    /// since — is kept aside, not taken for a leftover and deleted.
    @Test func aRestoredFormatOneFileNeverDeletesTheStoreItWasMigratedTo() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let encoder = JSONEncoder()
            encoder.dateEncodingStrategy = .secondsSince1970
            let profiles = try JSONSerialization.jsonObject(with: encoder.encode(["a": sampleProfile(1)]))
            let backup = try JSONSerialization.data(withJSONObject: ["format": "loginkit.tokens", "version": 1, "profiles": profiles])
            #expect(FileManager.default.createFile(atPath: path, contents: backup, attributes: [.posixPermissions: 0o600]))
            try await IDTokenStore(path: path).save(sampleProfile(2), as: "b")  // migrates
            try await IDTokenStore(path: path).save(sampleProfile(3), as: "c")
            try backup.write(to: URL(fileURLWithPath: path))
            try await IDTokenStore(path: path).save(sampleProfile(4), as: "d")
            #expect(try !entriesBelow(directory, containing: "p-c.json").isEmpty, "profile c, saved after the migration, is kept")
        }
    }

    /// A journal of a newer LoginKit is refused as newer, not as damaged.
    @Test func aNewerJournalIsRefusedAsNewer() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            try await IDTokenStore(path: path).save(sampleProfile(1), as: "a")
            #expect(FileManager.default.createFile(
                atPath: path + ".d/journal.json", contents: Data(#"{"format":"loginkit.journal","version":3,"entries":[]}"#.utf8),
                attributes: [.posixPermissions: 0o600]))
            let error = await thrown { try await IDTokenStore(path: path).profile(named: "a") } as? TokenStoreError
            #expect(error?.code == .unsupportedVersion)
        }
    }

    /// A change of sealing cut short (here: a plain store being sealed with a key, the marker
    /// already saying so, one file of two rewritten) leaves every profile readable by a store with
    /// that key, and the next save finishes the rewrite — nothing set aside, nothing lost.
    @Test func aResealCutShortIsFinishedNotSetAside() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            try await IDTokenStore(path: path).save(sampleProfile(1), as: "a")
            try await IDTokenStore(path: path).save(sampleProfile(2), as: "b")
            let key = try SymmetricKey.random()
            let store = try IDTokenStore(path: path, sealing: .key(key))
            let sealing = FileSealing(key: key, reference: nil, protection: StoreProtection(level: StoreProtection.givenKey))
            try Data(try StoreDirectoryFormat.encodeProfile(sampleProfile(1), name: "a", sealing: sealing, path: path))
                .write(to: URL(fileURLWithPath: store.profileFilePath(for: "a")))
            var marker = StoreDirectoryFormat.marker(for: sealing)
            marker.resealing = true
            try Data(try StoreDirectoryFormat.encode(marker, path: path)).write(to: URL(fileURLWithPath: path))
            #expect(try await store.profile(named: "a") == sampleProfile(1))
            #expect(try await store.profile(named: "b") == sampleProfile(2))
            try await store.save(sampleProfile(3), as: "c")
            #expect(try filesSetAside(in: directory).isEmpty)
            #expect(try storeIsSealed(at: path))
            #expect(!(try storeText(at: path)).contains("refresh-secret"))
            let fresh = try IDTokenStore(path: path, sealing: .key(key))
            #expect(try await fresh.profileNames() == ["a", "b", "c"])
            #expect(try await fresh.profile(named: "b") == sampleProfile(2))
        }
    }
}
