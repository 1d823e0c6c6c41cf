#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKitJOSE

/// A key a sealed store file names in its header: which provider keeps it, under which id.
struct StoreKeyReference: Codable, Hashable, Sendable {
    var provider: String
    var id: String

    /// Ids LoginKit makes are 32 hex digits; a header may name nothing stranger than this.
    var isWellFormed: Bool {
        !provider.isEmpty && provider.count <= 64 && !id.isEmpty && id.count <= 128
            && (provider + id).allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == ".") }
    }
}

/// How a file is (or is to be) sealed: plain, or with a key and the reference the header carries.
struct FileSealing: Sendable {
    var key: SymmetricKey?
    var reference: StoreKeyReference?
    var protection: StoreProtection
    /// A plain file its user chose to keep plain (`store migrate --to plaintext`): marked so in the
    /// file (`"storage": "plaintext"`), and left plain by `.automatic` stores.
    var isChosenPlaintext = false

    static let chosenDetail = "by choice"

    static func plain(_ detail: String, isFallback: Bool = false) -> FileSealing {
        FileSealing(key: nil, reference: nil, protection: StoreProtection(level: StoreProtection.plaintext, detail: detail, isFallback: isFallback))
    }

    /// The marked plain file.
    static let chosenPlaintext = FileSealing(
        key: nil, reference: nil, protection: StoreProtection(level: StoreProtection.plaintext, detail: chosenDetail), isChosenPlaintext: true)
}

/// The keys of one file store: the explicit key, the providers a header may name, the keys found,
/// and the choice of sealing for a store file that is not sealed yet.
///
/// Owned by one `IDTokenStore` actor and used only on it (not `Sendable`; its async methods run on
/// the caller's actor). Keys are created only by ``sealingForNewFile()`` and ``choose(_:forMigration:)``,
/// which the store calls holding its file lock, so two processes never make two keys for one file.
/// Every provider call is bounded by the provider.
final class StoreKeys {
    let sealing: StoreSealing
    /// The explicit key (`.key`, `.keyFile`, `LOGINKIT_STORE_KEY`), resolved when the store is made.
    let explicitKey: SymmetricKey?
    let explicitLevel: String
    /// The first half of the id a key made for this store gets: 16 hex digits of SHA-256 of the
    /// store's path (the other half is random, so that a key made after one was lost never takes
    /// the lost one's id, which the set-aside file still names).
    let keyIDPrefix: String
    let path: String
    private let environment: [String: String]
    private let providers: [String: any StoreKeyProvider]
    private var found: [StoreKeyReference: SymmetricKey] = [:]
    /// When ``ensureStored(_:)`` last found each key in its provider.
    private var lastChecked: [StoreKeyReference: ContinuousClock.Instant] = [:]
    /// A plaintext fallback, once decided: the providers are probed again a minute later at the
    /// earliest (a daemon that started before the keyring was unlocked seals once it is).
    private var fallback: (sealing: FileSealing, at: ContinuousClock.Instant)?
    private var reportedFallback = false

    init(sealing: StoreSealing, path: String, environment: [String: String]) throws(TokenStoreError) {
        self.sealing = sealing
        self.path = path
        self.environment = environment
        self.explicitKey = try sealing.resolveKey(environment: environment)
        self.explicitLevel = sealing.explicitLevel(environment: environment) ?? StoreProtection.givenKey
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        let digest = (try? MessageDigest.sha256(Array(absolute.utf8))) ?? Array(absolute.utf8)
        self.keyIDPrefix = digest.prefix(8).map { String($0, radix: 16).leftPadded(to: 2) }.joined()
        // Any store can open a file sealed by the built-in providers (a store opened as plain by
        // choice still reads what the CLI sealed); the configured ones are added, and win by name.
        var providers: [String: any StoreKeyProvider] = [:]
        for provider in [SecretServiceKeyProvider(), KernelKeyringKeyProvider()] as [any StoreKeyProvider] {
            providers[provider.name] = provider
        }
        switch sealing {
        case .provider(let provider): providers[provider.name] = provider
        case .automatic(let automatic): for provider in automatic.providers { providers[provider.name] = provider }
        default: break
        }
        self.providers = providers
    }

