import Foundation
import LoginKit
import LoginKitHTTP
import LoginKitMocks
import Testing

/// `AuthService.Configuration.attributesKeptAcrossLogins`: a login's save takes the named attributes
/// from the profile it replaces in the transaction that writes it, so that no state the store ever
/// holds lacks them — not even for a moment between two transactions.
@Suite(.timeLimit(.minutes(1)))
struct KeptAttributesTests {
    static let kept: Set<String> = ["default", "docker_registries", "git_hosts"]
    static let carried = [
        "default": "true", "docker_registries": "registry.example=oauth2accesstoken", "git_hosts": "git.example=oauth2",
        "display_name": "Alice Before",
    ]

    static func service(_ store: CommitRecordingStore, keeping kept: Set<String>) -> AuthService {
        var configuration = AuthService.Configuration()
        configuration.attributesKeptAcrossLogins = kept
        return AuthService(
            api: RecordingLoginAPI(issued: Race.credentials(1, issuedAt: Race.t0)), store: store, clock: ManualClock(start: Race.t0),
            configuration: configuration)
    }

    static func previous() -> StoredProfile {
        StoredProfile(
            credentials: Race.credentials(0, issuedAt: Race.t0), source: Race.source, userID: "alice", attributes: carried, updatedAt: Race.t0)
    }

    @Test func everyStateTheStoreHoldsDuringALoginKeepsTheNamedAttributes() async throws {
        let store = CommitRecordingStore(["default": Self.previous()])
        let service = Self.service(store, keeping: Self.kept)
        _ = try await service.logIn(for: User.ID(rawValue: "alice"), with: "pw")
        await service.shutdown()

        let commits = store.committed
        #expect(!commits.isEmpty, "the login wrote nothing")
        for (number, profiles) in commits.enumerated() {
            let attributes = try #require(profiles["default"], "commit \(number) holds no profile").attributes
            for name in Self.kept {
                #expect(attributes[name] == Self.carried[name], "commit \(number) lacks \(name)")
            }
        }
        let saved = try #require(try await store.profile(named: "default"))
        #expect(saved.credentials.accessToken == "access-1")
        #expect(saved.attributes["display_name"] == nil, "an attribute not named is replaced with the login's")
    }

    @Test func withoutTheKnobALoginReplacesEveryAttribute() async throws {
        let store = CommitRecordingStore(["default": Self.previous()])
        let service = Self.service(store, keeping: [])
        _ = try await service.logIn(for: User.ID(rawValue: "alice"), with: "pw")
        await service.shutdown()
        let saved = try #require(try await store.profile(named: "default"))
        #expect(saved.credentials.accessToken == "access-1")
        #expect(saved.attributes.isEmpty)
    }

    @Test func anAttributeTheLoginSetsWinsOverTheKeptOne() async throws {
        var previous = Self.previous()
        previous.attributes["grant"] = "password"
        let store = CommitRecordingStore(["default": previous])
        var configuration = AuthService.Configuration()
        configuration.attributesKeptAcrossLogins = ["grant", "default"]
        let api = ClientLoginAPI(issued: Race.credentials(1, issuedAt: Race.t0))
        let service = AuthService(api: api, store: store, clock: ManualClock(start: Race.t0), configuration: configuration)
        try await service.logInAsClient()
        await service.shutdown()
        let saved = try #require(try await store.profile(named: "default"))
        #expect(saved.attributes["grant"] == "client_credentials")
        #expect(saved.attributes["default"] == "true")
    }
}

/// Logs the client in at once with `issued`; nothing else.
final class ClientLoginAPI: ClientCredentialsAPI {
    let source = Race.source
    let issued: Credentials

    init(issued: Credentials) {
        self.issued = issued
    }

    func logIn(for id: User.ID, with password: String) async throws -> Credentials { throw CancellationError() }
    func refresh(_ credentials: Credentials) async throws -> Credentials { throw CancellationError() }
    func revoke(_ credentials: Credentials) async throws -> Bool { true }
    func clientCredentials(scope: String?) async throws -> Credentials { issued }
}

/// An `InMemoryTokenStore` that records the profiles of every transaction that changed something,
/// as it writes them.
final class CommitRecordingStore: TokenStore {
    let inner: InMemoryTokenStore
    private let commits = LockedState<[[String: StoredProfile]]>([])

    init(_ profiles: [String: StoredProfile]) {
        inner = InMemoryTokenStore(profiles: profiles)
    }

    /// The profiles as each change wrote them, in order.
    var committed: [[String: StoredProfile]] { commits.withLock { $0 } }

    func profile(named name: String) async throws -> StoredProfile? {
        try await inner.profile(named: name)
    }

    func profileNames() async throws -> [String] {
        try await inner.profileNames()
    }

    nonisolated(nonsending) func withExclusiveAccess<T>(_ body: (inout TokenStoreTransaction) async throws -> T) async throws -> T {
        try await inner.withExclusiveAccess { transaction in
            let result = try await body(&transaction)
            if transaction.hasChanges {
                let profiles = transaction.profiles
                commits.withLock { $0.append(profiles) }
            }
            return result
        }
    }
}
