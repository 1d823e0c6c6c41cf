import Foundation
import LoginKit
import LoginKitHTTP
import LoginKitLifecycle
import LoginKitMocks
import Logging
import ServiceLifecycle
import Testing

/// `AuthService` as a swift-service-lifecycle `Service`: the group's graceful shutdown waits for a
/// refresh whose request has left, and its rotated tokens are saved before the group finishes.
@Suite(.timeLimit(.minutes(1)))
struct AuthServiceLifecycleTests {
    @Test func gracefulShutdownAwaitsARefreshWhoseRequestHasLeft() async throws {
        let api = MockAuthAPI()
        let clock = ManualClock()
        // Issued an hour ago, 30 s left: inside the mandatory window (60 s), so a token call waits
        // for the shared refresh.
        let expiring = Credentials(accessToken: "a1", refreshToken: "r1", expiresAt: clock.now.addingTimeInterval(30))
        let store = InMemoryTokenStore(profiles: [
            "default": StoredProfile(credentials: expiring, source: api.source, userID: "u", updatedAt: clock.now.addingTimeInterval(-3600))
        ])
        let service = AuthService(api: api, store: store, clock: clock)
        let group = ServiceGroup(services: [service], logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        let events = LockedState<[String]>([])

        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                try await group.run()
                // What the store holds the moment the group has finished.
                let saved = try await store.profile(named: "default")?.credentials.accessToken ?? "nothing"
                events.withLock { $0.append("group ended, the store holding \(saved)") }
            }
            let token = Task { try await service.validAccessToken() }
            let refresh = await api.nextRefresh()  // the refresh's request has left
            await group.triggerGracefulShutdown()

            events.withLock { $0.append("refresh resumed") }
            refresh.resume(returning: Credentials(accessToken: "a2", refreshToken: "r2", expiresAt: clock.now.addingTimeInterval(3600)))
            try await tasks.waitForAll()
            #expect(try await token.value == "a2")
        }

        #expect(events.withLock { $0 } == ["refresh resumed", "group ended, the store holding a2"])
        let saved = try #require(try await store.profile(named: "default")?.credentials)
        #expect(saved.accessToken == "a2")
        #expect(saved.refreshToken == "r2")
        #expect(api.refreshCallCount == 1)
        api.verify()
    }
}