    /// Whether this store leaves a file its user chose to keep plain as it is (`.automatic` does;
    /// an explicit key or provider seals it).
    var keepsChosenPlaintext: Bool {
        // An explicit key set now is a newer choice than the file's mark.
        if case .automatic(let automatic) = sealing { return !(automatic.usesExplicitKey && explicitKey != nil) }
        if case .none = sealing { return true }
        return false
    }

    /// Whether this store seals with a key its user gave (`.key`, or `LOGINKIT_STORE_KEY` where the
    /// sealing uses it): such a store reads no plain file, since only a sealed one proves it was
    /// written with that key. (A keyring store reads a plain file and seals it on its next save:
    /// a plaintext fallback, or a file from before the keyring was chosen.)
    var sealsWithGivenKey: Bool {
        guard explicitKey != nil else { return false }
        if case .automatic(let automatic) = sealing { return automatic.usesExplicitKey }
        return true
    }

    /// Whether saves seal without a provider's help (an explicit key or a chosen provider).
    var sealsForSure: Bool {
        if explicitKey != nil { return true }
        if case .provider = sealing { return true }
        return false
    }

    // MARK: Reading

    /// The key to open a file whose header names `reference` (or none: the explicit key).
    ///
    /// - Throws: `.keyUnavailable` when the provider answers that the key is gone, `.unavailable`
    ///   when it cannot answer, `.sealedWithoutKey` for a file sealed with an explicit key we lack.
    nonisolated(nonsending) func key(for reference: StoreKeyReference?) async throws(TokenStoreError) -> FileSealing {
        guard let reference else {
            guard let explicitKey else {
                throw TokenStoreError(
                    .sealedWithoutKey, path: path,
                    "\(path) is sealed; set LOGINKIT_STORE_KEY (or the key file) to the key it was sealed with")
            }
            return FileSealing(key: explicitKey, reference: nil, protection: StoreProtection(level: explicitLevel))
        }
        guard reference.isWellFormed else {
            throw TokenStoreError(.corrupt, path: path, "\(path) names its key in a form LoginKit does not read")
        }
        let protection = StoreProtection(level: reference.provider, detail: Self.meaning(of: reference.provider))
        if let key = found[reference] { return FileSealing(key: key, reference: reference, protection: protection) }
        guard let provider = providers[reference.provider] else {
            // The key may well exist (an app's own provider): never a reason to set the file aside.
            throw TokenStoreError(
                .unavailable, path: path,
                "\(path) is sealed with a key kept by \"\(reference.provider)\", a key provider this program does not have; open it with the program that sealed it")
        }
        let key: SymmetricKey?
        do {
            key = try await provider.key(id: reference.id)
        } catch let error as TokenStoreError {
            throw TokenStoreError(
                .unavailable, path: path,
                "\(path) is sealed with a key in \(reference.provider), which cannot be read now: \(error.message) (run where that keyring is reachable; to start over instead, move the file away and log in again)",
                underlying: error)
        } catch {
            throw TokenStoreError(.unavailable, path: path, "\(path) is sealed with a key in \(reference.provider), which cannot be read now", underlying: error)
        }
        guard let key else {
            let why = reference.provider == "kernel-keyring" ? ": the kernel keyring is emptied by a reboot, and after 3 days unused" : ""
            throw TokenStoreError(
                .keyUnavailable, path: path,
                "\(path) is sealed with a key that is no longer available (\(reference.provider)\(why)); log in again — the next login moves the file aside, it is not deleted")
        }
        found[reference] = key
        return FileSealing(key: key, reference: reference, protection: protection)
    }

    // MARK: Choosing how to seal

    /// Remembers the key a store was just written with, so that reading it back asks no provider.
    func remember(_ sealing: FileSealing) {
        guard let reference = sealing.reference, let key = sealing.key else { return }
        found[reference] = key
    }

    /// Forgets the key found for `reference` (it did not open the file: replaced since).
    func forget(_ reference: StoreKeyReference) {
        found[reference] = nil
    }

