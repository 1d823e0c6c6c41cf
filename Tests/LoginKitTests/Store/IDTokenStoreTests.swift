import Foundation
import LoginKit
import LoginKitJOSE
import LoginKitTestSupport
import Testing

@Suite(.timeLimit(.minutes(2)))
struct IDTokenStoreTests {
    @Test func roundTripsProfiles() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/state/loginkit/tokens.json"
            let store = try IDTokenStore(path: path, sealing: .none)
            #expect(try await store.profile(named: "default") == nil)
            try await store.save(sampleProfile(1), as: "default")
            try await store.save(sampleProfile(2), as: "work")
            #expect(try await store.profile(named: "default") == sampleProfile(1))
            #expect(try await store.profileNames() == ["default", "work"])

            let reopened = try IDTokenStore(path: path, sealing: .none)
            #expect(try await reopened.profile(named: "work") == sampleProfile(2))
            try await reopened.removeProfile(named: "work")
            #expect(try await store.profileNames() == ["default"])  // the other instance notices the change
        }
    }

    @Test func createsPrivateDirectoriesAndFiles() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/a/b/tokens.json"
            let store = try IDTokenStore(path: path, sealing: .none)
            try await store.save(sampleProfile(), as: "default")
            #expect(try mode(of: directory + "/a/b") == 0o700)
            #expect(try mode(of: path) == 0o600)
            #expect(try mode(of: path + ".lock") == 0o600)
            #expect(try mode(of: store.profileDirectory) == 0o700)
            #expect(try mode(of: store.profileFilePath(for: "default")) == 0o600)
            let leftovers = try entriesBelow(directory + "/a/b", containing: ".tmp")
            #expect(leftovers.isEmpty)
        }
    }

    @Test(arguments: [0o640, 0o604, 0o644, 0o660])
    func refusesFilesOthersCanRead(_ permissions: Int) async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let store = try IDTokenStore(path: path, sealing: .none)
            try await store.save(sampleProfile(), as: "default")
            try FileManager.default.setAttributes([.posixPermissions: permissions], ofItemAtPath: path)
            let error = try #require(await thrown { try await IDTokenStore(path: path, sealing: .none).profile(named: "default") } as? TokenStoreError)
            #expect(error.code == .insecurePermissions)
            #expect(error.message.contains("chmod 600 \(path)"))
            let saveError = try #require(await thrown { try await store.save(sampleProfile(2), as: "default") } as? TokenStoreError)
            #expect(saveError.code == .insecurePermissions)
        }
    }

    /// A profile's own file is held to the same rule as the store's path.
    @Test(arguments: [0o640, 0o604, 0o644, 0o660])
    func refusesProfileFilesOthersCanRead(_ permissions: Int) async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let store = try IDTokenStore(path: path, sealing: .none)
            try await store.save(sampleProfile(), as: "default")
            let file = store.profileFilePath(for: "default")
            try FileManager.default.setAttributes([.posixPermissions: permissions], ofItemAtPath: file)
            let error = try #require(await thrown { try await IDTokenStore(path: path, sealing: .none).profile(named: "default") } as? TokenStoreError)
            #expect(error.code == .insecurePermissions)
            #expect(error.message.contains("chmod 600 \(file)"), "\(error.message)")
            let saveError = try #require(await thrown { try await store.save(sampleProfile(2), as: "default") } as? TokenStoreError)
            #expect(saveError.code == .insecurePermissions)
        }
    }

    @Test func refusesADirectoryOthersCanWrite() async throws {
        try await withTemporaryDirectory { directory in
            let shared = directory + "/shared"
            try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o777])
            try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: shared)
            let error = try #require(await thrown { try await IDTokenStore(path: shared + "/tokens.json", sealing: .none).save(sampleProfile(), as: "x") } as? TokenStoreError)
            #expect(error.code == .insecurePermissions)
            #expect(error.message.contains("chmod 700"))
        }
    }

    @Test func refusesANewerFormatAndLeavesItAlone() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let newer = Data(#"{"format":"loginkit.tokens","version":3,"layout":"directory","profiles":{},"future":true}"#.utf8)
            #expect(FileManager.default.createFile(atPath: path, contents: newer, attributes: [.posixPermissions: 0o600]))
            let store = try IDTokenStore(path: path, sealing: .none)
            #expect((await thrown { try await store.profile(named: "default") } as? TokenStoreError)?.code == .unsupportedVersion)
            #expect((await thrown { try await store.save(sampleProfile(), as: "default") } as? TokenStoreError)?.code == .unsupportedVersion)
            #expect(FileManager.default.contents(atPath: path) == newer)
            #expect(!FileManager.default.fileExists(atPath: store.profileDirectory))
        }
    }

    @Test func aCorruptFileThrowsAndIsMovedAsideOnTheNextSave() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let garbage = Data(#"{"format":"loginkit.tokens","version":1,"profiles":{"default":{"credenti"#.utf8)
            #expect(FileManager.default.createFile(atPath: path, contents: garbage, attributes: [.posixPermissions: 0o600]))
            let store = try IDTokenStore(path: path, sealing: .none)
            let error = try #require(await thrown { try await store.profile(named: "default") } as? TokenStoreError)
            #expect(error.code == .corrupt)
            #expect(error.path == path)
            #expect(error.message.contains(path))

            try await store.save(sampleProfile(), as: "default")
            #expect(try await store.profile(named: "default") == sampleProfile())
            let asides = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasPrefix("tokens.json.corrupt-") }
            #expect(asides.count == 1)
            #expect(FileManager.default.contents(atPath: directory + "/" + (asides.first ?? "")) == garbage)
        }
    }

    @Test func aChangeByAnotherWriterIsNoticed() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let reader = try IDTokenStore(path: path, sealing: .none)
            let writer = try IDTokenStore(path: path, sealing: .none)
            for value in 1...20 {
                try await writer.save(sampleProfile(value), as: "default")
                #expect(counter(of: try await reader.profile(named: "default")) == value)
            }
        }
    }

    @Test func concurrentSavesLeaveOneCompleteValue() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let store = try IDTokenStore(path: path, sealing: .none)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for value in 1...100 {
                    group.addTask { try await store.save(sampleProfile(value), as: "default") }
                }
                try await group.waitForAll()
            }
            let fresh = try IDTokenStore(path: path, sealing: .none)
            let saved = try #require(counter(of: try await fresh.profile(named: "default")))
            #expect((1...100).contains(saved))
            #expect(try await fresh.profile(named: "default") == sampleProfile(saved))
        }
    }

    @Test func concurrentReadModifyWritesLoseNothing() async throws {
        try await withTemporaryDirectory { directory in
            let store = try IDTokenStore(path: directory + "/tokens.json", sealing: .none)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<50 {
                    group.addTask {
                        try await store.withExclusiveAccess { transaction in
                            let current = counter(of: transaction["default"]) ?? 0
                            await Task.yield()  // invite interleaving: the lock must prevent it
                            transaction["default"] = sampleProfile(current + 1)
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(counter(of: try await store.profile(named: "default")) == 50)
        }
    }

    @Test func aThrowingTransactionWritesNothing() async throws {
        try await withTemporaryDirectory { directory in
            let store = try IDTokenStore(path: directory + "/tokens.json", sealing: .none)
            try await store.save(sampleProfile(1), as: "default")
            struct Abort: Error {}
            _ = await thrown {
                try await store.withExclusiveAccess { transaction in
                    transaction["default"] = sampleProfile(2)
                    throw Abort()
                }
            }
            #expect(counter(of: try await store.profile(named: "default")) == 1)
        }
    }

    @Test func theDefaultPathFollowsTheEnvironment() {
        #expect(IDTokenStore.defaultPath(environment: ["LOGINKIT_STORE": "/x/t.json", "HOME": "/home/u"]) == "/x/t.json")
        #expect(IDTokenStore.defaultPath(environment: ["XDG_STATE_HOME": "/s", "HOME": "/home/u"]) == "/s/loginkit/tokens.json")
        #expect(IDTokenStore.defaultPath(environment: ["HOME": "/home/u"]) == "/home/u/.local/state/loginkit/tokens.json")
        #expect(IDTokenStore.defaultPath(environment: ["XDG_STATE_HOME": "relative", "HOME": "/home/u"]) == "/home/u/.local/state/loginkit/tokens.json")
    }

    /// A marker at the store's path, and the profile in a file of its own (docs/storage.md).
    @Test func theFilesFollowTheDocumentedFormat() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let store = try IDTokenStore(path: path, sealing: .none)
            try await store.save(sampleProfile(), as: "default")
            let marker = try JSONValue.parse(Array(try Data(contentsOf: URL(fileURLWithPath: path))))
            #expect(marker["format"]?.stringValue == "loginkit.tokens")
            #expect(marker["version"]?.int64Value == 2)
            #expect(marker["layout"]?.stringValue == "directory")
            #expect(marker["profiles"] == nil && marker["sealing"] == nil && marker["sealed"] == nil)
            #expect(store.profileFilePath(for: "default") == path + ".d/p-default.json")
            let document = try JSONValue.parse(Array(try Data(contentsOf: URL(fileURLWithPath: store.profileFilePath(for: "default")))))
            #expect(document["format"]?.stringValue == "loginkit.profile")
            #expect(document["version"]?.int64Value == 2)
            #expect(document["name"]?.stringValue == "default")
            #expect(document["sealed"] == nil)
            let profile = try #require(document["profile"])
            #expect(profile["credentials"]?["refresh_token"]?.stringValue == "refresh-secret")
            #expect(profile["source"]?["kind"]?.stringValue == "oauth2")
            #expect(profile["source"]?["client_id"]?.stringValue == "cli")
            #expect(profile["updated_at"]?.int64Value == 1_800_000_000)
        }
    }
}

