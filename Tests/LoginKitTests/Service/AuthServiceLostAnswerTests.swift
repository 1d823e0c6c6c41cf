import Foundation
import LoginKit
import LoginKitHTTP
import LoginKitMocks
import LoginKitTestSupport
import Testing

/// A refresh whose answer may have been lost, and credentials that expire on their way to the
/// caller: the refresh token is never sent twice, the profile is kept, and every message says what
/// happened instead of "log in again" where the session is healthy.
@Suite(.timeLimit(.minutes(2)))
struct AuthServiceLostAnswerTests {
    /// Retries at once (no backoff): a service that would send the refresh token again does so
    /// within the same call, and the count shows it.
    func service(_ api: any AuthAPI, _ store: any TokenStore, _ clock: ManualClock) -> AuthService {
        var configuration = AuthService.Configuration()
        configuration.initialBackoff = .zero
        configuration.maximumBackoff = .zero
        return AuthService(api: api, store: store, clock: clock, configuration: configuration)
    }

    static let timedOut = NetworkError(.timedOut, "request to issuer.test timed out", transportCode: 28)

    @Test func aRefreshTimedOutAfterItLeftIsNotSentAgainAndTheProfileIsKept() async throws {
        let old = Race.credentials(0, issuedAt: Race.t0)
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(old)])
        let clock = ManualClock(start: Race.t0.addingTimeInterval(3601))  // expired
        let api = ScriptedRefreshAPI([.failure(Self.timedOut)])
        let error = await thrown { try await service(api, store, clock).validAccessToken() }
        let networkError = try #require(error as? NetworkError, "\(String(describing: error))")
        #expect(networkError.code == .timedOut)
        #expect(networkError.message.contains("the answer to the token refresh was lost"))
        #expect(api.sentRefreshTokens == ["refresh-0"])  // once: 4 with the retries a transient failure gets
        let kept = try #require(try await store.profile(named: "default"))
        #expect(kept.credentials == old)
        #expect(kept.attributes[AuthService.lostAnswerAttribute] == String(Int64(clock.now.timeIntervalSince1970)))
    }

    /// The refresh token the provider then refuses (it had rotated it when it answered the lost
    /// request) is explained: the profile is cleared as for any refusal, and the message says why.
    @Test func aRefusalAfterALostAnswerSaysTheAnswerWasLost() async throws {
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(0, issuedAt: Race.t0))])
        let clock = ManualClock(start: Race.t0.addingTimeInterval(3601))
        let api = ScriptedRefreshAPI([
            .failure(Self.timedOut),
            .failure(LoginError(.refreshTokenRejected, "the refresh token was rejected; log in again", providerError: "invalid_grant")),
        ])
        let service = service(api, store, clock)
        _ = await thrown { try await service.validAccessToken() }
        clock.advance(by: .seconds(40))
        let error = await thrown { try await service.validAccessToken() }
        let refused = try #require(error as? LoginRequiredError, "\(String(describing: error))")
        #expect(refused.code == .credentialsRejected)
        #expect(refused.message.contains("the answer to an earlier refresh was lost 40 s ago"))
        #expect(try await store.profile(named: "default") == nil)
        #expect(api.sentRefreshTokens == ["refresh-0", "refresh-0"])
    }

    /// Without the mark, a refusal says only that the credentials were refused.
    @Test func aPlainRefusalSaysNothingOfALostAnswer() async throws {
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(0, issuedAt: Race.t0))])
        let api = ScriptedRefreshAPI([.failure(LoginError(.refreshTokenRejected, "rejected", providerError: "invalid_grant"))])
        let error = await thrown { try await service(api, store, ManualClock(start: Race.t0.addingTimeInterval(3601))).validAccessToken() }
        let refused = try #require(error as? LoginRequiredError)
        #expect(refused.message == "the provider rejected the stored credentials; log in again")
    }

    /// A failure the transport knows happened before anything was sent (no connection) cannot have
    /// reached the provider: it is retried as any transient failure.
    @Test func aFailureBeforeTheRequestLeftIsRetried() async throws {
        var notSent = NetworkError(.timedOut, "connecting to issuer.test timed out", transportCode: 28)
        notSent.requestSent = false
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(0, issuedAt: Race.t0))])
        let clock = ManualClock(start: Race.t0.addingTimeInterval(3601))
        let api = ScriptedRefreshAPI([.failure(notSent), .success(Race.credentials(1, issuedAt: clock.now))])
        #expect(try await service(api, store, clock).validAccessToken() == "access-1")
        #expect(api.sentRefreshTokens == ["refresh-0", "refresh-0"])
        #expect(try await store.profile(named: "default")?.attributes[AuthService.lostAnswerAttribute] == nil)
    }

    /// Credentials still valid are served when the answer was lost (a transient failure), and the
    /// profile is marked; the next refresh that is saved removes the mark.
    @Test func aStillValidTokenIsServedWhenTheAnswerWasLostAndTheNextRefreshClearsTheMark() async throws {
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(0, issuedAt: Race.t0))])
        let clock = ManualClock(start: Race.t0.addingTimeInterval(3590))  // 10 s left: callers wait for the refresh
        var lost = Self.timedOut
        lost.requestSent = true
        let api = ScriptedRefreshAPI([.failure(lost), .success(Race.credentials(1, issuedAt: Race.t0.addingTimeInterval(3595)))])
        let service = service(api, store, clock)
        #expect(try await service.validAccessToken() == "access-0")
        #expect(api.sentRefreshTokens == ["refresh-0"])
        #expect(try await store.profile(named: "default")?.attributes[AuthService.lostAnswerAttribute] != nil)
        clock.advance(by: .seconds(5))
        #expect(try await service.validAccessToken() == "access-1")
        #expect(try await store.profile(named: "default")?.attributes[AuthService.lostAnswerAttribute] == nil)
    }

    /// Fresh 10-second credentials that expired while their save was held up (a lock, a slow disk,
    /// a database reconnecting) are the store's failure, not "log in again": the session is
    /// healthy, and a login (`token --login auto`) would be needless.
    @Test func credentialsThatExpiredWhileTheirSaveWasHeldUpAreAStoreFailure() async throws {
        let inner = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(0, issuedAt: Race.t0, lifetime: 10))])
        let gate = TestGate()
        let clock = ManualClock(start: Race.t0.addingTimeInterval(9))  // 1 s left: callers wait for the refresh
        let api = MockAuthAPI()
        let service = AuthService(api: api, store: HeldSaveStore(inner: inner, gate: gate), clock: clock)
        let waiter = Task { try await service.validAccessToken() }
        await api.nextRefresh().resume(returning: Race.credentials(1, issuedAt: clock.now, lifetime: 10))
        await gate.arrived()
        clock.advance(by: .seconds(15))  // the save takes 15 s
        gate.open()
        let error = await thrown { try await waiter.value }
        let storeError = try #require(error as? TokenStoreError, "\(String(describing: error))")
        #expect(storeError.code == .unavailable)
        #expect(storeError.message.contains("valid for 10 s when they arrived"))
        #expect(storeError.message.contains("HeldSaveStore"))
        #expect(try await inner.profile(named: "default")?.credentials.accessToken == "access-1")  // saved: the next call is served
    }
}