    /// How a store file that is not sealed yet gets sealed on its next save: the key is looked up
    /// (or made) now. Call holding the store's file lock.
    nonisolated(nonsending) func sealingForNewFile() async throws(TokenStoreError) -> FileSealing {
        if let fallback, ContinuousClock.now < fallback.at.advanced(by: .seconds(60)) { return fallback.sealing }
        let choice = try await choose(sealing, forMigration: false)
        fallback = nil
        if choice.protection.isFallback {
            fallback = (choice, ContinuousClock.now)
            if !reportedFallback, case .automatic(let automatic) = sealing {
                reportedFallback = true
                automatic.onPlaintextFallback?(choice.protection)
            }
        }
        return choice
    }

    /// What ``sealingForNewFile()`` would do, without making a key (for `status`).
    nonisolated(nonsending) func preview() async -> StoreProtection {
        if let fallback, ContinuousClock.now < fallback.at.advanced(by: .seconds(60)) { return fallback.sealing.protection }
        switch sealing {
        case .none:
            return StoreProtection(level: StoreProtection.plaintext, detail: FileSealing.chosenDetail)
        case .key, .keyFile, .environment:
            return explicitKey == nil
                ? StoreProtection(level: StoreProtection.plaintext, detail: "no LOGINKIT_STORE_KEY set")
                : StoreProtection(level: explicitLevel)
        case .provider(let provider):
            let availability = await provider.availability()
            return StoreProtection(level: provider.name, detail: availability.isAvailable ? availability.detail : "unavailable: \(availability.detail)")
        case .automatic(let automatic):
            if automatic.usesExplicitKey, explicitKey != nil { return StoreProtection(level: explicitLevel) }
            var reasons: [String] = []
            for provider in automatic.providers {
                let availability = await provider.availability()
                if availability.isAvailable { return StoreProtection(level: provider.name, detail: availability.detail) }
                reasons.append("\(provider.name): \(availability.detail)")
            }
            return StoreProtection(level: StoreProtection.plaintext, detail: "no keyring usable: " + reasons.joined(separator: "; "), isFallback: true)
        }
    }

    /// The sealing `target` asks for, with a key made now if its provider has none.
    nonisolated(nonsending) func choose(_ target: StoreSealing, forMigration: Bool) async throws(TokenStoreError) -> FileSealing {
        switch target {
        case .none:
            return forMigration ? .chosenPlaintext : .plain(FileSealing.chosenDetail)
        case .key, .keyFile, .environment:
            // This store's own key (resolved when it was made, from its environment); a migration
            // target resolves its own, from the same environment.
            let key = forMigration ? try target.resolveKey(environment: environment) : explicitKey
            guard let key else { return .plain("no LOGINKIT_STORE_KEY set") }
            return FileSealing(key: key, reference: nil, protection: StoreProtection(level: target.explicitLevel(environment: environment) ?? explicitLevel))
        case .provider(let provider):
            return try await keyMade(by: provider)
        case .automatic(let automatic):
            if automatic.usesExplicitKey, !forMigration, let explicitKey {
                return FileSealing(key: explicitKey, reference: nil, protection: StoreProtection(level: explicitLevel))
            }
            var reasons: [String] = []
            for provider in automatic.providers {
                let availability = await provider.availability()
                guard availability.isAvailable else {
                    reasons.append("\(provider.name): \(availability.detail)")
                    continue
                }
                do {
                    var sealing = try await keyMade(by: provider)
                    if !availability.detail.isEmpty { sealing.protection.detail = availability.detail }
                    return sealing
                } catch {
                    reasons.append("\(provider.name): \(error.message)")
                }
            }
            let why = "no keyring usable: " + (reasons.isEmpty ? "no key provider configured" : reasons.joined(separator: "; "))
            guard automatic.allowsPlaintextFallback, !forMigration else {
                throw TokenStoreError(.unavailable, path: path, why)
            }
            return .plain(why, isFallback: true)
        }
    }

