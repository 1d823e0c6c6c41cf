import Foundation
@testable import LoginKit
import LoginKitHTTP
import LoginKitMocks
import Testing

/// `AuthService.validCredentials(rejecting:sentAt:)`, the forced refresh after a resource server
/// refused the access token: the one shared refresh, however many callers refuse the same token,
/// and none for a caller whose token was already replaced — even with the same token issued again —
/// nor, for 30 s, for a token a forced refresh brought. The tokens here are all far from expiry
/// unless said otherwise: only the refusal makes a refresh due.
@Suite(.timeLimit(.minutes(3)))
struct ForcedRefreshTests {
    static let now = Race.t0.addingTimeInterval(60)  // 3540 s left on access-0

    static func service(_ api: MockAuthAPI, _ store: any TokenStore) -> AuthService {
        AuthService(api: api, store: store, clock: ManualClock(start: now))
    }

    /// A mock API, a store whose profile holds `Race.credentials(number)` issued at `Race.t0`, and a
    /// service over both.
    static func setUp(holding number: Int) -> (api: MockAuthAPI, store: InMemoryTokenStore, service: AuthService) {
        let api = MockAuthAPI()
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(number, issuedAt: Race.t0))])
        return (api, store, service(api, store))
    }

    /// What the refresh brings: `access-1` and `refresh-1`, issued now.
    static var refreshed: Credentials { Race.credentials(1, issuedAt: now) }

    /// Expects `api` to have been asked for `count` refreshes, and no call of it left suspended.
    static func expectRefreshes(_ count: Int, by api: MockAuthAPI, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(api.refreshCallCount == count, sourceLocation: sourceLocation)
        api.verify()
    }

    @Test func fiftyCallersRefusingTheSameTokenShareOneRefresh() async throws {
        let (api, _, service) = Self.setUp(holding: 0)
        // The cached path now holds access-0: it must not serve it to a forced refresh.
        #expect(try await service.validAccessToken() == "access-0")
        let callers = (0..<50).map { _ in Task { try await service.validCredentials(rejecting: "access-0").accessToken } }
        let refresh = await api.nextRefresh()
        #expect(refresh.arguments.accessToken == "access-0")
        refresh.resume(returning: Self.refreshed)
        var tokens = Set<String?>()
        for caller in callers { tokens.insert(try await caller.value) }
        #expect(tokens == ["access-1"])
        #expect(api.refreshCallCount == 1)
        // Everyone else is served the new token too, and a late refusal of the old one refreshes nothing.
        #expect(try await service.validAccessToken() == "access-1")
        #expect(try await service.validCredentials(rejecting: "access-0").accessToken == "access-1")
        Self.expectRefreshes(1, by: api)
    }

    @Test func aCallerWhoseRefusedTokenWasAlreadyReplacedTakesTheNewOneWithoutARefresh() async throws {
        let (api, _, service) = Self.setUp(holding: 1)
        // Read from the store by the actor's step, then from the cached path.
        #expect(try await service.validCredentials(rejecting: "access-0").accessToken == "access-1")
        #expect(try await service.validCredentials(rejecting: "access-0").accessToken == "access-1")
        Self.expectRefreshes(0, by: api)
    }

    /// Two processes (two services on one store) refuse the same token: the second one's refresh,
    /// under the store's lock, finds the token the first one saved and takes it.
    @Test func twoProcessesRefusingTheSameTokenMakeOneRefresh() async throws {
        let (api, store, first) = Self.setUp(holding: 0)
        let second = Self.service(api, store)
        let firstCaller = Task { try await first.validCredentials(rejecting: "access-0").accessToken }
        let refresh = await api.nextRefresh()  // the first holds the store's lock now
        let secondCaller = Task { try await second.validCredentials(rejecting: "access-0").accessToken }
        refresh.resume(returning: Self.refreshed)
        #expect(try await firstCaller.value == "access-1")
        #expect(try await secondCaller.value == "access-1")
        Self.expectRefreshes(1, by: api)
    }

    /// The refusal of a token is no reason to end the session: what the refresh brings is saved and
    /// served, and the profile stays.
    @Test func aForcedRefreshIsSavedLikeEveryRefresh() async throws {
        let (api, store, service) = Self.setUp(holding: 0)
        let caller = Task { try await service.validCredentials(rejecting: "access-0") }
        await api.nextRefresh().resume(returning: Self.refreshed)
        #expect(try await caller.value.refreshToken == "refresh-1")
        #expect(try await store.profile(named: "default")?.credentials.accessToken == "access-1")
        api.verify()
    }

    /// Without a refresh token the refused token cannot be replaced: the caller is told to log in,
    /// and nothing is sent.
    @Test func aRefusedTokenWithoutARefreshTokenNeedsALogin() async throws {
        var credentials = Race.credentials(0, issuedAt: Race.t0)
        credentials.refreshToken = nil
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(credentials)])
        let service = AuthService(api: NoRefreshAPI(), store: store, clock: ManualClock(start: Self.now))
        let error = await #expect(throws: LoginRequiredError.self) { try await service.validCredentials(rejecting: "access-0") }
        #expect(error?.code == .cannotRefresh)
    }

    /// A provider that issues the same access token again: the refresh for a refusal brings
    /// access-0 once more, issued after the refused request was sent, so it is not what was
    /// refused. Another refusal of a request sent before that refresh refreshes nothing.
    @Test func theSameTokenIssuedAgainIsNotRefreshedAgainForARequestSentBeforeIt() async throws {
        let clock = ManualClock(start: Self.now)
        let api = CountingAPI { _ in Race.credentials(0, issuedAt: clock.now) }
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(0, issuedAt: Race.t0))])
        let service = AuthService(api: api, store: store, clock: clock)
        let sentAt = clock.now
        clock.advance(by: .seconds(1))  // the refusal came back a second later
        #expect(try await service.validCredentials(rejecting: "access-0", sentAt: sentAt).accessToken == "access-0")
        #expect(api.refreshCount == 1)
        // Another request sent at the same time, refused too: the token now held was issued after it.
        #expect(try await service.validCredentials(rejecting: "access-0", sentAt: sentAt).accessToken == "access-0")
        // So for another process, which reads it from the store.
        let other = AuthService(api: api, store: store, clock: clock)
        #expect(try await other.validCredentials(rejecting: "access-0", sentAt: sentAt).accessToken == "access-0")
        #expect(api.refreshCount == 1)
    }

    /// A token a forced refresh brought, refused again within 30 s — in this process or another one
    /// sharing the store — is handed back as it is (`send` then returns the 401): the mark is in the
    /// store. After 30 s a refusal refreshes again; a refresh for any other reason removes the mark.
    @Test func aTokenAForcedRefreshBroughtIsNotRefreshedAgainForThirtySecondsInAnyProcess() async throws {
        let clock = ManualClock(start: Self.now)
        let api = CountingAPI { Race.credentials($0, issuedAt: clock.now) }
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(0, issuedAt: Race.t0))])
        let first = AuthService(api: api, store: store, clock: clock)
        let second = AuthService(api: api, store: store, clock: clock)
        #expect(try await first.validCredentials(rejecting: "access-0").accessToken == "access-1")
        let marked = try #require(try await store.profile(named: "default"))
        #expect(marked.attributes[AuthService.forcedRefreshAttribute] == String(Int64(clock.now.timeIntervalSince1970)))
        clock.advance(by: .seconds(5))
        #expect(try await first.validCredentials(rejecting: "access-1").accessToken == "access-1")
        #expect(try await second.validCredentials(rejecting: "access-1").accessToken == "access-1")
        #expect(api.refreshCount == 1)
        clock.advance(by: .seconds(26))  // 31 s after the forced refresh
        #expect(try await second.validCredentials(rejecting: "access-1").accessToken == "access-2")
        #expect(api.refreshCount == 2)
        // access-2 comes due: its refresh is not forced, and removes the mark.
        clock.advance(by: .seconds(3560))
        #expect(try await first.validAccessToken() == "access-3")
        #expect(try await store.profile(named: "default")?.attributes[AuthService.forcedRefreshAttribute] == nil)
    }

    /// A forced caller that joins a refresh another caller started for another reason (the token's
    /// expiry) — a refresh that took from the store the very token this caller's request was
    /// refused with, which another process had just saved — looks once more and refreshes: it is
    /// not handed the refused token.
    ///
    /// Deterministic: the first service's refresh waits at the store's gate; the forced caller's
    /// step reads the store, and the gate opens when that step then reads the clock for its
    /// verdict. That happens on the service's actor, which the step holds until it has joined the
    /// refresh, and which the refresh needs before it can end.
    @Test func aForcedCallerThatJoinedAnotherRefreshAndGotTheRefusedTokenRefreshes() async throws {
        let manual = ManualClock(start: Race.t0.addingTimeInterval(3570))  // 30 s left on access-9
        let api = CountingAPI { Race.credentials($0 - 1, issuedAt: manual.now) }  // access-0, then access-1
        let shared = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(9, issuedAt: Race.t0))])
        let gated = GatedStore(shared)
        let service = AuthService(api: api, store: gated, clock: manual)
        let otherProcess = AuthService(api: api, store: shared, clock: manual)
        // A needs a refresh (the expiry is near); the refresh waits at the store's gate.
        let callerA = Task { try await service.validAccessToken() }
        await gated.arrivedAtGate()
        // Another process refreshes meanwhile and saves access-0.
        #expect(try await otherProcess.validAccessToken() == "access-0")
        manual.advance(by: .seconds(1))
        let sentAt = manual.now  // B's request, sent with access-0, was refused
        gated.onNextRead { manual.onNextRead { gated.openGate() } }
        let callerB = Task { try await service.validCredentials(rejecting: "access-0", sentAt: sentAt).accessToken }
        #expect(try await callerB.value == "access-1")
        #expect(try await callerA.value == "access-0", "A's refresh took what the other process saved")
        #expect(api.refreshCount == 2)
    }

    /// An API whose refreshes answer at once: refresh number `n` (from 1) brings `issue(n)`.
    final class CountingAPI: AuthAPI {
        private let issue: @Sendable (Int) -> Credentials
        private let count = LockedState(0)

        init(issue: @escaping @Sendable (Int) -> Credentials) {
            self.issue = issue
        }

        /// How many refreshes arrived.
        var refreshCount: Int { count.withLock { $0 } }
        var source: CredentialSource { Race.source }
        func logIn(for id: User.ID, with password: String) async throws -> Credentials { throw CancellationError() }
        func refresh(_ credentials: Credentials) async throws -> Credentials {
            issue(count.increment())
        }
        func revoke(_ credentials: Credentials) async throws -> Bool { false }
    }

    /// A store over a shared `InMemoryTokenStore` (what another process sees too) whose first
    /// exclusive access waits at a gate until the test opens it, and which runs an action once,
    /// when the next read has read the profile.
    final class GatedStore: TokenStore {
        let inner: InMemoryTokenStore
        private struct State {
            var gateUsed = false
            var isOpen = false
            var held: CheckedContinuation<Void, Never>?
            var arrived = false
            var arrivalWaiter: CheckedContinuation<Void, Never>?
            var onNextRead: (@Sendable () -> Void)?
        }
        private let state = LockedState(State())

        init(_ inner: InMemoryTokenStore) {
            self.inner = inner
        }

        /// Returns once the first exclusive access waits at the gate.
        func arrivedAtGate() async {
            await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
                let arrived = state.withLock { state -> Bool in
                    if state.arrived { return true }
                    state.arrivalWaiter = waiter
                    return false
                }
                if arrived { waiter.resume() }
            }
        }

        /// Lets the exclusive access waiting at the gate, and every later one, go on.
        func openGate() {
            state.withLock { state -> CheckedContinuation<Void, Never>? in
                state.isOpen = true
                defer { state.held = nil }
                return state.held
            }?.resume()
        }

        /// Runs `action` once, when the next read has read the profile (before it returns).
        func onNextRead(_ action: @escaping @Sendable () -> Void) {
            state.withLock { $0.onNextRead = action }
        }

        func profile(named name: String) async throws -> StoredProfile? {
            let profile = try await inner.profile(named: name)
            let action = state.withLock { state -> (@Sendable () -> Void)? in
                defer { state.onNextRead = nil }
                return state.onNextRead
            }
            action?()
            return profile
        }

        func profileNames() async throws -> [String] {
            try await inner.profileNames()
        }

        nonisolated(nonsending) func withExclusiveAccess<T>(_ body: (inout TokenStoreTransaction) async throws -> T) async throws -> T {
            let gated = state.withLock { state -> Bool in
                defer { state.gateUsed = true }
                return !state.gateUsed && !state.isOpen
            }
            if gated {
                await withCheckedContinuation { (held: CheckedContinuation<Void, Never>) in
                    let (open, waiter) = state.withLock { state -> (Bool, CheckedContinuation<Void, Never>?) in
                        state.arrived = true
                        defer { state.arrivalWaiter = nil }
                        if !state.isOpen { state.held = held }
                        return (state.isOpen, state.arrivalWaiter)
                    }
                    waiter?.resume()
                    if open { held.resume() }
                }
            }
            return try await inner.withExclusiveAccess(body)
        }
    }

    /// An API without refresh: `refresh` says so, as the kit's APIs do without a refresh token.
    struct NoRefreshAPI: AuthAPI {
        var source: CredentialSource { Race.source }
        func logIn(for id: User.ID, with password: String) async throws -> Credentials { throw CancellationError() }
        func refresh(_ credentials: Credentials) async throws -> Credentials {
            throw LoginRequiredError(.cannotRefresh, profile: nil, "no refresh token")
        }
        func revoke(_ credentials: Credentials) async throws -> Bool { false }
    }
}
