import Foundation
#if canImport(Glibc)
import Glibc
#endif
import LoginKit
import LoginKitDevServer
import LoginKitHTTP
import LoginKitMocks
import LoginKitTestSupport
import Synchronization
import Testing

@Suite(.timeLimit(.minutes(3)))
struct AuthServiceRefreshTests {
    /// Logs in, then moves the clock past the tokens' expiry.
    func expiredLogin(_ fixture: Fixture, service: AuthService) async throws {
        _ = try await service.logIn(for: demo, with: "demo")
        fixture.clock.advance(by: .seconds(3601))
        fixture.server.monitor.reset()
    }

    @Test func aValidTokenIsServedFromTheStoreWithoutRequests() async throws {
        try await withFixture { fixture in
            let service = fixture.service()
            _ = try await service.logIn(for: demo, with: "demo")
            fixture.server.monitor.reset()
            let stored = try #require(try await fixture.store.profile(named: "default")).credentials
            for _ in 0..<100 { #expect(try await service.validIDToken() == stored.idToken) }
            #expect(fixture.tokenRequests == 0)
        }
    }

    @Test func thousandConcurrentCallersShareOneRefresh() async throws {
        try await withFixture { fixture in
            let service = fixture.service()
            try await expiredLogin(fixture, service: service)
            let tokens = try await withThrowingTaskGroup(of: IDToken.self) { group in
                for _ in 0..<1000 { group.addTask { try await service.validIDToken() } }
                return try await group.reduce(into: Set<IDToken>()) { $0.insert($1) }
            }
            #expect(fixture.tokenRequests == 1)
            #expect(tokens.count == 1)
            #expect(tokens.first == (try await fixture.store.profile(named: "default"))?.credentials.idToken)
        }
    }

    @Test func aCancelledWaiterLeavesTheOthersTheirToken() async throws {
        try await withFixture { fixture in
            let service = fixture.service()
            try await expiredLogin(fixture, service: service)
            fixture.server.monitor.injectFaults([.delay(milliseconds: 300)], path: "/oauth/token")
            let arrivals = fixture.server.monitor.arrivals()
            let waiters = (0..<100).map { _ in Task { try await service.validIDToken() } }
            for await path in arrivals where path == "/oauth/token" { break }
            waiters[0].cancel()
            #expect(await thrown { try await waiters[0].value } is CancellationError)
            var served = 0
            for waiter in waiters.dropFirst() {
                if (try? await waiter.value) != nil { served += 1 }
            }
            #expect(served == 99)
            #expect(fixture.tokenRequests == 1)
        }
    }

    @Test func cancellingEveryWaiterNeitherHangsNorLeaks() async throws {
        try await withFixture { fixture in
            let service = fixture.service()
            try await expiredLogin(fixture, service: service)
            fixture.server.monitor.injectFaults([.delay(milliseconds: 300)], path: "/oauth/token")
            let arrivals = fixture.server.monitor.arrivals()
            let events = service.events
            let waiters = (0..<20).map { _ in Task { try await service.validIDToken() } }
            for await path in arrivals where path == "/oauth/token" { break }
            for waiter in waiters { waiter.cancel() }
            for waiter in waiters { #expect(await thrown { try await waiter.value } is CancellationError) }
            // The shared refresh still completes and is saved for the next caller.
            for await event in events { if case .refreshed = event { break } }
            _ = try await service.validIDToken()
            #expect(fixture.tokenRequests == 1)
        }
    }

    /// With a store that has change stamps the shared refresh runs on the client's driver thread by
    /// default (docs/refresh.md); the transport below records where each request was sent from, so
    /// the test checks that. Shutting the client down while the token request is in flight fails
    /// every caller with `.shutdown` (the refresh's waiters, and any caller that arrived after it and
    /// started another), keeps the stored profile, and later calls fail the same way instead of
    /// hanging.
    @Test func aClientShutDownDuringTheSharedRefreshFailsItsWaitersAndKeepsTheProfile() async throws {
        try await withTemporaryDirectory { directory in
            let store = try IDTokenStore(path: directory + "/tokens.json")
            try await withFixture(store: store) { fixture in
                let transport = ThreadRecordingTransport(base: fixture.client)
                let api = OAuth2API(configuration: fixture.api.configuration, transport: transport, now: { fixture.clock.now })
                let service = AuthService(api: api, store: store, clock: fixture.clock, configuration: Fixture.serviceConfiguration)
                let driverThread = await Task(executorPreference: fixture.client.taskExecutor) { pthread_self() }.value
                try await expiredLogin(fixture, service: service)
                let before = try #require(try await store.profile(named: "default")).credentials
                fixture.server.monitor.injectFaults([.delay(milliseconds: 600_000)], path: "/oauth/token")
                let arrivals = fixture.server.monitor.arrivals()
                let sentBefore = transport.threads.count
                let waiters = (0..<50).map { _ in Task { try await service.validIDToken() } }
                for await path in arrivals where path == "/oauth/token" { break }
                let refreshSends = transport.threads.dropFirst(sentBefore)
                #expect(refreshSends.count == 1)
                #expect(refreshSends.allSatisfy { pthread_equal($0, driverThread) != 0 }, "the refresh was not sent from the driver thread")
                await fixture.client.shutdown()
                for waiter in waiters {
                    let error = await thrown { try await waiter.value }
                    #expect((error as? NetworkError)?.code == .shutdown, "\(String(describing: error))")
                }
                let later = await thrown { try await service.validIDToken() }
                #expect((later as? NetworkError)?.code == .shutdown, "\(String(describing: later))")
                let after = try #require(try await store.profile(named: "default")).credentials
                #expect(after.refreshToken == before.refreshToken)
                #expect(after.accessToken == before.accessToken)
                #expect(fixture.tokenRequests == 1)
            }
        }
    }

    /// A transport that notes the thread each request was sent from, then sends it through `base`.
    final class ThreadRecordingTransport: HTTPTransport, PrefersTaskExecutor {
        let base: CurlHTTPClient
        private let sent = Mutex<[pthread_t]>([])

        init(base: CurlHTTPClient) { self.base = base }

        var threads: [pthread_t] { sent.withLock { $0 } }
        var preferredTaskExecutor: (any TaskExecutor)? { base.preferredTaskExecutor }

        func send(_ request: HTTPRequest, body: Data?) async throws -> (HTTPResponse, Data) {
            let thread = pthread_self()
            sent.withLock { $0.append(thread) }
            return try await base.send(request, body: body)
        }
    }

    @Test func transientFailuresAreRetriedWithBackoff() async throws {
        try await withFixture { fixture in
            let service = fixture.service()
            try await expiredLogin(fixture, service: service)
            fixture.server.monitor.injectFaults([.status(503), .status(503)], path: "/oauth/token")
            let request = Task { try await service.validIDToken() }
            for _ in 0..<2 {
                await fixture.clock.waitForSleepers(2)  // the refresh deadline + one backoff
                fixture.clock.advance(by: .seconds(2))
            }
            _ = try await request.value
            #expect(fixture.tokenRequests == 3)
        }
    }

    @Test func retryAfterIsHonoured() async throws {
        try await withFixture { fixture in
            var configuration = Fixture.serviceConfiguration
            configuration.maximumBackoff = .seconds(30)
            let service = fixture.service(configuration: configuration)
            try await expiredLogin(fixture, service: service)
            fixture.server.monitor.injectFaults([.tooManyRequests(retryAfter: 20)], path: "/oauth/token")
            let request = Task { try await service.validIDToken() }
            await fixture.clock.waitForSleepers(2)
            #expect(fixture.clock.sleptDurations.last.map { $0 >= .seconds(20) } == true)
            fixture.clock.advance(by: .seconds(20))
            _ = try await request.value
            #expect(fixture.tokenRequests == 2)
        }
    }

    @Test func persistentFailureWithAStillValidTokenServesTheOldToken() async throws {
        try await withFixture { fixture in
            let service = fixture.service()
            _ = try await service.logIn(for: demo, with: "demo")
            let old = try #require(try await fixture.store.profile(named: "default")).credentials
            fixture.server.monitor.reset()
            fixture.clock.advance(by: .seconds(3600 - 120))  // two minutes left
            fixture.server.monitor.injectFaults(Array(repeating: .status(503), count: 10), path: "/oauth/token")
            let request = Task { try await service.validCredentials(minimumValidity: .seconds(600)) }
            for _ in 0..<3 {
                await fixture.clock.waitForSleepers(2)
                fixture.clock.advance(by: .seconds(2))
            }
            #expect(try await request.value == old)
            #expect(fixture.tokenRequests == 4)  // 1 + 3 retries, bounded
        }
    }

    @Test func persistentFailureWithAnExpiredTokenIsATypedServerError() async throws {
        try await withFixture { fixture in
            let service = fixture.service()
            try await expiredLogin(fixture, service: service)
            fixture.server.monitor.injectFaults(Array(repeating: .status(503), count: 10), path: "/oauth/token")
            let request = Task { try await service.validIDToken() }
            for _ in 0..<3 {
                await fixture.clock.waitForSleepers(2)
                fixture.clock.advance(by: .seconds(2))
            }
            #expect((await thrown { try await request.value } as? ServerError)?.code == .unavailable)
            #expect(fixture.tokenRequests == 4)
            let stored = try await fixture.store.profile(named: "default")
            #expect(stored != nil)  // nothing cleared
        }
    }

    @Test func aRejectedRefreshTokenClearsTheProfileAndReports() async throws {
        try await withFixture { fixture in
            let service = fixture.service()
            try await expiredLogin(fixture, service: service)
            let credentials = try #require(try await fixture.store.profile(named: "default")).credentials
            try await fixture.api.revoke(credentials)
            let session = await service.session()
            let events = service.events
            let error = await thrown { try await service.validIDToken() }
            #expect((error as? LoginRequiredError)?.code == .credentialsRejected)
            let stored = try await fixture.store.profile(named: "default")
            #expect(stored == nil)
            for await event in events { if case .credentialsRejected = event { break } }
            for await snapshot in session.diagnostics where snapshot.credentialsRejected {
                #expect(snapshot.loginRequired)
                break
            }
            await session.invalidate()
        }
    }

    @Test func aTokenRotatedElsewhereIsTakenNotCleared() async throws {
        // Process A rotated the refresh token after B read the profile; B's refresh with the old
        // token gets invalid_grant, re-reads the store, and takes A's credentials.
        let inner = InMemoryTokenStore()
        let stale = StaleSnapshotStore(inner: inner)
        try await withFixture(store: stale, configure: { $0.revokesFamilyOnReuse = false }) { fixture in
            let loginService = AuthService(api: fixture.api, store: inner, clock: fixture.clock)
            _ = try await loginService.logIn(for: demo, with: "demo")
            fixture.clock.advance(by: .seconds(3601))
            let old = try #require(try await inner.profile(named: "default"))
            var rotated = old
            rotated.credentials = try await fixture.api.refresh(old.credentials)  // "process A"
            rotated.updatedAt = fixture.clock.now
            await stale.freeze(old)  // B's next read sees the old profile once
            try await inner.save(rotated, as: "default")
            fixture.server.monitor.reset()

            let service = fixture.service()
            #expect(try await service.validIDToken() == rotated.credentials.idToken)
            #expect(fixture.tokenRequests == 1)  // B's one attempt, answered invalid_grant
            #expect(try await inner.profile(named: "default") == rotated)
        }
    }

    @Test func theAdvisoryWindowServesTheCurrentTokenAndRefreshesInTheBackground() async throws {
        try await withFixture { fixture in
            let service = fixture.service()
            _ = try await service.logIn(for: demo, with: "demo")
            let old = try #require(try await fixture.store.profile(named: "default")).credentials
            fixture.server.monitor.reset()
            fixture.clock.advance(by: .seconds(3600 - 200))  // inside the 5-minute advisory window
            let events = service.events
            #expect(try await service.validIDToken() == old.idToken)
            for await event in events { if case .refreshed = event { break } }
            #expect(try await service.validIDToken() != old.idToken)
            #expect(fixture.tokenRequests == 1)
        }
    }

    @Test func aHeldSessionRefreshesBeforeExpiryAndStopsWhenReleased() async throws {
        try await withFixture { fixture in
            let service = fixture.service()
            _ = try await service.logIn(for: demo, with: "demo")
            fixture.server.monitor.reset()
            let session = await service.session(goal: .init(minimumValidity: .seconds(120)))
            var snapshots = session.diagnostics.makeAsyncIterator()
            #expect(await snapshots.next()?.isGoalMet == true)
            await fixture.clock.waitForSleepers(1)  // the proactive loop, asleep until the margin
            fixture.server.monitor.injectFaults([.delay(milliseconds: 200)], path: "/oauth/token")
            fixture.clock.advance(by: .seconds(3600 - 300))
            var sawRefreshInProgress = false
            while let snapshot = await snapshots.next() {
                if snapshot.refreshInProgress { sawRefreshInProgress = true }
                if sawRefreshInProgress && !snapshot.refreshInProgress { break }
            }
            #expect(sawRefreshInProgress)
            #expect(fixture.tokenRequests == 1)

            await session.invalidate()
            #expect(fixture.clock.sleeperCount == 0)
            fixture.clock.advance(by: .seconds(86_400))
            #expect(fixture.tokenRequests == 1)
        }
    }
}

/// A store whose next read (and locked read) returns a frozen snapshot once: it models a process
/// that read the profile before another process rotated it.
actor StaleSnapshotStore: TokenStore {
    let inner: InMemoryTokenStore
    private var frozen: StoredProfile?

    init(inner: InMemoryTokenStore) {
        self.inner = inner
    }

    func freeze(_ profile: StoredProfile) {
        frozen = profile
    }

    func profile(named name: String) async throws -> StoredProfile? {
        if let frozen { return frozen }
        return try await inner.profile(named: name)
    }

    func profileNames() async throws -> [String] {
        try await inner.profileNames()
    }

    private func takeFrozen() -> StoredProfile? {
        defer { frozen = nil }
        return frozen
    }

    nonisolated(nonsending) func withExclusiveAccess<T>(_ body: (inout TokenStoreTransaction) async throws -> T) async throws -> T {
        let snapshot = await takeFrozen()
        return try await inner.withExclusiveAccess { transaction in
            guard let snapshot else { return try await body(&transaction) }
            var stale = transaction
            stale["default"] = snapshot
            let result = try await body(&stale)
            if stale["default"] != snapshot { transaction["default"] = stale["default"] }
            return result
        }
    }
}

@Suite(.timeLimit(.minutes(3)))
struct AuthServiceStoreFailureTests {
    @Test func aFailedSaveStillHandsOutTheFreshTokenAndReportsIt() async throws {
        let inner = InMemoryTokenStore()
        let failing = FailingWriteStore(inner: inner)
        try await withFixture(store: failing) { fixture in
            let service = fixture.service()
            _ = try await AuthService(api: fixture.api, store: inner, clock: fixture.clock).logIn(for: demo, with: "demo")
            let old = try #require(try await inner.profile(named: "default")).credentials
            fixture.clock.advance(by: .seconds(3601))
            let events = service.events
            let token = try await service.validIDToken()
            #expect(token != old.idToken)  // the refreshed token, although it could not be saved
            var reported: TokenStoreError?
            for await event in events {
                if case .storeFailed(let error) = event { reported = error; break }
            }
            #expect(reported?.code == .io)
            #expect(service.unsavedRefresh?.code == .io)  // what the CLI asks, to say it loudly
            #expect(try await inner.profile(named: "default")?.credentials == old)
        }
    }

    /// A store that cannot take a save (a full disk: every write in its directory fails with
    /// `ENOSPC`) gets no refresh sent: the provider would retire the stored refresh token, and its
    /// new one could not be kept, ending the session with this process. Without the check the
    /// refresh reaches the provider, the save fails, and the fresh token is served in silence.
    @Test func aStoreThatCannotTakeASaveGetsNoRefreshSent() async throws {
        try await withTemporaryDirectory { directory in
            let store = try IDTokenStore(path: directory + "/tokens.json")
            try await withFixture(store: store) { fixture in
                let service = fixture.service()
                _ = try await service.logIn(for: demo, with: "demo")
                let before = try #require(try await store.profile(named: "default"))
                fixture.clock.advance(by: .seconds(3601))
                fixture.server.monitor.reset()
                StoreFileSystem.injectWriteFailure(ENOSPC, in: directory)
                defer { StoreFileSystem.injectWriteFailure(nil, in: directory) }
                let error = await thrown { try await service.validIDToken() }
                let storeError = try #require(error as? TokenStoreError, "\(String(describing: error))")
                #expect(storeError.code == .noSpace)
                #expect(storeError.path == directory + "/tokens.json")
                #expect(storeError.message.contains("no refresh was sent"))
                #expect(fixture.tokenRequests == 0)
                #expect(try await store.profile(named: "default") == before)
                let leftovers = try entriesBelow(directory, containing: ".tmp")
                #expect(leftovers.isEmpty)
            }
        }
    }

    /// The same store with credentials still valid (in the window where callers wait for a
    /// refresh): they are served, nothing is sent, and the host hears of the store's state.
    @Test func aStoreThatCannotTakeASaveServesTheStillValidToken() async throws {
        try await withTemporaryDirectory { directory in
            let store = try IDTokenStore(path: directory + "/tokens.json")
            try await withFixture(store: store) { fixture in
                let service = fixture.service()
                _ = try await service.logIn(for: demo, with: "demo")
                let old = try #require(try await store.profile(named: "default")).credentials
                fixture.clock.advance(by: .seconds(3600 - 30))
                fixture.server.monitor.reset()
                StoreFileSystem.injectWriteFailure(ENOSPC, in: directory)
                defer { StoreFileSystem.injectWriteFailure(nil, in: directory) }
                let events = service.events
                #expect(try await service.validIDToken() == old.idToken)
                #expect(fixture.tokenRequests == 0)
                var reported: TokenStoreError?
                for await event in events {
                    if case .storeFailed(let error) = event { reported = error; break }
                }
                #expect(reported?.code == .noSpace)
                #expect(service.unsavedRefresh == nil)  // nothing was refreshed: nothing is lost
            }
        }
    }

    /// The disk fills while the refresh is at the provider: the caller still gets the fresh token,
    /// and the service keeps the save's error for the host to say loudly (the CLI: on stderr, with
    /// a non-zero exit) — the provider has retired the refresh token the store still holds.
    @Test func aDiskThatFillsDuringTheRefreshIsKeptForTheHostToReport() async throws {
        try await withTemporaryDirectory { directory in
            let store = try IDTokenStore(path: directory + "/tokens.json")
            let clock = ManualClock()
            let api = MockAuthAPI()
            let expired = Credentials(
                accessToken: "access-0", refreshToken: "refresh-0", tokenType: "Bearer",
                expiresAt: clock.now.addingTimeInterval(-5), issuedAt: clock.now.addingTimeInterval(-3605))
            try await store.save(StoredProfile(credentials: expired, source: api.source, userID: "alice"), as: "default")
            let service = AuthService(api: api, store: store, clock: clock)
            let events = service.events
            let token = Task { try await service.validAccessToken() }
            let refresh = await api.nextRefresh()  // the store passed its check: the refresh is out
            StoreFileSystem.injectWriteFailure(ENOSPC, in: directory)
            defer { StoreFileSystem.injectWriteFailure(nil, in: directory) }
            refresh.resume(returning: Credentials(
                accessToken: "access-1", refreshToken: "refresh-1", tokenType: "Bearer", expiresAt: clock.now.addingTimeInterval(3600)))
            #expect(try await token.value == "access-1")
            #expect(service.unsavedRefresh?.code == .noSpace)
            var reported: TokenStoreError?
            for await event in events {
                if case .storeFailed(let error) = event { reported = error; break }
            }
            #expect(reported?.code == .noSpace)
            #expect(try await store.profile(named: "default")?.credentials.refreshToken == "refresh-0")  // what the disk holds
        }
    }
}

/// A store whose writes fail (a full disk): reads work, every changed transaction throws.
struct FailingWriteStore: TokenStore {
    let inner: InMemoryTokenStore

    func profile(named name: String) async throws -> StoredProfile? { try await inner.profile(named: name) }
    func profileNames() async throws -> [String] { try await inner.profileNames() }

    nonisolated(nonsending) func withExclusiveAccess<T>(_ body: (inout TokenStoreTransaction) async throws -> T) async throws -> T {
        try await inner.withExclusiveAccess { transaction in
            var copy = transaction
            let result = try await body(&copy)
            if copy.hasChanges { throw TokenStoreError(.io, path: "/full-disk/tokens.json", "no space left on device") }
            return result
        }
    }
}

@Suite(.timeLimit(.minutes(3)))
struct AuthSessionLayeringTests {
    @Test func aStricterSessionLayersOnALooserOneAndLeavesWithIt() async throws {
        try await withFixture { fixture in
            let service = fixture.service()
            _ = try await service.logIn(for: demo, with: "demo")
            let loose = await service.session(goal: .init(minimumValidity: .seconds(60)))
            var looseSnapshots = loose.diagnostics.makeAsyncIterator()
            let strict = await service.session(goal: .init(minimumValidity: .seconds(60), scopes: ["admin"]))
            while let snapshot = await looseSnapshots.next(), !snapshot.insufficientScope {}
            await strict.invalidate()
            while let snapshot = await looseSnapshots.next() {
                if !snapshot.insufficientScope {
                    #expect(snapshot.isGoalMet)
                    break
                }
            }
            await loose.invalidate()
        }
    }
}