@Suite(.timeLimit(.minutes(2)))
struct SealedStoreTests {
    @Test func sealedRoundTripHidesTheTokens() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let key = try SymmetricKey.random()
            let store = try IDTokenStore(path: path, sealing: .key(key))
            #expect(store.isSealed)
            try await store.save(sampleProfile(7), as: "default")
            let text = try storeText(at: path)
            #expect(!text.contains("access-secret"))
            #expect(!text.contains("refresh-secret"))
            #expect(try String(contentsOfFile: path, encoding: .utf8).contains("A256GCM"))
            #expect(try String(contentsOfFile: store.profileFilePath(for: "default"), encoding: .utf8).contains("A256GCM"))
            #expect(try storeIsSealed(at: path))
            #expect(try await IDTokenStore(path: path, sealing: .key(key)).profile(named: "default") == sampleProfile(7))
        }
    }

    /// A store that seals with a key reads no plain file (whoever wrote it would choose the issuer
    /// and endpoints the next refresh trusts): it is refused as corrupt and moved aside by the next
    /// save, which seals. A migration still reads it, to seal it.
    @Test func aStoreWithAKeyDoesNotReadAPlainFile() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let key = try SymmetricKey.random()
            try await IDTokenStore(path: path, sealing: .none).save(sampleProfile(3), as: "default")
            let plainFiles = try storeFiles(at: path)
            let sealed = try IDTokenStore(path: path, sealing: .key(key))
            let error = try #require(await thrown { try await sealed.profile(named: "default") } as? TokenStoreError)
            #expect(error.code == .corrupt)
            #expect(error.message.contains("not sealed"))

            try await sealed.save(sampleProfile(4), as: "default")
            // Every file of the plain store is kept aside, once, byte for byte.
            let asides = Array(try filesSetAside(in: directory).values)
            for (file, bytes) in plainFiles { #expect(asides.filter { $0 == bytes }.count == 1, "\(file)") }
            #expect(try String(contentsOfFile: path, encoding: .utf8).contains("A256GCM"))
            #expect(try storeIsSealed(at: path))
            #expect(try await sealed.profile(named: "default") == sampleProfile(4))
        }
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let key = try SymmetricKey.random()
            try await IDTokenStore(path: path, sealing: .none).save(sampleProfile(5), as: "default")
            let store = try IDTokenStore(path: path, sealing: .key(key))
            _ = try await store.migrate(to: .key(key))
            #expect(try String(contentsOfFile: path, encoding: .utf8).contains("A256GCM"))
            #expect(try storeIsSealed(at: path))
            #expect(!(try storeText(at: path)).contains("refresh-secret"))
            #expect(try await store.profile(named: "default") == sampleProfile(5))
        }
    }

    @Test func aWrongKeyIsTypedAndTheFileUntouched() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            try await IDTokenStore(path: path, sealing: .key(try SymmetricKey.random())).save(sampleProfile(), as: "default")
            let before = try storeFiles(at: path)
            let other = try IDTokenStore(path: path, sealing: .key(try SymmetricKey.random()))
            #expect((await thrown { try await other.profile(named: "default") } as? TokenStoreError)?.code == .wrongKey)
            #expect((await thrown { try await other.save(sampleProfile(2), as: "default") } as? TokenStoreError)?.code == .wrongKey)
            let unkeyed = try IDTokenStore(path: path, sealing: .none)
            #expect((await thrown { try await unkeyed.profile(named: "default") } as? TokenStoreError)?.code == .sealedWithoutKey)
            #expect(try storeFiles(at: path) == before)
            #expect(try filesSetAside(in: directory).isEmpty)
        }
    }

    @Test func oneFlippedByteIsDetected() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let key = try SymmetricKey.random()
            let writer = try IDTokenStore(path: path, sealing: .key(key))
            try await writer.save(sampleProfile(), as: "default")
            let file = writer.profileFilePath(for: "default")
            var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: file)))
            // The box's value starts at the first quote after `"box"` and its colon.
            let member = try #require(bytes.indices.first { bytes[$0...].starts(with: Array(#""box""#.utf8)) })
            let colon = try #require(bytes[(member + 5)...].firstIndex(of: UInt8(ascii: ":")))
            let quote = try #require(bytes[(colon + 1)...].firstIndex(of: UInt8(ascii: "\"")))
            let position = quote + 1 + 40
            try #require(position < bytes.count && bytes[position] != UInt8(ascii: "\""))
            bytes[position] = bytes[position] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
            #expect(FileManager.default.createFile(atPath: file, contents: Data(bytes), attributes: [.posixPermissions: 0o600]))
            let store = try IDTokenStore(path: path, sealing: .key(key))
            #expect((await thrown { try await store.profile(named: "default") } as? TokenStoreError)?.code == .wrongKey)
        }
    }

    @Test func theKeyComesFromTheEnvironmentOrAKeyFile() async throws {
        try await withTemporaryDirectory { directory in
            let key = try SecureRandom.bytes(32)
            let base64 = Data(key).base64EncodedString()
            let fromEnvironment = try IDTokenStore(path: directory + "/a.json", sealing: .environment, environment: ["LOGINKIT_STORE_KEY": base64])
            #expect(fromEnvironment.isSealed)
            try await fromEnvironment.save(sampleProfile(), as: "default")

            let keyFile = directory + "/store.key"
            #expect(FileManager.default.createFile(atPath: keyFile, contents: Data((base64 + "\n").utf8), attributes: [.posixPermissions: 0o600]))
            let fromFile = try IDTokenStore(path: directory + "/a.json", sealing: .keyFile(keyFile))
            #expect(try await fromFile.profile(named: "default") == sampleProfile())

            #expect(!(try IDTokenStore(path: directory + "/b.json", sealing: .environment, environment: [:])).isSealed)
            // The environment is consulted only when the caller says so.
            #expect(!(try IDTokenStore(path: directory + "/d.json", environment: ["LOGINKIT_STORE_KEY": base64])).isSealed)
            #expect(throws: TokenStoreError.self) { try IDTokenStore(path: directory + "/c.json", sealing: .environment, environment: ["LOGINKIT_STORE_KEY": "c2hvcnQ="]) }
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: keyFile)
            #expect(throws: TokenStoreError.self) { try IDTokenStore(path: directory + "/a.json", sealing: .keyFile(keyFile)) }
        }
    }
}