/// An API whose refreshes answer from a script, in order (the last answer again once the script
/// runs out), noting the refresh token each one was sent.
final class ScriptedRefreshAPI: AuthAPI {
    let source = Race.source
    private let state: LockedState<(script: [Result<Credentials, any Error>], sent: [String])>

    init(_ script: [Result<Credentials, any Error>]) {
        state = LockedState((script: script, sent: []))
    }

    var sentRefreshTokens: [String] { state.withLock { $0.sent } }

    func logIn(for id: User.ID, with password: String) async throws -> Credentials {
        throw LoginError(.invalidCredentials, "this API only refreshes")
    }

    func refresh(_ credentials: Credentials) async throws -> Credentials {
        let next = state.withLock { state -> Result<Credentials, any Error> in
            state.sent.append(credentials.refreshToken ?? "")
            return state.script.count > 1 ? state.script.removeFirst() : state.script[0]
        }
        return try next.get()
    }

    func revoke(_ credentials: Credentials) async throws -> Bool { false }
}

/// A store around an `InMemoryTokenStore` whose transactions that change something are held, after
/// their body ran and before the change is kept, until the test opens `gate`: a slow save.
struct HeldSaveStore: TokenStore {
    let inner: InMemoryTokenStore
    let gate: TestGate

    func profile(named name: String) async throws -> StoredProfile? { try await inner.profile(named: name) }
    func profileNames() async throws -> [String] { try await inner.profileNames() }

    nonisolated(nonsending) func withExclusiveAccess<T>(_ body: (inout TokenStoreTransaction) async throws -> T) async throws -> T {
        try await inner.withExclusiveAccess { transaction in
            let result = try await body(&transaction)
            if transaction.hasChanges { await gate.pass() }
            return result
        }
    }
}