    /// The key `provider` keeps for this store, made and stored first when it has none.
    private nonisolated(nonsending) func keyMade(by provider: any StoreKeyProvider) async throws(TokenStoreError) -> FileSealing {
        let protection = StoreProtection(level: provider.name, detail: Self.meaning(of: provider.name))
        do {
            let suffix = try SecureRandom.bytes(8).map { String($0, radix: 16).leftPadded(to: 2) }.joined()
            let reference = StoreKeyReference(provider: provider.name, id: keyIDPrefix + suffix)
            let key = try SymmetricKey.random()
            try await provider.store(key, id: reference.id, label: "LoginKit token store key (\(path))")
            // Read back: a provider that accepted the key but cannot give it back would leave a
            // file nobody can open.
            guard let stored = try await provider.key(id: reference.id), stored.bytes == key.bytes else {
                throw TokenStoreError(.unavailable, path: path, "\(provider.name) did not give back the key it stored")
            }
            found[reference] = key
            return FileSealing(key: key, reference: reference, protection: protection)
        } catch let error as TokenStoreError {
            throw TokenStoreError(.unavailable, path: path, "\(provider.name) could not keep \(path)'s key: \(error.message)", underlying: error)
        } catch {
            throw TokenStoreError(.unavailable, path: path, "\(provider.name) could not keep \(path)'s key", underlying: error)
        }
    }

    /// Checks, before a save under the file lock, that the key `sealing` names is still in its
    /// provider, and stores it again under its id when the provider lost it (a kernel keyring that
    /// expired while a long-lived process kept the key in memory, an item deleted in a keyring
    /// manager): the file about to be written must open in the next process. For the kernel
    /// keyring the look-up also restarts the keyring's expiry. At most once a minute per key (a
    /// Secret Service round trip is not for every save); a provider that cannot answer now does not
    /// stop the save — the file on disk needs that same key already.
    ///
    /// - Throws: `.unavailable` when the key was lost and could not be stored again (nothing is
    ///   written then: the new file would open nowhere else).
    nonisolated(nonsending) func ensureStored(_ sealing: FileSealing) async throws(TokenStoreError) {
        guard let reference = sealing.reference, let key = sealing.key, let provider = providers[reference.provider] else { return }
        let now = ContinuousClock.now
        if let checked = lastChecked[reference], now < checked.advanced(by: .seconds(60)) { return }
        let current: SymmetricKey?
        do {
            current = try await provider.key(id: reference.id)
        } catch {
            return  // locked, unreachable: the key is probably still there; the save goes on
        }
        if current?.bytes != key.bytes {
            do {
                try await provider.store(key, id: reference.id, label: "LoginKit token store key (\(path))")
                guard try await provider.key(id: reference.id)?.bytes == key.bytes else {
                    throw TokenStoreError(.unavailable, path: path, "\(reference.provider) did not give back the key it stored")
                }
            } catch let error as TokenStoreError {
                throw TokenStoreError(.unavailable, path: path, "\(reference.provider) lost \(path)'s key and cannot keep it again now: \(error.message)", underlying: error)
            } catch {
                throw TokenStoreError(.unavailable, path: path, "\(reference.provider) lost \(path)'s key and cannot keep it again now", underlying: error)
            }
        }
        lastChecked[reference] = now
    }

    /// Removes the key `reference` names (after a migration away from it); failures are ignored:
    /// the key is useless without the file.
    nonisolated(nonsending) func removeKey(_ reference: StoreKeyReference) async {
        try? await providers[reference.provider]?.removeKey(id: reference.id)
    }

    /// What `status` adds to a provider's name.
    static func meaning(of provider: String) -> String {
        provider == "kernel-keyring" ? "survives logout, not reboot" : ""
    }

    /// Why the providers `.automatic` tries before `level` are not used now (for `status` on a
    /// headless machine: the kernel keyring, because there is no session bus). Empty when this
    /// store is not automatic, or when they are usable (a file keeps the key it was sealed with).
    nonisolated(nonsending) func reasonsBefore(_ level: String) async -> [String] {
        guard case .automatic(let automatic) = sealing, let index = automatic.providers.firstIndex(where: { $0.name == level }) else { return [] }
        var reasons: [String] = []
        for provider in automatic.providers[..<index] {
            let availability = await provider.availability()
            if !availability.isAvailable { reasons.append("\(provider.name): \(availability.detail)") }
        }
        return reasons
    }

    /// The provider named `name`, for `status` (who serves the Secret Service).
    func provider(named name: String) -> (any StoreKeyProvider)? { providers[name] }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
