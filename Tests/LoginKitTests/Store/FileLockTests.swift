import Foundation
import LoginKit
import LoginKitMocks
import LoginKitTestSupport
import Testing

/// A stalled lock holder hangs nobody: waits are bounded, cancellable, and name the holder.
@Suite(.timeLimit(.minutes(3)))
struct FileLockTests {
    /// Holds the store's lock as another process would (`flock` on its own open file description).
    func holdingTheLock<T>(of store: IDTokenStore, _ body: () async throws -> T) async throws -> T {
        let descriptor = open(store.lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        try #require(descriptor >= 0)
        defer { close(descriptor) }
        try #require(flock(descriptor, LOCK_EX) == 0)
        let pid = Array("\(getpid())\n".utf8)
        _ = pid.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        return try await body()
    }

    @Test func aLockHeldTooLongFailsNamingItsHolder() async throws {
        try await withTemporaryDirectory { directory in
            let store = try IDTokenStore(path: directory + "/tokens.json", lockTimeout: .milliseconds(200))
            try await store.save(Race.profile(Race.credentials(0, issuedAt: Race.t0)), as: "default")
            try await holdingTheLock(of: store) {
                let error = try #require(await thrown { try await store.save(Race.profile(Race.credentials(1, issuedAt: Race.t0)), as: "default") } as? TokenStoreError)
                #expect(error.code == .lockTimedOut)
                #expect(error.message.contains("process \(getpid())"))
            }
            #expect(try await store.profile(named: "default")?.credentials.accessToken == "access-0")
        }
    }

    @Test func aWaitForTheLockEndsWhenTheTaskIsCancelled() async throws {
        try await withTemporaryDirectory { directory in
            let store = try IDTokenStore(path: directory + "/tokens.json", lockTimeout: .seconds(600))
            try await store.save(Race.profile(Race.credentials(0, issuedAt: Race.t0)), as: "default")
            try await holdingTheLock(of: store) {
                let waiter = Task { try await store.save(Race.profile(Race.credentials(1, issuedAt: Race.t0)), as: "default") }
                waiter.cancel()
                #expect(await thrown { try await waiter.value } is CancellationError)
            }
        }
    }

    @Test func aStalledHolderDoesNotStopAStillValidTokenFromBeingServed() async throws {
        try await withTemporaryDirectory { directory in
            let store = try IDTokenStore(path: directory + "/tokens.json", lockTimeout: .milliseconds(200))
            // 30 s left: inside the mandatory window, still valid.
            try await store.save(Race.profile(Race.credentials(0, issuedAt: Race.t0)), as: "default")
            let api = MockAuthAPI()
            let service = AuthService(api: api, store: store, clock: ManualClock(start: Race.t0.addingTimeInterval(3570)))
            let served = try await holdingTheLock(of: store) { try await service.validAccessToken() }
            #expect(served == "access-0")
            #expect(api.refreshCallCount == 0)
        }
    }

    @Test func aLockFileThatIsNotARegularFileIsRefused() async throws {
        try await withTemporaryDirectory { directory in
            let store = try IDTokenStore(path: directory + "/tokens.json")
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try #require(mkfifo(store.lockPath, 0o600) == 0)  // opens and locks like a file, but is none
            let error = try #require(await thrown { try await store.save(Race.profile(Race.credentials(0, issuedAt: Race.t0)), as: "default") } as? TokenStoreError)
            #expect(error.code == .lockFailed)
        }
    }
}
