import Foundation
import LoginKit
import LoginKitTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The directory that holds an `IDTokenStore`: shared, sticky or symlinked directories are refused
/// with advice that fits them (docs/storage.md, "Where").
@Suite(.timeLimit(.minutes(3)))
struct StoreDirectoryTests {
    @Test func aSharedStickyDirectoryIsRefusedWithTheAdviceToUseAPrivateOne() async throws {
        try await withTemporaryDirectory { directory in
            let shared = directory + "/shared"
            try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: false)
            try #require(chmod(shared, 0o1777) == 0)
            let path = shared + "/tokens.json"
            let error = try #require(await thrown { try await IDTokenStore(path: path, sealing: .none).save(sampleProfile(), as: "x") } as? TokenStoreError)
            #expect(error.code == .insecurePermissions)
            #expect(error.message.contains("~/.local/state/loginkit"), "\(error.message)")
            #expect(!error.message.contains("chmod"), "a sticky directory is meant to be shared: \(error.message)")
            #expect(!FileManager.default.fileExists(atPath: path))
            #expect(!FileManager.default.fileExists(atPath: path + ".lock"))
        }
    }

    /// `/tmp` itself (shared, sticky, root's): the advice is a private directory — never to
    /// `chmod 700 /tmp` (even when run as root) or to change its owner.
    @Test(.enabled(if: systemTemporaryDirectoryIsShared(), "needs a world-writable sticky /tmp"))
    func theSystemTemporaryDirectoryIsRefusedWithTheAdviceToUseAPrivateOne() async throws {
        let path = "/tmp/loginkit-test-\(UUID().uuidString).json"
        defer {
            unlink(path)
            unlink(path + ".lock")
        }
        let error = try #require(await thrown { try await IDTokenStore(path: path, sealing: .none).save(sampleProfile(), as: "x") } as? TokenStoreError)
        #expect(error.code == .insecurePermissions || error.code == .wrongOwner)
        #expect(error.message.contains("~/.local/state/loginkit"), "\(error.message)")
        #expect(!error.message.contains("chmod"), "\(error.message)")
        #expect(!error.message.contains("fix its owner"), "\(error.message)")
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test func aSymlinkedStoreDirectoryIsRefusedForReadsAndWrites() async throws {
        try await withTemporaryDirectory { directory in
            let real = directory + "/real"
            let link = directory + "/link"
            try await IDTokenStore(path: real + "/tokens.json", sealing: .none).save(sampleProfile(1), as: "default")
            try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: real)
            let store = try IDTokenStore(path: link + "/tokens.json", sealing: .none)

            let read = try #require(await thrown { try await store.profile(named: "default") } as? TokenStoreError)
            #expect(read.code == .insecurePermissions)
            #expect(read.message.contains("symbolic link"), "\(read.message)")
            let write = try #require(await thrown { try await store.save(sampleProfile(2), as: "default") } as? TokenStoreError)
            #expect(write.code == .insecurePermissions)
            let untouched = try await IDTokenStore(path: real + "/tokens.json", sealing: .none).profile(named: "default")
            #expect(counter(of: untouched) == 1)
        }
    }

    /// Only the store's own directory must be real: links higher up the path (a home directory on
    /// another volume) are followed.
    @Test func aSymlinkHigherUpThePathIsFollowed() async throws {
        try await withTemporaryDirectory { directory in
            try FileManager.default.createDirectory(atPath: directory + "/volume", withIntermediateDirectories: false)
            try FileManager.default.createSymbolicLink(atPath: directory + "/home", withDestinationPath: directory + "/volume")
            let store = try IDTokenStore(path: directory + "/home/loginkit/tokens.json", sealing: .none)
            try await store.save(sampleProfile(3), as: "default")
            let saved = try await store.profile(named: "default")
            #expect(counter(of: saved) == 3)
            #expect(FileManager.default.fileExists(atPath: directory + "/volume/loginkit/tokens.json"))
        }
    }
}

/// Whether `/tmp` is a real, world-writable, sticky directory (as on every usual Linux system).
private func systemTemporaryDirectoryIsShared() -> Bool {
    var info = stat()
    return lstat("/tmp", &info) == 0 && info.st_mode & S_IFMT == S_IFDIR && info.st_mode & 0o1002 == 0o1002
}
