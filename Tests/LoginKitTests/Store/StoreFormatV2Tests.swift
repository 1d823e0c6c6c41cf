import Foundation
import LoginKit
import LoginKitJOSE
import LoginKitTestSupport
import Testing

/// How a LoginKit that reads format 1 only reads a store's path: a verbatim copy of format 1's
/// `StoreFormat.Header` and of the checks of `StoreFormat.header(_:path:)`, with format 1's
/// `currentVersion`. Kept apart from the store's own code on purpose: it stands for a released
/// LoginKit, which no change to this one can change.
private enum FormatOneReader {
    static let formatName = "loginkit.tokens"
    static let currentVersion = 1

    struct KeyReference: Codable, Hashable {
        var provider: String
        var id: String
    }

    struct Sealed: Codable {
        var alg: String
        var key: KeyReference?
        var box: String
    }

    struct Header: Decodable {
        let format: String
        let version: Int
        let sealed: Sealed?
        let storage: String?
    }

    static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        return decoder
    }

    static func header(_ bytes: [UInt8], path: String) throws(TokenStoreError) -> Header {
        let header: Header
        do {
            header = try decoder().decode(Header.self, from: Data(bytes))
        } catch {
            throw TokenStoreError(.corrupt, path: path, "\(path) is not a LoginKit token store (no readable format header); it is kept, and the next save moves it aside")
        }
        guard header.format == formatName else {
            throw TokenStoreError(.corrupt, path: path, "\(path) has format \"\(header.format)\", not \(formatName)")
        }
        guard header.version <= currentVersion else {
            throw TokenStoreError(
                .unsupportedVersion, path: path,
                "\(path) was written by a newer LoginKit (format version \(header.version), this one reads \(currentVersion)); upgrade LoginKit — the file is left untouched"
            )
        }
        guard header.version >= 1 else {
            throw TokenStoreError(.corrupt, path: path, "\(path) has an invalid format version \(header.version)")
        }
        return header
    }
}

/// Replaces the file at `path` with `data` (mode 0600), as someone editing or copying files would.
private func replace(_ path: String, with data: Data) throws {
    try #require(FileManager.default.createFile(atPath: path, contents: data, attributes: [.posixPermissions: 0o600]))
}

/// Format 2 on disk (docs/storage.md): the marker an older LoginKit refuses as newer, a file per
/// profile bound to its name, nothing in the clear when sealed, private modes, and a store whose
/// directory is gone refused rather than made anew.
@Suite(.timeLimit(.minutes(3)))
struct StoreFormatV2Tests {
    /// Every marker this LoginKit writes — plain, plain by choice, sealed with a key given, sealed
    /// with a provider's — meets an older LoginKit's version check, not its corrupt branch: it
    /// refuses the store as newer and leaves it untouched (a "corrupt" store would be moved aside
    /// by its next save).
    @Test func anOlderLoginKitRefusesEveryMarkerAsNewer() async throws {
        try await withTemporaryDirectory { directory in
            let provider = MemoryKeyProvider()
            let key = try SymmetricKey.random()
            let stores: [(String, StoreSealing)] = [("plain", .none), ("chosen", .none), ("key", .key(key)), ("provider", .provider(provider))]
            for (name, sealing) in stores {
                let path = directory + "/\(name).json"
                let store = try IDTokenStore(path: path, sealing: sealing)
                try await store.save(sampleProfile(), as: "default")
                if name == "chosen" { _ = try await store.migrate(to: .none) }
                #expect(try await store.formatVersion() == 2)
                let marker = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
                let error = #expect(throws: TokenStoreError.self, "\(name)") { _ = try FormatOneReader.header(marker, path: path) }
                #expect(error?.code == .unsupportedVersion, "\(name): \(error?.message ?? "")")
                #expect(error?.message.contains("written by a newer LoginKit (format version 2") == true, "\(name)")
                #expect(try storeMarker(at: path)["layout"] as? String == "directory")
                #expect(try storeMarker(at: path)["sealed"] == nil, "\(name): no member format 1 would decode as its own")
            }
            #expect(try storeMarker(at: directory + "/chosen.json")["storage"] as? String == "plaintext")
            #expect(try storeKeyReference(at: directory + "/provider.json")?["provider"] == provider.name)
        }
    }

    /// A sealed profile's file copied over another profile's does not open as that profile, nor
    /// with its clear name edited to match: the seal binds the name. The other profile reads on.
    @Test func aSealedProfileFileCopiedOverAnothersDoesNotOpenAsThatProfile() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let key = try SymmetricKey.random()
            let store = try IDTokenStore(path: path, sealing: .key(key))
            let alice = sampleProfile(1, refreshToken: "refresh-alice"), bob = sampleProfile(2, refreshToken: "refresh-bob")
            try await store.save(alice, as: "alice")
            try await store.save(bob, as: "bob")
            #expect(try await store.profile(named: "bob") == bob)  // cached in this instance
            let bobFile = store.profileFilePath(for: "bob")
            let aliceBytes = try Data(contentsOf: URL(fileURLWithPath: store.profileFilePath(for: "alice")))

