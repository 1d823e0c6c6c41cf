import Foundation
import LoginKit
import LoginKitJOSE
import LoginKitTestSupport
import Testing

/// A format 1 store file written by hand, as LoginKit wrote one before format 2 (docs/storage.md,
/// "Format (version 1)"): `{"format", "version": 1, "storage"?, "profiles"}`, or sealed
/// `{"format", "version": 1, "sealed": {"alg", "key"?, "box"}}` with the box AES-256-GCM over
/// `{"profiles": …}` and the associated data `loginkit.tokens/v1`. Written from the stored types'
/// own `Codable` conformances with the format's encoder settings, never through the store.
enum FormatOneStore {
    struct KeyReference: Encodable {
        var provider: String
        var id: String
    }

    private struct PlainDocument: Encodable {
        var format = "loginkit.tokens"
        var version = 1
        var storage: String?
        var profiles: [String: StoredProfile]
    }

    private struct SealedContents: Encodable {
        var profiles: [String: StoredProfile]
    }

    private struct SealedDocument: Encodable {
        struct Sealed: Encodable {
            var alg = "A256GCM"
            var key: KeyReference?
            var box: String
        }
        var format = "loginkit.tokens"
        var version = 1
        var sealed: Sealed
    }

    private static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        return encoder
    }

    /// The file's bytes: plain (`chosenPlaintext` marks it `"storage": "plaintext"`), or sealed with
    /// `key`, naming `reference` as its key when given.
    static func bytes(
        _ profiles: [String: StoredProfile], key: SymmetricKey? = nil, reference: KeyReference? = nil, chosenPlaintext: Bool = false
    ) throws -> Data {
        guard let key else {
            return try encoder().encode(PlainDocument(storage: chosenPlaintext ? "plaintext" : nil, profiles: profiles)) + Data([0x0A])
        }
        let contents = Array(try encoder().encode(SealedContents(profiles: profiles)))
        let box = try AESGCM.seal(contents, key: key, associatedData: Array("loginkit.tokens/v1".utf8))
        return try encoder().encode(SealedDocument(sealed: .init(key: reference, box: Base64URL.encode(box)))) + Data([0x0A])
    }

    /// Writes the file at `path` (mode 0600; its directory made 0700 when missing) and returns its bytes.
    @discardableResult
    static func write(
        _ profiles: [String: StoredProfile], to path: String, key: SymmetricKey? = nil, reference: KeyReference? = nil, chosenPlaintext: Bool = false
    ) throws -> Data {
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let data = try bytes(profiles, key: key, reference: reference, chosenPlaintext: chosenPlaintext)
        try #require(FileManager.default.createFile(atPath: path, contents: data, attributes: [.posixPermissions: 0o600]))
        return data
    }

    /// A name of 300 bytes: its file name is a hash.
    static let longName = String(repeating: "long-name-", count: 30)
    /// A resource target's profile (`acme#<32 hex>`).
    static let resourceName = "acme#0123456789abcdef0123456789abcdef"

    /// `count` (at least 6) distinct profiles: `profile-NN`, and names the directory layout must
    /// escape or hash — a 300-byte name, a resource target's, two that differ in case only, a
    /// non-ASCII one with a slash and dots.
    static func profiles(count: Int = 50) -> [String: StoredProfile] {
        let special = [longName, resourceName, "Work", "work", "Ünïcode/../.hidden"]
        let names = special + (0..<(count - special.count)).map { $0 < 10 ? "profile-0\($0)" : "profile-\($0)" }
        var profiles: [String: StoredProfile] = [:]
        for (index, name) in names.enumerated() {
            profiles[name] = sampleProfile(index + 1, refreshToken: "refresh-secret-\(index + 1)")
        }
        return profiles
    }
}

/// Every profile of `expected` reads back equal through `store`, and the store names exactly them
/// (plus `extra`, when it holds that one).
func expectProfiles(
    _ expected: [String: StoredProfile], in store: IDTokenStore, allowing extra: String? = nil, _ comment: String = "",
    sourceLocation: SourceLocation = #_sourceLocation
) async throws {
    var names = try await store.profileNames()
    if let extra { names.removeAll { $0 == extra } }
    #expect(names == expected.keys.sorted(), "\(comment)", sourceLocation: sourceLocation)
    for (name, profile) in expected {
        #expect(try await store.profile(named: name) == profile, "\(comment): \(name)", sourceLocation: sourceLocation)
    }
}

/// A format 1 store is read as it is and migrated in place at its first save: every profile
/// survives, with its sealing, its key and its name however long or odd.
@Suite(.timeLimit(.minutes(3)))
struct StoreMigrationTests {
    enum Sealing: String, CaseIterable, Sendable {
        case plain, explicitKey
    }

