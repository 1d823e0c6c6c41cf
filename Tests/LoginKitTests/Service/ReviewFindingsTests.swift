import Foundation
import LoginKit
import LoginKitHTTP
import LoginKitMocks
import LoginKitTestSupport
import Testing

/// Interleavings of `AuthService`'s logouts, logins, token calls and shared refresh that must keep
/// "nothing from before a logout is handed out or saved" and "a retired refresh token is never
/// sent again". Each is driven deterministically: the store and the API hold or answer at the
/// test's word, and the clock moves only when told.
@Suite(.timeLimit(.minutes(2)))
struct ReviewFindingsTests {
    // MARK: Work that begins during a logout

    /// A token call whose step read the store while a logout ran (before the logout's transaction
    /// had deleted the profile) hands out nothing once the logout has ended: the logout revoked
    /// what it read.
    @Test func aReadThatBeganDuringALogoutHandsOutNothingAfterIt() async throws {
        let store = ReviewStore(["default": Race.profile(Race.credentials(0, issuedAt: Race.t0))])
        let api = MockAuthAPI()
        let service = AuthService(api: api, store: store, clock: ManualClock(start: Race.t0))
        let logout = Task { await service.logOut() }
        let revoke = await api.nextRevoke()  // the logout has begun; its deletion is not written yet
        let read = store.holdNextRead()
        let token = Task { try await service.validAccessToken() }
        await read.arrived()  // the call's step has read the profile the logout is revoking
        revoke.resume(returning: ())
        let result = await logout.value
        #expect(result.revocation == .revoked)
        #expect(result.profileRemoved)
        read.open()
        let error = await thrown { try await token.value }
        #expect((error as? LoginRequiredError)?.code == .loggedOut, "the revoked access-0 was handed out after the logout")
        api.verify()
    }

    // MARK: A login's save and a logout

    /// A login whose provider answered before a logout began, and whose save reached the store only
    /// after the logout's transaction (which found nothing to revoke), leaves nothing stored:
    /// nobody would revoke those credentials, and the next token call would hand them out.
    @Test func aLoginSaveThatReachesTheStoreAfterALogoutLeavesNothingBehind() async throws {
        let store = ReviewStore()
        let save = store.holdAccess(number: 2)  // the first is the login's check that the store can save
        let api = RecordingLoginAPI(issued: Race.credentials(1, issuedAt: Race.t0))
        let service = AuthService(api: api, store: store, clock: ManualClock(start: Race.t0))
        let login = Task { try await service.logIn(for: User.ID(rawValue: "alice"), with: "pw") }
        await save.arrived()  // the provider has answered, before any logout: the login goes to save
        let result = await service.logOut()
        #expect(result.revocation == .nothingToRevoke)
        save.open()
        #expect((await thrown { try await login.value } as? LoginRequiredError)?.code == .loggedOut)
        #expect(try await store.inner.profile(named: "default") == nil, "the login's credentials outlived the logout")
        #expect(api.revokedRefreshTokens == ["refresh-1"], "nobody revoked the login's credentials")
        let error = await thrown { try await service.validAccessToken() }
        #expect(error is LoginRequiredError, "the login's credentials were handed out after the logout")
    }

    // MARK: A refresh whose save failed

    /// After a refresh whose save failed, the store still holds the refresh token the provider
    /// retired when it answered. The next call is served the fresh credentials held in memory; the
    /// retired refresh token is never sent again (a provider with reuse detection would revoke the
    /// whole family, the fresh credentials included).
    @Test func theRefreshTokenAnUnsavedRefreshRetiredIsNotSentAgain() async throws {
        let store = ReviewStore(["default": Race.profile(Race.credentials(0, issuedAt: Race.t0))])
        store.failNextSave()
        let clock = ManualClock(start: Race.t0.addingTimeInterval(3601))  // expired: callers wait for the refresh
        let api = ScriptedRefreshAPI([.success(Race.credentials(1, issuedAt: clock.now))])
        let service = AuthService(api: api, store: store, clock: clock)
        #expect(try await service.validAccessToken() == "access-1")
        #expect(service.unsavedRefresh?.code == .io)
        #expect(try await store.inner.profile(named: "default")?.credentials.refreshToken == "refresh-0")
        #expect(try await service.validAccessToken() == "access-1")
        #expect(api.sentRefreshTokens == ["refresh-0"], "the retired refresh token was sent again")
    }

    /// `unsavedRefresh` speaks of the session whose refresh could not be saved: once that session
    /// is logged out it is not reported, and never for the next login's session.
    @Test func anUnsavedRefreshIsNotReportedAfterALogoutOrForTheNextLogin() async throws {
        let store = ReviewStore(["default": Race.profile(Race.credentials(0, issuedAt: Race.t0))])
        store.failNextSave()
        let clock = ManualClock(start: Race.t0.addingTimeInterval(3601))
        let api = MockAuthAPI()
        let service = AuthService(api: api, store: store, clock: clock)
        let token = Task { try await service.validAccessToken() }
        await api.nextRefresh().resume(returning: Race.credentials(1, issuedAt: clock.now))
        #expect(try await token.value == "access-1")
        #expect(service.unsavedRefresh?.code == .io)
        let logout = Task { await service.logOut() }
        await api.nextRevoke().resume(returning: ())
        #expect(await logout.value.profileRemoved)
        #expect(service.unsavedRefresh == nil, "the logged-out session's failed save is still reported")
        let login = Task { try await service.logIn(for: User.ID(rawValue: "bob"), with: "pw") }
        await api.nextLogIn().resume(returning: Race.credentials(2, issuedAt: clock.now))
        #expect(try await login.value.id.rawValue == "bob")
        #expect(service.unsavedRefresh == nil, "reported for the new login's session")
        api.verify()
    }