            try replace(bobFile, with: aliceBytes)
            let copied = try #require(await thrown { try await IDTokenStore(path: path, sealing: .key(key)).profile(named: "bob") } as? TokenStoreError)
            #expect(copied.code == .corrupt || copied.code == .wrongKey, "\(copied)")
            #expect(copied.path == bobFile)
            let seenByTheFirst = try? await store.profile(named: "bob")
            #expect(seenByTheFirst != alice, "never the other profile's tokens")

            var document = try #require(try JSONSerialization.jsonObject(with: aliceBytes) as? [String: Any])
            document["name"] = "bob"
            try replace(bobFile, with: try JSONSerialization.data(withJSONObject: document))
            let renamed = try #require(await thrown { try await IDTokenStore(path: path, sealing: .key(key)).profile(named: "bob") } as? TokenStoreError)
            #expect(renamed.code == .wrongKey, "\(renamed)")
            #expect(renamed.path == bobFile)

            #expect(try await IDTokenStore(path: path, sealing: .key(key)).profile(named: "alice") == alice)
        }
    }

    /// A plain profile's file copied over another profile's names the profile it holds: refused.
    @Test func aPlainProfileFileCopiedOverAnothersIsRefused() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let store = try IDTokenStore(path: path, sealing: .none)
            let alice = sampleProfile(1, refreshToken: "refresh-alice")
            try await store.save(alice, as: "alice")
            try await store.save(sampleProfile(2, refreshToken: "refresh-bob"), as: "bob")
            let bobFile = store.profileFilePath(for: "bob")
            try replace(bobFile, with: try Data(contentsOf: URL(fileURLWithPath: store.profileFilePath(for: "alice"))))
            let error = try #require(await thrown { try await IDTokenStore(path: path, sealing: .none).profile(named: "bob") } as? TokenStoreError)
            #expect(error.code == .corrupt)
            #expect(error.path == bobFile)
            #expect(error.message.contains(bobFile))
            let seenByTheFirst = try? await store.profile(named: "bob")
            #expect(seenByTheFirst != alice, "never the other profile's tokens")
            #expect(try await IDTokenStore(path: path, sealing: .none).profile(named: "alice") == alice)
        }
    }

    /// Sealed, no file of the store holds a token, a refresh token, an ID token or a DPoP key in the
    /// clear — profiles saved one by one and several in one transaction (through the journal) —
    /// and every directory is 0700, every file 0600.
    @Test func aSealedStoreHoldsNoSecretInTheClearAndItsFilesArePrivate() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/state/tokens.json"
            let key = try SymmetricKey.random()
            let store = try IDTokenStore(path: path, sealing: .key(key))
            let names = ["default", "Work", FormatOneStore.resourceName, FormatOneStore.longName, "Ünïcode/../.hidden"]
            var profiles: [String: StoredProfile] = [:]
            for (index, name) in names.enumerated() {
                profiles[name] = sampleProfile(index + 1, refreshToken: "refresh-secret-\(index + 1)")
                try await store.save(try #require(profiles[name]), as: name)
            }
            let dpopKey = try DPoPKey.generate()
            var bound = sampleProfile(40, refreshToken: "refresh-secret-bound")
            bound.credentials.tokenType = "DPoP"
            bound.credentials.proofKey = dpopKey
            try await store.withExclusiveAccess { transaction in
                transaction["bound"] = bound
                transaction["second"] = sampleProfile(41, refreshToken: "refresh-secret-second")
                transaction["default"] = sampleProfile(42, refreshToken: "refresh-secret-default")
            }
            profiles["bound"] = bound
            profiles["second"] = sampleProfile(41, refreshToken: "refresh-secret-second")
            profiles["default"] = sampleProfile(42, refreshToken: "refresh-secret-default")
            try await expectProfiles(profiles, in: try IDTokenStore(path: path, sealing: .key(key)))

            #expect(try storeIsSealed(at: path))
            let text = try storeText(at: path)
            let privateMember = try #require(try dpopKey.privateJWK()["d"]?.stringValue)
            for secret in ["access-secret", "refresh-secret", "eyJhbGciOiJSUzI1NiJ9", "dpop_key", privateMember, "https://issuer.test", "user-1"] {
                #expect(!text.contains(secret), "\(secret) in the clear")
            }
            #expect(!FileManager.default.fileExists(atPath: store.profileDirectory + "/journal.json"), "the journal is gone once applied")

            #expect(try mode(of: directory + "/state") == 0o700)
            #expect(try mode(of: path) == 0o600)
            let storeDirectory = store.profileDirectory
            #expect(try mode(of: storeDirectory) == 0o700)
            for relative in try FileManager.default.subpathsOfDirectory(atPath: storeDirectory) {
                let entry = storeDirectory + "/" + relative
                let type = try FileManager.default.attributesOfItem(atPath: entry)[.type] as? FileAttributeType
                #expect(type == .typeDirectory || type == .typeRegular, "\(relative): no links or other kinds of file")
                #expect(try mode(of: entry) == (type == .typeDirectory ? 0o700 : 0o600), "\(relative)")
            }
            for file in [path + ".lock", path + ".shared.lock"] where FileManager.default.fileExists(atPath: file) {
                #expect(try mode(of: file) == 0o600, "\(file)")
            }
        }
    }

    /// The marker whose directory was removed: the store is corrupt, naming both, for reads and
    /// saves alike, and nothing is made anew in its place (an empty store would look like a
    /// logout); the marker is left as it was.
    @Test func aMarkerWhoseDirectoryIsGoneIsCorruptAndNothingIsRecreated() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let store = try IDTokenStore(path: path, sealing: .none)
            try await store.save(sampleProfile(), as: "default")
            let marker = try Data(contentsOf: URL(fileURLWithPath: path))
            try FileManager.default.removeItem(atPath: store.profileDirectory)

            let reader = try IDTokenStore(path: path, sealing: .none)
            let error = try #require(await thrown { try await reader.profile(named: "default") } as? TokenStoreError)
            #expect(error.code == .corrupt)
            #expect(error.path == path)
            #expect(error.message.contains(path) && error.message.contains(store.profileDirectory), "\(error.message)")
            #expect((await thrown { try await reader.profileNames() } as? TokenStoreError)?.code == .corrupt)
            #expect((await thrown { try await reader.formatVersion() } as? TokenStoreError)?.code == .corrupt)
            let saved = await thrown { try await reader.save(sampleProfile(2), as: "default") } as? TokenStoreError
            #expect(saved?.code == .corrupt)
            let whole = await thrown { try await reader.withExclusiveAccess { $0["other"] = sampleProfile(3) } } as? TokenStoreError
            #expect(whole?.code == .corrupt)
            // The instance that had the store open before saves nothing either.
            #expect(await thrown { try await store.save(sampleProfile(4), as: "default") } is TokenStoreError)
            #expect(!FileManager.default.fileExists(atPath: store.profileDirectory), "not made anew")
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == marker)
            #expect(try filesSetAside(in: directory).isEmpty)
        }
    }

    /// A damaged profile file costs that profile only: the others read on, the profile's read says
    /// which file, and its next save keeps the damaged file aside before writing.
    @Test func aDamagedProfileFileIsThatProfilesAloneAndIsKeptAsideByItsNextSave() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let store = try IDTokenStore(path: path, sealing: .none)
            try await store.save(sampleProfile(1), as: "alice")
            try await store.save(sampleProfile(2), as: "bob")
            let bobFile = store.profileFilePath(for: "bob")
            let garbage = Data(#"{"format":"loginkit.profile","version":2,"name":"bob","profile":{"credenti"#.utf8)
            try replace(bobFile, with: garbage)

            let reader = try IDTokenStore(path: path, sealing: .none)
            #expect(try await reader.profile(named: "alice") == sampleProfile(1))
            let error = try #require(await thrown { try await reader.profile(named: "bob") } as? TokenStoreError)
            #expect(error.code == .corrupt)
            #expect(error.path == bobFile)
            #expect(try await reader.profileNames() == ["alice", "bob"])

            try await reader.save(sampleProfile(3), as: "bob")
            #expect(try await IDTokenStore(path: path, sealing: .none).profile(named: "bob") == sampleProfile(3))
            #expect(Array(try filesSetAside(in: directory).values) == [garbage], "kept once, byte for byte")
            #expect(try await reader.profile(named: "alice") == sampleProfile(1))
        }
    }

    /// A profile file from a newer LoginKit is refused as newer, and a save leaves it untouched.
    @Test func aNewerProfileFileIsRefusedAndLeftAlone() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let store = try IDTokenStore(path: path, sealing: .none)
            try await store.save(sampleProfile(1), as: "default")
            let file = store.profileFilePath(for: "default")
            let newer = Data(#"{"format":"loginkit.profile","version":3,"name":"default","future":{}}"#.utf8)
            try replace(file, with: newer)
            let reader = try IDTokenStore(path: path, sealing: .none)
            #expect((await thrown { try await reader.profile(named: "default") } as? TokenStoreError)?.code == .unsupportedVersion)
            #expect((await thrown { try await reader.save(sampleProfile(2), as: "default") } as? TokenStoreError)?.code == .unsupportedVersion)
            #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == newer)
        }
    }
}
