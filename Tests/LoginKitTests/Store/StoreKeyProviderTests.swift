import Foundation
@testable import LoginKit
import LoginKitHTTP
import LoginKitJOSE
import LoginKitTestSupport
import Testing

/// A key provider of the test's own, as an app would plug an HSM or a vault: keys in memory, and a
/// switch that makes it unavailable.
final class MemoryKeyProvider: StoreKeyProvider {
    let name: String
    private let state = LockedState<(keys: [String: SymmetricKey], available: Bool, lookups: Int)>(([:], true, 0))

    init(name: String = "memory-test") { self.name = name }

    var isAvailable: Bool {
        get { state.withLock { $0.available } }
        set { state.withLock { $0.available = newValue } }
    }
    var ids: [String] { state.withLock { Array($0.keys.keys) } }
    var lookups: Int { state.withLock { $0.lookups } }

    func availability() async -> StoreKeyAvailability {
        isAvailable ? .available("in memory") : .unavailable("switched off by the test")
    }
    func key(id: String) async throws -> SymmetricKey? {
        guard isAvailable else { throw TokenStoreError(.unavailable, path: name, "switched off by the test") }
        return state.withLock { state in
            state.lookups += 1
            return state.keys[id]
        }
    }
    func store(_ key: SymmetricKey, id: String, label: String) async throws {
        guard isAvailable else { throw TokenStoreError(.unavailable, path: name, "switched off by the test") }
        state.withLock { $0.keys[id] = key }
    }
    func removeKey(id: String) async throws {
        state.withLock { $0.keys[id] = nil }
    }
    /// Loses every key, as a reboot does to the kernel keyring.
    func loseAllKeys() {
        state.withLock { $0.keys = [:] }
    }
}

private func profile(_ token: String) -> StoredProfile {
    StoredProfile(
        credentials: Credentials(idToken: nil, accessToken: token, refreshToken: "refresh-" + token, expiresAt: Date(timeIntervalSinceNow: 3600)),
        source: CredentialSource(kind: .oauth2, endpoint: "https://id.example.com", clientID: "cli"))
}

/// The access token of profile "default" as a fresh store (another process) reads it with `provider`.
private func accessToken(at path: String, with provider: any StoreKeyProvider) async throws -> String? {
    try await IDTokenStore(path: path, sealing: .provider(provider)).profile(named: "default")?.credentials.accessToken
}

/// Saves `token` as profile "default" through a fresh store sealing with `provider`.
private func save(_ token: String, at path: String, with provider: any StoreKeyProvider) async throws {
    try await IDTokenStore(path: path, sealing: .provider(provider)).save(profile(token), as: "default")
}

/// The store's marker (its `sealing` names the key a provider keeps).
private func header(_ path: String) throws -> [String: Any] {
    try storeMarker(at: path)
}

@Suite(.timeLimit(.minutes(3)))
struct StoreKeyProviderTests {
    @Test func aProviderSealsTheFileAndItsHeaderNamesTheKey() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let provider = MemoryKeyProvider()
            let store = try IDTokenStore(path: path, sealing: .provider(provider))
            try await store.save(profile("access-one"), as: "default")
            let text = try storeText(at: path)
            #expect(!text.contains("access-one"), "sealed: no token in clear")
            #expect(try storeIsSealed(at: path))
            let key = try #require(try storeKeyReference(at: path))
            #expect(key["provider"] == "memory-test")
            #expect(key["id"]?.count == 32 && provider.ids == [key["id"]])
            for (file, document) in try storeProfileDocuments(at: path) {
                #expect((document["sealed"] as? [String: Any])?["key"] as? [String: String] == key, "\(file) names the key too")
            }
            #expect(try await store.protection() == StoreProtection(level: "memory-test"))

