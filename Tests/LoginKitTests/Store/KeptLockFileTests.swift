import Foundation
@testable import LoginKit
import LoginKitTestSupport
import Testing

/// A store never locks a lock file that other processes no longer lock (its directory moved and
/// made again between two saves).
@Suite(.timeLimit(.minutes(3)))
struct KeptLockFileTests {
    static let profile = StoredProfile(
        credentials: Credentials(accessToken: "a", expiresAt: Date(timeIntervalSinceNow: 3600)),
        source: CredentialSource(kind: .oauth2, endpoint: "https://id.example.com", clientID: "cli"))

    @Test func aStoreWhoseDirectoryWasMovedAndMadeAgainLocksTheNewLockFile() async throws {
        try await withTemporaryDirectory { root in
            let directory = root + "/state"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            let store = try IDTokenStore(path: directory + "/tokens.json", lockTimeout: .milliseconds(200))
            try await store.save(Self.profile, as: "default")  // the lock file is open now
            try FileManager.default.moveItem(atPath: directory, toPath: root + "/moved")
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            // Another process holds the new lock file.
            let other = open(directory + "/tokens.json.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            #expect(other >= 0)
            defer { close(other) }
            #expect(flock(other, LOCK_EX) == 0)
            let error = await thrown { try await store.save(Self.profile, as: "default") } as? TokenStoreError
            #expect(error?.code == .lockTimedOut, "the store waited for the lock others hold, not the moved file's")
            flock(other, LOCK_UN)
            try await store.save(Self.profile, as: "default")
            #expect(FileManager.default.fileExists(atPath: directory + "/tokens.json"))
        }
    }
}
