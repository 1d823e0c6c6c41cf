import Foundation
@testable import LoginKit
import LoginKitMocks
import Testing

/// `AuthService.validCredentials(rejecting:)`, the forced refresh after a resource server refused
/// the access token: the one shared refresh, however many callers refuse the same token, and none
/// for a caller whose token was already replaced. The tokens here are all far from expiry: only the
/// refusal makes a refresh due.
@Suite(.timeLimit(.minutes(3)))
struct ForcedRefreshTests {
    static let now = Race.t0.addingTimeInterval(60)  // 3540 s left on access-0

    static func service(_ api: MockAuthAPI, _ store: any TokenStore) -> AuthService {
        AuthService(api: api, store: store, clock: ManualClock(start: now))
    }

    @Test func fiftyCallersRefusingTheSameTokenShareOneRefresh() async throws {
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(0, issuedAt: Race.t0))])
        let api = MockAuthAPI()
        let service = Self.service(api, store)
        // The cached path now holds access-0: it must not serve it to a forced refresh.
        #expect(try await service.validAccessToken() == "access-0")
        let callers = (0..<50).map { _ in Task { try await service.validCredentials(rejecting: "access-0").accessToken } }
        let refresh = await api.nextRefresh()
        #expect(refresh.arguments.accessToken == "access-0")
        refresh.resume(returning: Race.credentials(1, issuedAt: Self.now))
        var tokens = Set<String?>()
        for caller in callers { tokens.insert(try await caller.value) }
        #expect(tokens == ["access-1"])
        #expect(api.refreshCallCount == 1)
        // Everyone else is served the new token too, and a late refusal of the old one refreshes nothing.
        #expect(try await service.validAccessToken() == "access-1")
        #expect(try await service.validCredentials(rejecting: "access-0").accessToken == "access-1")
        #expect(api.refreshCallCount == 1)
        api.verify()
    }

    @Test func aCallerWhoseRefusedTokenWasAlreadyReplacedTakesTheNewOneWithoutARefresh() async throws {
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(1, issuedAt: Race.t0))])
        let api = MockAuthAPI()
        let service = Self.service(api, store)
        // Read from the store by the actor's step, then from the cached path.
        #expect(try await service.validCredentials(rejecting: "access-0").accessToken == "access-1")
        #expect(try await service.validCredentials(rejecting: "access-0").accessToken == "access-1")
        #expect(api.refreshCallCount == 0)
        api.verify()
    }

    /// Two processes (two services on one store) refuse the same token: the second one's refresh,
    /// under the store's lock, finds the token the first one saved and takes it.
    @Test func twoProcessesRefusingTheSameTokenMakeOneRefresh() async throws {
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(0, issuedAt: Race.t0))])
        let api = MockAuthAPI()
        let first = Self.service(api, store)
        let second = Self.service(api, store)
        let firstCaller = Task { try await first.validCredentials(rejecting: "access-0").accessToken }
        let refresh = await api.nextRefresh()  // the first holds the store's lock now
        let secondCaller = Task { try await second.validCredentials(rejecting: "access-0").accessToken }
        refresh.resume(returning: Race.credentials(1, issuedAt: Self.now))
        #expect(try await firstCaller.value == "access-1")
        #expect(try await secondCaller.value == "access-1")
        #expect(api.refreshCallCount == 1)
        api.verify()
    }

    /// The refusal of a token is no reason to end the session: what the refresh brings is saved and
    /// served, and the profile stays.
    @Test func aForcedRefreshIsSavedLikeEveryRefresh() async throws {
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(0, issuedAt: Race.t0))])
        let api = MockAuthAPI()
        let service = Self.service(api, store)
        let caller = Task { try await service.validCredentials(rejecting: "access-0") }
        await api.nextRefresh().resume(returning: Race.credentials(1, issuedAt: Self.now))
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