    /// Writes a format 1 store of 50 profiles sealed as `sealing` says; its key and the sealing a
    /// store opening it takes.
    private static func prepare(_ sealing: Sealing, at path: String) throws -> (profiles: [String: StoredProfile], bytes: Data, store: StoreSealing) {
        let profiles = FormatOneStore.profiles()
        switch sealing {
        case .plain:
            return (profiles, try FormatOneStore.write(profiles, to: path), .none)
        case .explicitKey:
            let key = try SymmetricKey.random()
            return (profiles, try FormatOneStore.write(profiles, to: path, key: key), .key(key))
        }
    }

    @Test(arguments: Sealing.allCases)
    func readingAFormatOneStoreDoesNotMigrateIt(_ sealing: Sealing) async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let (profiles, bytes, storeSealing) = try Self.prepare(sealing, at: path)
            let store = try IDTokenStore(path: path, sealing: storeSealing)
            #expect(try await store.formatVersion() == 1)
            try await expectProfiles(profiles, in: store)
            _ = try await store.protection()
            #expect(try await store.formatVersion() == 1)
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes, "a read leaves the file as it is")
            #expect(!FileManager.default.fileExists(atPath: store.profileDirectory))
            #expect(try entriesBelow(directory, containing: ".migrating-").isEmpty)
        }
    }

    @Test(arguments: Sealing.allCases)
    func theFirstSaveMigratesAndEveryProfileReadsBackEqual(_ sealing: Sealing) async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/state/tokens.json"
            let prepared = try Self.prepare(sealing, at: path)
            var profiles = prepared.profiles
            let storeSealing = prepared.store
            let store = try IDTokenStore(path: path, sealing: storeSealing)
            let namesBefore = try await store.profileNames()
            try await expectProfiles(profiles, in: store)  // this instance has the format 1 file in memory

            let changed = sampleProfile(1000, refreshToken: "refresh-secret-new")
            try await store.save(changed, as: "profile-07")
            profiles["profile-07"] = changed
            #expect(try await store.formatVersion() == 2)
            #expect(try await store.profileNames() == namesBefore)
            try await expectProfiles(profiles, in: store)
            // Another instance (another process) on the same path sees all of it.
            let other = try IDTokenStore(path: path, sealing: storeSealing)
            #expect(try await other.formatVersion() == 2)
            try await expectProfiles(profiles, in: other)

            // Every profile has its file, the long name's hashed, and nothing else is left behind.
            for name in profiles.keys {
                #expect(FileManager.default.fileExists(atPath: store.profileFilePath(for: name)), "\(name)")
            }
            #expect(StoreProfileFileName.encode(FormatOneStore.longName).hasPrefix("~"))
            #expect(store.profileFilePath(for: FormatOneStore.longName) == store.profileDirectory + "/p-" + StoreProfileFileName.encode(FormatOneStore.longName) + ".json")
            #expect(store.profileFilePath(for: FormatOneStore.resourceName) == store.profileDirectory + "/p-acme%230123456789abcdef0123456789abcdef.json")
            #expect(try entriesBelow(directory, containing: ".migrating-").isEmpty)
            #expect(try entriesBelow(directory, containing: ".tmp").isEmpty)
            #expect(try mode(of: store.profileDirectory) == 0o700)
            for file in try storeFiles(at: path).keys { #expect(try mode(of: file) == 0o600, "\(file)") }
            if sealing != .plain {
                #expect(try storeIsSealed(at: path))
                let text = try storeText(at: path)
                for profile in profiles.values {
                    #expect(!text.contains(profile.credentials.accessToken ?? "-") && !text.contains(profile.credentials.refreshToken ?? "-"))
                }
            } else {
                #expect(try storeIsPlain(at: path))
            }
        }
    }

    /// A whole-store transaction migrates as a save does.
    @Test func aWholeStoreTransactionMigrates() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            var profiles = try Self.prepare(.plain, at: path).profiles
            let store = try IDTokenStore(path: path, sealing: .none)
            try await store.withExclusiveAccess { transaction in
                #expect(transaction.profiles == profiles, "the transaction holds the format 1 file's profiles")
                transaction["profile-10"] = nil
                transaction["added"] = sampleProfile(77)
            }
            profiles["profile-10"] = nil
            profiles["added"] = sampleProfile(77)
            #expect(try await store.formatVersion() == 2)
            try await expectProfiles(profiles, in: try IDTokenStore(path: path, sealing: .none))
            #expect(!FileManager.default.fileExists(atPath: store.profileFilePath(for: "profile-10")))
        }
    }

    /// `migrate(to:)` on a format 1 store: format 2, sealed as asked, every profile there.
    @Test func aSealingMigrationOfAFormatOneStoreEndsInFormatTwo() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let profiles = try Self.prepare(.plain, at: path).profiles
            let key = try SymmetricKey.random()
            let store = try IDTokenStore(path: path, sealing: .key(key))
            _ = try await store.migrate(to: .key(key))
            #expect(try await store.formatVersion() == 2)
            #expect(try storeIsSealed(at: path))
            try await expectProfiles(profiles, in: try IDTokenStore(path: path, sealing: .key(key)))

            // And to plaintext, by choice: marked so in the marker.
            let sealedPath = directory + "/sealed.json"
            let sealed = try Self.prepare(.explicitKey, at: sealedPath)
            let sealedStore = try IDTokenStore(path: sealedPath, sealing: sealed.store)
            #expect(try await sealedStore.migrate(to: .none).level == StoreProtection.plaintext)
            #expect(try await sealedStore.formatVersion() == 2)
            #expect(try storeIsPlain(at: sealedPath))
            #expect(try storeMarker(at: sealedPath)["storage"] as? String == "plaintext")
            try await expectProfiles(sealed.profiles, in: try IDTokenStore(path: sealedPath, sealing: .none))
        }
    }

    /// A format 1 file sealed with a provider's key: migrated, the store keeps that key (named in
    /// the marker and in every file), and the provider makes no other.
    @Test func aKeyringSealedStoreKeepsItsKey() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let provider = MemoryKeyProvider()
            let key = try SymmetricKey.random()
            let id = "0123456789abcdef0123456789abcdef"
            try await provider.store(key, id: id, label: "test")
            var profiles = FormatOneStore.profiles()
            try FormatOneStore.write(profiles, to: path, key: key, reference: .init(provider: provider.name, id: id))
            let store = try IDTokenStore(path: path, sealing: .provider(provider))
            try await expectProfiles(profiles, in: store)
            try await store.save(sampleProfile(500), as: "new")
            profiles["new"] = sampleProfile(500)
            #expect(try await store.formatVersion() == 2)
            #expect(try storeKeyReference(at: path) == ["provider": provider.name, "id": id])
            #expect(provider.ids == [id])
            for (file, document) in try storeProfileDocuments(at: path) {
                #expect((document["sealed"] as? [String: Any])?["key"] as? [String: String] == ["provider": provider.name, "id": id], "\(file)")
            }
            try await expectProfiles(profiles, in: try IDTokenStore(path: path, sealing: .provider(provider)))
            #expect(try await store.protection().level == provider.name)
        }
    }

    /// A format 1 file kept plain by its user's choice stays plain by choice.
    @Test func aPlainByChoiceStoreStaysPlainByChoice() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let profiles = FormatOneStore.profiles(count: 6)
            try FormatOneStore.write(profiles, to: path, chosenPlaintext: true)
            let provider = MemoryKeyProvider()
            let store = try IDTokenStore(path: path, sealing: .automatic(AutomaticSealing(providers: [provider], usesExplicitKey: false)))
            #expect(try await store.protection() == StoreProtection(level: "plaintext", detail: "by choice"))
            try await store.save(sampleProfile(9), as: "profile-00")
            #expect(try await store.formatVersion() == 2)
            #expect(try storeMarker(at: path)["storage"] as? String == "plaintext")
            #expect(try storeIsPlain(at: path) && provider.ids.isEmpty)
            #expect(try await store.protection() == StoreProtection(level: "plaintext", detail: "by choice"))
        }
    }

    /// What a migration killed before its commit point leaves (its directory renamed into place but
    /// no marker, and another's temporary directory): the store is still format 1 and fully
    /// readable, and the next save migrates over the leftovers.
    @Test func leftoversOfAnUnfinishedMigrationAreReplaced() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let profiles = try Self.prepare(.plain, at: path).profiles
            for leftover in [path + ".d", path + ".d.migrating-abc123"] {
                try FileManager.default.createDirectory(atPath: leftover, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
                try #require(FileManager.default.createFile(
                    atPath: leftover + "/p-stale.json", contents: Data(#"{"format":"loginkit.profile","version":2,"name":"stale","profile":{}}"#.utf8),
                    attributes: [.posixPermissions: 0o600]))
            }
            let store = try IDTokenStore(path: path, sealing: .none)
            #expect(try await store.formatVersion() == 1)
            try await expectProfiles(profiles, in: store)
            try await store.save(sampleProfile(3), as: "profile-03")
            var expected = profiles
            expected["profile-03"] = sampleProfile(3)
            #expect(try await store.formatVersion() == 2)
            try await expectProfiles(expected, in: try IDTokenStore(path: path, sealing: .none))
            #expect(try entriesBelow(directory, containing: ".migrating-").isEmpty)
        }
    }
}
