import Foundation
import LoginKit
import LoginKitJOSE
import LoginKitMocks
import LoginKitTestSupport
import Testing

/// `AuthService` under concurrency, driven deterministically: `MockAuthAPI` holds each request until
/// the test resumes it, `ManualClock` moves only when told, and the store is in memory. Each test
/// sets up one race (the interleaving named in its name) and checks the rule that keeps it safe.
@Suite(.timeLimit(.minutes(3)))
struct AuthServiceRaceTests {
    func service(_ api: MockAuthAPI, _ store: any TokenStore, _ clock: ManualClock, revocationTimeout: Duration = .seconds(5)) -> AuthService {
        var configuration = AuthService.Configuration()
        configuration.revocationTimeout = revocationTimeout
        return AuthService(api: api, store: store, clock: clock, configuration: configuration)
    }

    // MARK: 1. A minimum validity beyond the token's lifetime

    @Test func aCallerWhoseReadFollowsAnotherProcessesRefreshTakesIt() async throws {
        // 45-second tokens, 5 s left; both "processes" ask for 3000 s.
        let stored = Race.credentials(0, issuedAt: Race.t0, lifetime: 45)
        let held = ScriptedStore(["default": Race.profile(stored)])
        let clock = ManualClock(start: Race.t0.addingTimeInterval(40))
        let api = MockAuthAPI()
        let first = service(api, held.inner, clock)
        let second = service(api, held, clock)

        let firstToken = Task { try await first.validAccessToken(minimumValidity: .seconds(3000)) }
        let refresh = await api.nextRefresh()
        // The second process's request begins now; its read reaches the store only after the
        // first process has saved what it refreshed.
        held.holdNextRead()
        let secondToken = Task { try await second.validAccessToken(minimumValidity: .seconds(3000)) }
        await held.heldReadArrived()
        clock.advance(by: .milliseconds(500))
        refresh.resume(returning: Race.credentials(1, issuedAt: clock.now, lifetime: 45))
        #expect(try await firstToken.value == "access-1")
        clock.advance(by: .seconds(5))  // a slow read: the fresh token is already 5 s old (11 %)
        held.releaseRead()
        #expect(try await secondToken.value == "access-1")
        #expect(api.refreshCallCount == 1)
    }

