import Foundation
@testable import LoginKit
import LoginKitTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The file store's check, before a refresh, that a save would go through
/// (`StoreFileSystem.checkCanWrite`): a real write in the store's directory and room for the new
/// file, refused with an error that names the store and says no refresh was sent.
@Suite(.timeLimit(.minutes(2)))
struct StoreSaveCheckTests {
    @Test func aStoreThatCanTakeASavePassesAndLeavesNothingBehind() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            let store = try IDTokenStore(path: path, sealing: .none)
            try await store.save(sampleProfile(), as: "default")
            let before = try FileManager.default.subpathsOfDirectory(atPath: directory).sorted()
            try StoreFileSystem.checkCanWrite(path)
            try StoreFileSystem.checkCanWrite(store.profileFilePath(for: "default"))
            #expect(try FileManager.default.subpathsOfDirectory(atPath: directory).sorted() == before)
        }
    }

    @Test(arguments: [(ENOSPC, TokenStoreError.Code.noSpace), (EDQUOT, .noSpace), (EIO, .io)])
    func aWriteThatFailsIsRefusedNamingTheStore(failure: Int32, code: TokenStoreError.Code) async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            try await IDTokenStore(path: path, sealing: .none).save(sampleProfile(), as: "default")
            StoreFileSystem.injectWriteFailure(failure, in: directory)
            defer { StoreFileSystem.injectWriteFailure(nil, in: directory) }
            let error = #expect(throws: TokenStoreError.self) { try StoreFileSystem.checkCanWrite(path) }
            #expect(error?.code == code)
            #expect(error?.path == path)
            #expect(error?.errno == failure)
            #expect(error?.message.contains("the store \(path) cannot take a save now, so no refresh was sent") == true)
            let leftovers = try entriesBelow(directory, containing: ".tmp")
            #expect(leftovers.isEmpty)
        }
    }

    /// A real full file system: a 256 KiB tmpfs, filled. Runs where the test may mount one (root in
    /// a sandbox that lets it); the injected failures above cover the rest everywhere.
    @Test(.enabled(if: SmallTmpfs.canMount))
    func aFullFileSystemFailsTheCheckAndTheSave() async throws {
        try await withTemporaryDirectory { directory in
            let mountPoint = directory + "/small"
            try #require(SmallTmpfs.mount(at: mountPoint))
            defer { SmallTmpfs.unmount(mountPoint) }
            let path = mountPoint + "/tokens.json"
            let store = try IDTokenStore(path: path, sealing: .none)
            try await store.save(sampleProfile(), as: "default")
            try StoreFileSystem.checkCanWrite(path)

            SmallTmpfs.fill(mountPoint + "/filler")
            let refused = #expect(throws: TokenStoreError.self) { try StoreFileSystem.checkCanWrite(path) }
            #expect(refused?.code == .noSpace)
            #expect(refused?.message.contains("no refresh was sent") == true)
            let failedSave = await thrown { try await store.save(sampleProfile(2), as: "default") }
            #expect((failedSave as? TokenStoreError)?.code == .noSpace)
            #expect(try await IDTokenStore(path: path, sealing: .none).profile(named: "default") == sampleProfile())

            unlink(mountPoint + "/filler")
            try StoreFileSystem.checkCanWrite(path)
        }
    }
}

/// Mounting a small tmpfs for a test, where that is allowed.
enum SmallTmpfs {
    /// Whether a tmpfs can be mounted here (tried once, on a directory of its own).
    static let canMount: Bool = {
        let probe = FileManager.default.temporaryDirectory.appendingPathComponent("loginkit-tmpfs-\(UUID().uuidString)").path
        defer { rmdir(probe) }
        guard mount(at: probe) else { return false }
        unmount(probe)
        return true
    }()

    /// Creates `mountPoint` (mode 0700) and mounts a 256 KiB tmpfs there, private to its owner.
    static func mount(at mountPoint: String) -> Bool {
        guard mkdir(mountPoint, 0o700) == 0 || errno == EEXIST else { return false }
        return "size=256k,mode=0700".withCString { options in
            Glibc.mount("tmpfs", mountPoint, "tmpfs", 0, options) == 0
        }
    }

    static func unmount(_ mountPoint: String) {
        _ = umount2(mountPoint, Int32(MNT_DETACH))
    }

    /// Writes zeros to `path` until the file system is full.
    static func fill(_ path: String) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        let chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while chunk.withUnsafeBytes({ write(descriptor, $0.baseAddress, $0.count) }) > 0 {}
    }
}