    // MARK: The last known profile

    /// A token call that read the store before a login saved does not leave what it read as the
    /// last known profile: while the store is unavailable, the previous user's token would be
    /// served after the new user's login.
    @Test func aReadFromBeforeALoginDoesNotBecomeTheLastKnownProfileAfterIt() async throws {
        let store = ReviewStore(["default": Race.profile(Race.credentials(0, issuedAt: Race.t0))])
        let clock = ManualClock(start: Race.t0)
        let api = MockAuthAPI()
        let service = AuthService(api: api, store: store, clock: clock)
        let read = store.holdNextRead()
        let token = Task { try await service.validAccessToken() }
        await read.arrived()  // the call's step has read alice's profile
        let login = Task { try await service.logIn(for: User.ID(rawValue: "bob"), with: "pw") }
        await api.nextLogIn().resume(returning: Race.credentials(2, issuedAt: clock.now))
        #expect(try await login.value.id.rawValue == "bob")
        read.open()
        #expect(try await token.value == "access-0", "it began before the login")
        store.failNextReads(1)  // the store is unavailable now
        #expect(try await service.validAccessToken() == "access-2", "alice's token was served after bob's login")
        api.verify()
    }
}

/// A store around an `InMemoryTokenStore`, without change stamps (every token call reads it), that
/// holds or fails single operations at the test's word: its next read after it has read
/// (``holdNextRead()``), its `number`-th exclusive access before the lock is taken
/// (``holdAccess(number:)``), its next transaction that changes something, after the body ran and
/// before anything is written, as a failed write (``failNextSave()``), and its next reads
/// (``failNextReads(_:)``).
final class ReviewStore: TokenStore {
    let inner: InMemoryTokenStore
    private struct State {
        var heldRead: TestGate?
        var heldAccess: (number: Int, gate: TestGate)?
        var accesses = 0
        var failingSaves = 0
        var failingReads = 0
    }
    private let state = LockedState(State())

    init(_ profiles: [String: StoredProfile] = [:]) {
        inner = InMemoryTokenStore(profiles: profiles)
    }

    static let unavailable = TokenStoreError(.unavailable, path: "review", "the review store is unavailable")
    static let saveFailed = TokenStoreError(.io, path: "review", "the review store could not write")

    /// Holds the next read, once it has read, until the returned gate is opened.
    func holdNextRead() -> TestGate {
        let gate = TestGate()
        state.withLock { $0.heldRead = gate }
        return gate
    }

    /// Holds the `number`-th exclusive access (counted from the store's creation), before it takes
    /// the lock, until the returned gate is opened.
    func holdAccess(number: Int) -> TestGate {
        let gate = TestGate()
        state.withLock { $0.heldAccess = (number, gate) }
        return gate
    }

    /// The next transaction that changes something fails (`.io`) and writes nothing.
    func failNextSave() {
        state.withLock { $0.failingSaves += 1 }
    }

    /// The next `count` reads fail (`.unavailable`).
    func failNextReads(_ count: Int) {
        state.withLock { $0.failingReads += count }
    }

    func profile(named name: String) async throws -> StoredProfile? {
        let (fails, held) = state.withLock { state -> (Bool, TestGate?) in
            if state.failingReads > 0 {
                state.failingReads -= 1
                return (true, nil)
            }
            defer { state.heldRead = nil }
            return (false, state.heldRead)
        }
        if fails { throw Self.unavailable }
        let profile = try await inner.profile(named: name)
        await held?.pass()
        return profile
    }

    func profileNames() async throws -> [String] {
        try await inner.profileNames()
    }

    nonisolated(nonsending) func withExclusiveAccess<T>(_ body: (inout TokenStoreTransaction) async throws -> T) async throws -> T {
        let held = state.withLock { state -> TestGate? in
            state.accesses += 1
            guard let access = state.heldAccess, access.number == state.accesses else { return nil }
            state.heldAccess = nil
            return access.gate
        }
        await held?.pass()
        return try await inner.withExclusiveAccess { transaction in
            let result = try await body(&transaction)
            if transaction.hasChanges, self.takeFailingSave() { throw Self.saveFailed }
            return result
        }
    }

    private func takeFailingSave() -> Bool {
        state.withLock { state -> Bool in
            guard state.failingSaves > 0 else { return false }
            state.failingSaves -= 1
            return true
        }
    }
}

/// Logs in at once with `issued`, and revokes at once, noting the refresh token of each
/// revocation. It does not refresh.
final class RecordingLoginAPI: AuthAPI {
    let source = Race.source
    let issued: Credentials
    private let revoked = LockedState<[String]>([])

    init(issued: Credentials) {
        self.issued = issued
    }

    /// The refresh tokens of the credentials revoked so far, in order.
    var revokedRefreshTokens: [String] { revoked.withLock { $0 } }

    func logIn(for id: User.ID, with password: String) async throws -> Credentials { issued }
    func refresh(_ credentials: Credentials) async throws -> Credentials { throw CancellationError() }
    func revoke(_ credentials: Credentials) async throws -> Bool {
        revoked.withLock { $0.append(credentials.refreshToken ?? "") }
        return true
    }
}