    @Test func tenProcessesAskingMoreThanTheProviderGrantsMakeOneRefresh() async throws {
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(0, issuedAt: Race.t0, lifetime: 45))])
        let clock = ManualClock(start: Race.t0.addingTimeInterval(40))
        let api = MockAuthAPI()
        let services = (0..<10).map { _ in service(api, store, clock) }
        let early = services.prefix(5).map { service in Task { try await service.validAccessToken(minimumValidity: .seconds(3000)) } }
        let refresh = await api.nextRefresh()
        refresh.resume(returning: Race.credentials(1, issuedAt: clock.now, lifetime: 45))
        var tokens = Set<String>()
        for task in early { tokens.insert(try await task.value) }
        // The other five start a second later, with the fresh 45 s token stored.
        clock.advance(by: .seconds(1))
        for service in services.suffix(5) { tokens.insert(try await service.validAccessToken(minimumValidity: .seconds(3000))) }
        #expect(tokens == ["access-1"])
        #expect(api.refreshCallCount == 1)
    }

    @Test func aThousandTasksAskingMoreThanTheProviderGrantsShareOneRefresh() async throws {
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(0, issuedAt: Race.t0, lifetime: 45))])
        let clock = ManualClock(start: Race.t0.addingTimeInterval(40))
        let api = MockAuthAPI()
        let service = service(api, store, clock)
        let callers = (0..<1000).map { _ in Task { try await service.validAccessToken(minimumValidity: .seconds(3000)) } }
        await api.nextRefresh().resume(returning: Race.credentials(1, issuedAt: clock.now, lifetime: 45))
        var tokens = Set<String>()
        for caller in callers { tokens.insert(try await caller.value) }
        #expect(tokens == ["access-1"])
        #expect(api.refreshCallCount == 1)
    }

    // MARK: 2. Logout, sessions, deadlines, reads, identity

    @Test func logoutDuringARefreshCancelsItRevokesUnderTheLockAndHandsNothingOut() async throws {
        let stored = Race.credentials(0, issuedAt: Race.t0)
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(stored)])
        let clock = ManualClock(start: Race.t0.addingTimeInterval(3590))
        let api = MockAuthAPI()
        let service = service(api, store, clock)
        let waiter = Task { try await service.validAccessToken() }
        let refresh = await api.nextRefresh()
        let logout = Task { await service.logOut() }
        let revoke = await api.nextRevoke()
        #expect(refresh.isCancelled)
        #expect(revoke.arguments == stored)
        revoke.resume(returning: ())
        let result = await logout.value
        #expect(result.revocation == .revoked)
        #expect(result.profileRemoved)
        let error = try #require(await thrown { try await waiter.value } as? LoginRequiredError)
        #expect(error.code == .loggedOut)
        #expect(try await store.profile(named: "default") == nil)
        api.verify()
    }

    @Test func aLogoutDuringALoginRevokesWhatTheLoginWasIssued() async throws {
        let store = InMemoryTokenStore()
        let clock = ManualClock(start: Race.t0)
        let api = MockAuthAPI()
        let service = service(api, store, clock)
        let login = Task { try await service.logIn(for: User.ID(rawValue: "alice"), with: "pw") }
        let call = await api.nextLogIn()
        let logout = Task { await service.logOut() }
        #expect(await logout.value.revocation == .nothingToRevoke)
        call.resume(returning: Race.credentials(1, issuedAt: clock.now))
        let revoke = await api.nextRevoke()
        #expect(revoke.arguments.accessToken == "access-1")
        revoke.resume(returning: ())
        #expect((await thrown { try await login.value } as? LoginRequiredError)?.code == .loggedOut)
        #expect(try await store.profile(named: "default") == nil)
    }

    @Test func theProactiveLoopWaitsHalfTheLifetimeOfShortTokens() async throws {
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(0, issuedAt: Race.t0, lifetime: 75))])
        let clock = ManualClock(start: Race.t0)
        let api = MockAuthAPI()
        let service = service(api, store, clock)
        let session = await service.session(goal: AuthSession.Goal(minimumValidity: .seconds(60)))
        await clock.waitForSleepers(1)
        #expect(api.refreshCallCount == 0)  // it sleeps rather than refreshing back to back
        let slept = try #require(clock.sleptDurations.last)
        #expect(slept >= .seconds(33) && slept <= .seconds(37.5))  // 75 − 37.5, minus up to 10 % jitter
        clock.advance(by: .seconds(40))
        await api.nextRefresh().resume(returning: Race.credentials(1, issuedAt: clock.now, lifetime: 75))
        await session.invalidate()
        await service.shutdown()
        #expect(api.refreshCallCount == 1)
    }

    @Test func theProactiveLoopSurvivesATransientStoreError() async throws {
        let store = ScriptedStore(["default": Race.profile(Race.credentials(0, issuedAt: Race.t0))])
        store.scriptReads([true])  // the loop's first read fails
        let clock = ManualClock(start: Race.t0)
        let api = MockAuthAPI()
        let service = service(api, store, clock)
        let session = await service.session(goal: AuthSession.Goal(minimumValidity: .seconds(60)))
        await clock.waitForSleepers(1)  // backing off, not ended
        clock.advance(by: .seconds(31))  // past the longest backoff
        await clock.waitForSleepers(1)  // now asleep until the margin before expiry
        let slept = try #require(clock.sleptDurations.last)
        #expect(slept > .seconds(3000))
        await session.invalidate()
        await service.shutdown()
    }

    @Test func aFailedReReadAfterARejectedRefreshKeepsTheProfile() async throws {
        let store = ScriptedStore(["default": Race.profile(Race.credentials(0, issuedAt: Race.t0))])
        let clock = ManualClock(start: Race.t0.addingTimeInterval(3590))
        let api = MockAuthAPI()
        let service = service(api, store, clock)
        let waiter = Task { try await service.validAccessToken() }
        let refresh = await api.nextRefresh()
        store.scriptReads([true])  // the re-read after the rejection fails
        refresh.resume(throwing: LoginError(.refreshTokenRejected, "invalid_grant"))
        #expect((await thrown { try await waiter.value } as? TokenStoreError)?.code == .unavailable)
        #expect(try await store.inner.profile(named: "default") != nil)
    }

    @Test func theUserKeepsTheIDItLoggedInWithAcrossRefreshes() async throws {
        let store = InMemoryTokenStore()
        let clock = ManualClock(start: Race.t0)
        let api = MockAuthAPI()
        let service = service(api, store, clock)
        let login = Task { try await service.logIn(for: User.ID(rawValue: "alice"), with: "pw") }
        await api.nextLogIn().resume(returning: Race.credentials(1, issuedAt: clock.now))  // no ID token
        #expect(try await login.value.id.rawValue == "alice")
        clock.advance(by: .seconds(3590))
        let refreshed = Task { try await service.validAccessToken() }
        await api.nextRefresh().resume(returning: Race.credentials(2, issuedAt: clock.now, idToken: Race.idToken(sub: "248289761001")))
        _ = try await refreshed.value
        #expect(try await service.currentUser()?.id.rawValue == "alice")
    }

    @Test func aRefreshedIDTokenForAnotherSubjectIsRefusedAndNothingSaved() async throws {
        let stored = Race.credentials(0, issuedAt: Race.t0, idToken: Race.idToken(sub: "alice"))
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(stored)])
        let clock = ManualClock(start: Race.t0.addingTimeInterval(3590))
        let api = MockAuthAPI()
        let service = service(api, store, clock)
        let waiter = Task { try await service.validAccessToken() }
        await api.nextRefresh().resume(returning: Race.credentials(1, issuedAt: clock.now, idToken: Race.idToken(sub: "admin")))
        #expect((await thrown { try await waiter.value } as? TokenVerificationError)?.code == .subjectChanged)
        #expect(try await store.profile(named: "default")?.credentials == stored)
    }

    @Test func aRefreshTokenIsNeverSentToAnotherProvider() async throws {
        let other = CredentialSource(kind: .oauth2, endpoint: "https://other.test", clientID: "mock")
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(0, issuedAt: Race.t0), source: other)])
        let clock = ManualClock(start: Race.t0.addingTimeInterval(3590))
        let api = MockAuthAPI()
        let error = try #require(await thrown { try await service(api, store, clock).validAccessToken() } as? LoginRequiredError)
        #expect(error.code == .sourceMismatch)
        #expect(error.message.contains("https://other.test") && error.message.contains("https://issuer.test"))
        #expect(api.refreshCallCount == 0)
    }

    @Test func theStoreIsCheckedBeforeAPasswordIsSent() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/tokens.json"
            _ = FileManager.default.createFile(atPath: path, contents: Data("{}".utf8), attributes: [.posixPermissions: 0o644])
            let api = MockAuthAPI()
            let service = service(api, try IDTokenStore(path: path), ManualClock(start: Race.t0))
            let error = await thrown { try await service.logIn(for: User.ID(rawValue: "alice"), with: "pw") }
            #expect((error as? TokenStoreError)?.code == .insecurePermissions)
            #expect(api.logInCallCount == 0)
        }
    }

    @Test func credentialsThatCannotBeSavedAreRevoked() async throws {
        let store = ScriptedStore()
        store.scriptTransactions([false, true])  // the check passes, the save fails
        let clock = ManualClock(start: Race.t0)
        let api = MockAuthAPI()
        let service = service(api, store, clock)
        let login = Task { try await service.logIn(for: User.ID(rawValue: "alice"), with: "pw") }
        await api.nextLogIn().resume(returning: Race.credentials(1, issuedAt: clock.now))
        let revoke = await api.nextRevoke()
        #expect(revoke.arguments.refreshToken == "refresh-1")
        revoke.resume(returning: ())
        #expect((await thrown { try await login.value } as? TokenStoreError)?.code == .unavailable)
    }

    @Test func logoutSaysWhatHappenedAtTheProvider() async throws {
        let clock = ManualClock(start: Race.t0)
        // Nothing stored.
        #expect(await service(MockAuthAPI(), InMemoryTokenStore(), clock).logOut().revocation == .nothingToRevoke)
        // An API with no way to revoke.
        let unsupported = AuthService(
            api: ImmediateClientAPI(issued: Race.credentials(1, issuedAt: Race.t0)),
            store: InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(1, issuedAt: Race.t0))]), clock: clock)
        #expect(await unsupported.logOut().revocation == .unsupported)
        // A provider that does not answer: the mock's suspended revoke honours the timeout.
        let api = MockAuthAPI()
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(1, issuedAt: Race.t0))])
        let slow = service(api, store, clock, revocationTimeout: .seconds(5))
        let logout = Task { await slow.logOut() }
        let revoke = await api.nextRevoke()
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(5))
        let result = await logout.value
        #expect(result.revocation == .timedOut)
        #expect(result.profileRemoved)
        #expect(revoke.isCancelled)
        #expect(try await store.profile(named: "default") == nil)
    }

    @Test func aStoreErrorIsNotLoggedOutAndAClientProfileIsTheClient() async throws {
        let failing = ScriptedStore(["default": Race.profile(Race.credentials(0, issuedAt: Race.t0))])
        failing.scriptReads([true])
        let clock = ManualClock(start: Race.t0)
        #expect(await thrown { try await service(MockAuthAPI(), failing, clock).currentUser() } is TokenStoreError)

        let client = AuthService(api: ImmediateClientAPI(issued: Race.credentials(1, issuedAt: Race.t0)), store: InMemoryTokenStore(), clock: clock)
        var events = client.events.makeAsyncIterator()
        let user = try await client.logInAsClient(scope: "read")
        #expect(user.id.rawValue == "mock")
        guard case .loggedIn(let reported)? = await events.next() else {
            Issue.record("no loggedIn event")
            return
        }
        #expect(reported.id.rawValue == "mock")
        #expect(try await client.currentUser()?.id.rawValue == "mock")
    }

    @Test func shutdownAwaitsARefreshWhoseRequestHasLeft() async throws {
        // Inside the advisory window: the caller is served at once and a refresh goes out.
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(0, issuedAt: Race.t0))])
        let clock = ManualClock(start: Race.t0.addingTimeInterval(3400))
        let api = MockAuthAPI()
        let service = service(api, store, clock)
        #expect(try await service.validAccessToken() == "access-0")
        let refresh = await api.nextRefresh()
        let savedAtShutdown = Task {
            await service.shutdown()
            return try await store.profile(named: "default")?.credentials.refreshToken
        }
        refresh.resume(returning: Race.credentials(1, issuedAt: clock.now))
        #expect(try await savedAtShutdown.value == "refresh-1")
    }

    @Test func aCancelledWaiterLeavesTheSharedRefreshToTheOthers() async throws {
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(0, issuedAt: Race.t0))])
        let clock = ManualClock(start: Race.t0.addingTimeInterval(3590))
        let api = MockAuthAPI()
        let service = service(api, store, clock)
        let waiters = (0..<10).map { _ in Task { try await service.validAccessToken() } }
        let refresh = await api.nextRefresh()
        waiters[0].cancel()
        #expect(await thrown { try await waiters[0].value } is CancellationError)
        #expect(!refresh.isCancelled)
        refresh.resume(returning: Race.credentials(1, issuedAt: clock.now))
        for waiter in waiters.dropFirst() { #expect(try await waiter.value == "access-1") }
        #expect(api.refreshCallCount == 1)
    }

    // MARK: 3. Receipt times, logout, providers, deadlines, expiry

    @Test func refreshedCredentialsAreStampedOnReceipt() async throws {
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(0, issuedAt: Race.t0, lifetime: 45))])
        let clock = ManualClock(start: Race.t0.addingTimeInterval(40))
        let api = MockAuthAPI()
        let first = service(api, store, clock)
        let second = service(api, store, clock)
        let token = Task { try await first.validAccessToken(minimumValidity: .seconds(3000)) }
        let call = await api.nextRefresh()
        // What OAuth2API and CognitoAPI return: the new tokens on top of the old credentials,
        // whose issue stamp comes along.
        var next = call.arguments
        next.accessToken = "access-1"
        next.refreshToken = "refresh-1"
        next.expiresAt = clock.now.addingTimeInterval(45)
        call.resume(returning: next)
        #expect(try await token.value == "access-1")
        #expect(try await store.profile(named: "default")?.credentials.issuedAt == clock.now)
        clock.advance(by: .seconds(1))
        #expect(try await second.validAccessToken(minimumValidity: .seconds(3000)) == "access-1")
        #expect(api.refreshCallCount == 1)
    }

    @Test func nothingFromMemoryIsServedOnceALogoutBegan() async throws {
        let store = ScriptedStore(["default": Race.profile(Race.credentials(0, issuedAt: Race.t0))])
        let clock = ManualClock(start: Race.t0)
        let api = MockAuthAPI()
        let service = service(api, store, clock)
        #expect(try await service.validAccessToken() == "access-0")  // now held in memory too
        let logout = Task { await service.logOut() }
        let revoke = await api.nextRevoke()  // the logout has begun, under the store's lock
        store.scriptReads([true])  // the store is unavailable
        #expect(await thrown { try await service.validAccessToken() } != nil)
        revoke.resume(returning: ())
        _ = await logout.value
    }

    @Test func logoutNeverSendsAnotherProvidersTokens() async throws {
        let other = CredentialSource(kind: .oauth2, endpoint: "https://other.test", clientID: "mock")
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(0, issuedAt: Race.t0), source: other)])
        let api = MockAuthAPI()
        let result = await service(api, store, ManualClock(start: Race.t0)).logOut()
        #expect(api.revokeCallCount == 0)
        #expect(result.profileRemoved)
        #expect(result.revocation != .revoked)
        #expect(try await store.profile(named: "default") == nil)
    }

    @Test func anIDTokenTheRefreshDidNotRenewIsNotHandedOutExpired() async throws {
        var stored = Race.credentials(0, issuedAt: Race.t0, idToken: Race.idToken(sub: "alice"))
        stored.idTokenExpiresAt = stored.expiresAt
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(stored)])
        let clock = ManualClock(start: Race.t0.addingTimeInterval(3590))
        let api = MockAuthAPI()
        let service = service(api, store, clock)
        let waiter = Task { try await service.validIDToken() }
        let call = await api.nextRefresh()
        clock.advance(by: .seconds(15))  // the old ID token has now expired
        var next = call.arguments  // no id_token in the response: the old one is kept
        next.accessToken = "access-1"
        next.expiresAt = clock.now.addingTimeInterval(3600)
        call.resume(returning: next)
        #expect(await thrown { try await waiter.value } is LoginRequiredError)
    }

    @Test func anOvertakenLoginDoesNotReopenTheGuard() async throws {
        let api = MockAuthAPI()
        let clock = ManualClock(start: Race.t0)
        let service = service(api, InMemoryTokenStore(), clock)
        let first = Task { try await service.logIn(for: User.ID(rawValue: "alice"), with: "pw1") }
        let firstCall = await api.nextLogIn()
        _ = await service.logOut()
        let second = Task { try await service.logIn(for: User.ID(rawValue: "bob"), with: "pw2") }
        let secondCall = await api.nextLogIn()
        firstCall.resume(returning: Race.credentials(1, issuedAt: clock.now))
        await api.nextRevoke().resume(returning: ())  // the overtaken login revokes what it got
        _ = await thrown { try await first.value }
        #expect((await thrown { try await service.logIn(for: User.ID(rawValue: "carol"), with: "pw3") } as? LoginError)?.code == .loginInProgress)
        secondCall.resume(returning: Race.credentials(2, issuedAt: clock.now))
        #expect(try await second.value.id.rawValue == "bob")
        #expect(api.logInCallCount == 2)
    }

    @Test func aRefreshPastItsDeadlineServesTheStillValidToken() async throws {
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(0, issuedAt: Race.t0))])
        let clock = ManualClock(start: Race.t0.addingTimeInterval(600))
        let api = MockAuthAPI()
        let service = service(api, store, clock)
        let waiter = Task { try await service.validAccessToken(minimumValidity: .seconds(3300)) }  // 3000 s left
        let call = await api.nextRefresh()
        await clock.waitForSleepers(1)  // the refresh's deadline
        clock.advance(by: .seconds(60))
        #expect(try await waiter.value == "access-0")
        #expect(call.isCancelled)
    }

    @Test func anAbsurdExpiryDoesNotCrashTheProactiveLoop() async throws {
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(0, issuedAt: Race.t0, lifetime: 1e17))])
        let clock = ManualClock(start: Race.t0)
        let service = service(MockAuthAPI(), store, clock)
        let session = await service.session()
        await clock.waitForSleepers(1)
        await session.invalidate()
        await service.shutdown()
    }

    @Test func theDeviceFlowNeverSleepsPastTheCodesExpiry() async throws {
        let clock = ManualClock(start: Race.t0)
        let service = AuthService(api: StallingDeviceAPI(), store: InMemoryTokenStore(), clock: clock)
        let login = Task { try await service.logInWithDevice { _ in } }
        await clock.waitForSleepers(1)
        #expect(try #require(clock.sleptDurations.last) <= .seconds(600))
        login.cancel()
        #expect(await thrown { try await login.value } is CancellationError)
    }
}

/// A device flow whose provider asks for an absurd polling interval.
struct StallingDeviceAPI: DeviceAuthorizationAPI {
    let source = Race.source
    func logIn(for id: User.ID, with password: String) async throws -> Credentials { throw CancellationError() }
    func refresh(_ credentials: Credentials) async throws -> Credentials { throw CancellationError() }
    func revoke(_ credentials: Credentials) async throws -> Bool { false }
    func startDeviceAuthorization(scope: String?) async throws -> DeviceAuthorization {
        DeviceAuthorization(
            deviceCode: "d", userCode: "U", verificationURI: "https://issuer.test/device", verificationURIComplete: nil,
            expiresAt: Race.t0.addingTimeInterval(600), interval: .seconds(1_000_000_000))
    }
    func pollDeviceAuthorization(_ authorization: DeviceAuthorization) async throws -> DevicePollResult { .pending }
}