            // Another store (another process's) on the file finds the key through the provider,
            // even one configured as plain: the header says whose key it is.
            let reader = try IDTokenStore(path: path, sealing: .provider(provider))
            #expect(try await reader.profile(named: "default")?.credentials.accessToken == "access-one")
            // A store that does not have the provider cannot ask it: unavailable (the key may well
            // exist), and its saves leave the file as it is rather than set it aside.
            let stranger = try IDTokenStore(path: path, sealing: .none)
            let error = await thrown { try await stranger.profile(named: "default") } as? TokenStoreError
            #expect(error?.code == .unavailable)
            let files = try storeFiles(at: path)
            #expect((await thrown { try await stranger.save(profile("other"), as: "other") } as? TokenStoreError)?.code == .unavailable)
            #expect((await thrown { try await stranger.save(profile("other"), as: "default") } as? TokenStoreError)?.code == .unavailable)
            #expect(try storeFiles(at: path) == files)
            #expect(try filesSetAside(in: directory).isEmpty)
        }
    }

    @Test func aLostKeyReadsAsLogInAgainAndTheFileIsSetAsideNotDeleted() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let provider = MemoryKeyProvider()
            try await save("before", at: path, with: provider)
            let sealedFiles = try storeFiles(at: path)
            provider.loseAllKeys()  // a reboot, for the kernel keyring

            let store = try IDTokenStore(path: path, sealing: .provider(provider))
            let error = await thrown { try await store.profile(named: "default") } as? TokenStoreError
            #expect(error?.code == .keyUnavailable)
            #expect(error?.message.contains("log in again") == true)
            #expect(error?.message.contains("no longer available") == true)

            // The next login saves: the old store is moved aside byte for byte (each of its files
            // once), the new one sealed anew.
            try await store.save(profile("after"), as: "default")
            let aside = Array(try filesSetAside(in: directory).values)
            #expect(!sealedFiles.isEmpty)
            for (file, bytes) in sealedFiles { #expect(aside.filter { $0 == bytes }.count == 1, "\(file)") }
            #expect(try storeIsSealed(at: path))
            #expect(try await accessToken(at: path, with: provider) == "after")
        }
    }

    @Test func aProviderThatCannotAnswerIsUnavailableNotLost() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let provider = MemoryKeyProvider()
            try await save("kept", at: path, with: provider)
            let before = try storeFiles(at: path)
            provider.isAvailable = false
            let store = try IDTokenStore(path: path, sealing: .provider(provider))
            #expect((await thrown { try await store.profile(named: "default") } as? TokenStoreError)?.code == .unavailable)
            // A save does not replace what it could not read.
            #expect((await thrown { try await store.save(profile("new"), as: "other") } as? TokenStoreError)?.code == .unavailable)
            #expect((await thrown { try await store.save(profile("new"), as: "default") } as? TokenStoreError)?.code == .unavailable)
            #expect(try storeFiles(at: path) == before)
            #expect(try entriesBelow(directory, containing: "corrupt").isEmpty)
        }
    }

    @Test func automaticTakesTheFirstUsableProvider() async throws {
        try await withTemporaryDirectory { directory in
            let off = MemoryKeyProvider(name: "first")
            off.isAvailable = false
            let on = MemoryKeyProvider(name: "second")
            let store = try IDTokenStore(
                path: directory + "/tokens.json",
                sealing: .automatic(AutomaticSealing(providers: [off, on], usesExplicitKey: false, onPlaintextFallback: { _ in Issue.record("no fallback") })))
            try await store.save(profile("x"), as: "default")
            #expect(try await store.protection().level == "second")
            #expect(off.ids.isEmpty && on.ids.count == 1)
        }
    }

    @Test func automaticFallsBackToPlaintextReportedOncePerStore() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let off = MemoryKeyProvider()
            off.isAvailable = false
            let reports = LockedState<[StoreProtection]>([])
            let store = try IDTokenStore(
                path: path,
                sealing: .automatic(AutomaticSealing(providers: [off], usesExplicitKey: false, onPlaintextFallback: { p in reports.withLock { $0.append(p) } })))
            try await store.save(profile("one"), as: "default")
            try await store.save(profile("two"), as: "default")
            #expect(reports.withLock { $0.count } == 1, "one report per store, not per save")
            let protection = try await store.protection()
            #expect(protection.level == StoreProtection.plaintext && protection.isFallback)
            #expect(protection.detail.contains("memory-test: switched off by the test"))
            #expect(try storeIsPlain(at: path), "plain JSON")
            for file in try storeFiles(at: path).keys {
                let attributes = try FileManager.default.attributesOfItem(atPath: file)
                #expect((attributes[.posixPermissions] as? Int) == 0o600, "\(file)")
            }
        }
    }

    @Test func withoutTheFallbackNothingIsWrittenAndTheErrorIsTyped() async throws {
        try await withTemporaryDirectory { directory in
            let off = MemoryKeyProvider()
            off.isAvailable = false
            let store = try IDTokenStore(
                path: directory + "/tokens.json",
                sealing: .automatic(AutomaticSealing(providers: [off], usesExplicitKey: false, allowsPlaintextFallback: false)))
            let error = await thrown { try await store.save(profile("x"), as: "default") } as? TokenStoreError
            #expect(error?.code == .unavailable)
            #expect(!FileManager.default.fileExists(atPath: directory + "/tokens.json"))
        }
    }

    @Test func anExplicitKeyComesFirstInAutomatic() async throws {
        try await withTemporaryDirectory { directory in
            let provider = MemoryKeyProvider()
            let key = Data(repeating: 7, count: 32).base64EncodedString()
            let store = try IDTokenStore(
                path: directory + "/tokens.json", sealing: .automatic(AutomaticSealing(providers: [provider])),
                environment: ["LOGINKIT_STORE_KEY": key, "HOME": directory])
            try await store.save(profile("x"), as: "default")
            #expect(try await store.protection().level == StoreProtection.environmentKey)
            #expect(provider.ids.isEmpty)
            let path = directory + "/tokens.json"
            #expect(try storeIsSealed(at: path))
            let sealing = try #require(try header(path)["sealing"] as? [String: Any])
            #expect(sealing["key"] == nil, "an explicit key is not named in the marker")
            for (file, document) in try storeProfileDocuments(at: path) {
                #expect((document["sealed"] as? [String: Any])?["key"] == nil, "\(file): nor in a profile's file")
            }
        }
    }

    @Test func aPlainStoreIsSealedOnItsNextSaveAndMigratesBothWays() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            try await IDTokenStore(path: path, sealing: .none).save(profile("plain"), as: "default")
            let provider = MemoryKeyProvider()
            let store = try IDTokenStore(path: path, sealing: .provider(provider))
            #expect(try await store.protection() == StoreProtection(level: "plaintext", detail: "sealed with memory-test on the next save"))
            try await store.save(profile("sealed"), as: "default")
            #expect(try storeIsSealed(at: path))

            // To plaintext: the files are plain, and the key they no longer need is gone.
            #expect(try await store.migrate(to: .none).level == StoreProtection.plaintext)
            #expect(try storeIsPlain(at: path))
            #expect(provider.ids.isEmpty)
            #expect(try header(path)["storage"] as? String == "plaintext", "marked as chosen")
            // Plain by choice stays plain for an automatic store (a keyring is usable here)…
            let automatic = try IDTokenStore(path: path, sealing: .automatic(AutomaticSealing(providers: [provider], usesExplicitKey: false)))
            #expect(try await automatic.protection() == StoreProtection(level: "plaintext", detail: "by choice"))
            try await automatic.save(profile("still plain"), as: "default")
            #expect(try storeIsPlain(at: path) && provider.ids.isEmpty)
            // …while a plain store nobody chose (a fallback, an older file) is sealed on its next save.
            var unmarkedMarker = try header(path)
            unmarkedMarker["storage"] = nil
            try JSONSerialization.data(withJSONObject: unmarkedMarker).write(to: URL(fileURLWithPath: path))
            #expect(try header(path)["storage"] == nil)
            let unmarked = try IDTokenStore(path: path, sealing: .automatic(AutomaticSealing(providers: [provider], usesExplicitKey: false)))
            #expect(try await unmarked.protection() == StoreProtection(level: "plaintext", detail: "sealed with memory-test on the next save"))
            #expect(try await unmarked.migrate(to: .none).level == "plaintext")
            // A plain store by configuration (the library's default) does not mark its files: only a
            // migration is a user's lasting choice.
            let other = directory + "/other.json"
            try await IDTokenStore(path: other, sealing: .none).save(profile("p"), as: "default")
            #expect(try header(other)["storage"] == nil)

            // And back.
            #expect(try await store.migrate(to: .provider(provider)).level == "memory-test")
            #expect(try storeIsSealed(at: path) && provider.ids.count == 1)
            #expect(!(try storeText(at: path)).contains("still plain"))
            #expect(try await accessToken(at: path, with: provider) == "still plain")
        }
    }

    @Test(.enabled(if: KernelKeyringKeyProvider.unavailableReason == nil, "the kernel refuses keyctl here (KeyringCLITests check the fallback)"))
    func theKernelKeyringKeepsTheKeyForEveryProcessUntilItIsGone() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let store = try IDTokenStore(path: path, sealing: .provider(KernelKeyringKeyProvider()))
            try await store.save(profile("kernel"), as: "default")
            let reference = try #require(try storeKeyReference(at: path))
            let id = try #require(reference["id"])
            #expect(reference["provider"] == "kernel-keyring")
            #expect(try await store.protection().description == "kernel-keyring (survives logout, not reboot)")
            // Another process: the test helper reads the store with a fresh store of its own.
            #expect(try await IDTokenStore(path: path, sealing: .none).profile(named: "default")?.credentials.accessToken == "kernel")
            let key = try #require(try await KernelKeyringKeyProvider().key(id: id))
            #expect(key.bytes.count == 32)

            try await KernelKeyringKeyProvider().removeKey(id: id)  // as a reboot does
            #expect(try await KernelKeyringKeyProvider().key(id: id) == nil)
            let error = await thrown { try await IDTokenStore(path: path, sealing: .none).profile(named: "default") } as? TokenStoreError
            #expect(error?.code == .keyUnavailable)
            #expect(error?.message.contains("emptied by a reboot") == true)
        }
    }

    /// A long-lived process keeps the key in memory while its provider loses it
    /// (the kernel keyring's 3-day expiry, an item deleted): its next save must put it back, or
    /// the file it writes would open nowhere else.
    @Test func aSaveStoresTheKeyAgainWhenItsProviderLostIt() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let provider = MemoryKeyProvider()
            let store = try IDTokenStore(path: path, sealing: .provider(provider))
            try await store.save(profile("one"), as: "default")
            let ids = provider.ids
            provider.loseAllKeys()
            try await store.save(profile("two"), as: "default")
            #expect(provider.ids == ids, "the same key, under the same id")
            #expect(try await accessToken(at: path, with: provider) == "two")
        }
    }

    /// The explicit key is the store's (from the environment it was given), not
    /// looked up again in the process environment when a new file is sealed.
    @Test func anExplicitKeyComesFromTheStoresEnvironment() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let environment = ["LOGINKIT_STORE_KEY": Data(repeating: 9, count: 32).base64EncodedString(), "HOME": directory]
            try await IDTokenStore(path: path, sealing: .environment, environment: environment).save(profile("env"), as: "default")
            #expect(try storeIsSealed(at: path))
            #expect(try await IDTokenStore(path: path, sealing: .environment, environment: environment).profile(named: "default")?.credentials.accessToken == "env")
        }
    }

    /// Migrating a copy of another store's file must not delete that store's key.
    @Test func migratingACopiedFileLeavesTheOriginalsKey() async throws {
        try await withTemporaryDirectory { directory in
            let provider = MemoryKeyProvider()
            let original = directory + "/tokens.json", copy = directory + "/copy.json"
            try await save("o", at: original, with: provider)
            try copyStore(from: original, to: copy)
            #expect(try await IDTokenStore(path: copy, sealing: .provider(provider)).migrate(to: .none).level == "plaintext")
            #expect(try await accessToken(at: original, with: provider) == "o")
        }
    }

    /// A read that suspended on its key provider must not, when it resumes, leave
    /// behind what it read — another process has since replaced the file (a migration that removed
    /// that key), and this process's next save would seal the new content with the removed key.
    @Test func aReadThatResumesLateDoesNotDecideTheNextSave() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let shared = MemoryKeyProvider()
            try await save("x", at: path, with: shared)
            let gated = GatedKeyProvider(shared)
            let processA = try IDTokenStore(path: path, sealing: .automatic(AutomaticSealing(providers: [gated], usesExplicitKey: false)))
            let lateRead = Task { try await processA.profile(named: "default") }
            await gated.gate.arrived()  // the read has the old key in hand and is suspended
            // Process B migrates to plaintext and removes the key.
            #expect(try await IDTokenStore(path: path, sealing: .provider(shared)).migrate(to: .none).level == "plaintext")
            #expect(shared.ids.isEmpty)
            // Process A saves; the late read resumes meanwhile.
            try await processA.withExclusiveAccess(to: "default") { transaction in
                gated.gate.open()
                _ = try? await lateRead.value
                transaction["default"] = profile("after")
            }
            // A saved what it read under the lock — the plain file B chose — not the sealing the
            // late read saw; and whatever A wrote opens in a fresh process.
            #expect(try header(path)["storage"] as? String == "plaintext")
            #expect(shared.ids.isEmpty, "the removed key stays removed")
            let fresh = try IDTokenStore(path: path, sealing: .provider(shared))
            #expect(try await fresh.profile(named: "default")?.credentials.accessToken == "after")
        }
    }

    /// A file whose key is really gone costs one look-up per read, not two (the
    /// read again is only for a file that changed meanwhile).
    @Test func aLostKeyIsLookedUpOncePerRead() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let provider = MemoryKeyProvider()
            try await save("x", at: path, with: provider)
            provider.loseAllKeys()
            let before = provider.lookups
            let error = await thrown { try await IDTokenStore(path: path, sealing: .provider(provider)).profile(named: "default") } as? TokenStoreError
            #expect(error?.code == .keyUnavailable)
            #expect(provider.lookups - before == 1)
        }
    }

    /// A provider that cannot answer now (locked when idle) does not stop a save
    /// whose key this process already holds: the file on disk needs that same key anyway.
    @Test func aSaveGoesOnWhenTheProviderCannotAnswerButTheKeyIsKnown() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let provider = MemoryKeyProvider()
            let store = try IDTokenStore(path: path, sealing: .provider(provider))
            try await store.save(profile("one"), as: "default")
            provider.isAvailable = false
            try await store.save(profile("two"), as: "default")
            provider.isAvailable = true
            #expect(try await accessToken(at: path, with: provider) == "two")
        }
    }
}

/// A provider that hands out `base`'s key only when the test opens the gate, after telling the test
/// that a look-up has the key in hand: it suspends a store's read at a chosen moment.
final class GatedKeyProvider: StoreKeyProvider {
    let base: MemoryKeyProvider
    let gate = TestGate()
    var name: String { base.name }

    init(_ base: MemoryKeyProvider) { self.base = base }

    func availability() async -> StoreKeyAvailability { await base.availability() }
    func store(_ key: SymmetricKey, id: String, label: String) async throws { try await base.store(key, id: id, label: label) }
    func removeKey(id: String) async throws { try await base.removeKey(id: id) }
    func key(id: String) async throws -> SymmetricKey? {
        let key = try await base.key(id: id)
        await gate.pass()
        return key
    }
}
