public import LoginKit

/// An `AuthAPI` whose calls suspend until the test resumes them; for testing code built on
/// `AuthService` (hold a refresh in flight, fail it on purpose, count calls).
public final class MockAuthAPI: AuthAPI {
    /// A suspended `logIn(for:with:)`.
    public typealias LogInCall = SuspendedCall<(id: User.ID, password: String), Credentials>
    /// A suspended `refresh(_:)`.
    public typealias RefreshCall = SuspendedCall<Credentials, Credentials>
    /// A suspended `revoke(_:)`.
    public typealias RevokeCall = SuspendedCall<Credentials, Void>

    private let logIns = CallQueue<LogInCall>()
    private let refreshes = CallQueue<RefreshCall>()
    private let revocations = CallQueue<RevokeCall>()
    /// What profiles logged in through this mock remember.
    public let source: CredentialSource

    /// A `MockAuthAPI` from its parts; see each property for what it means.
    public init(source: CredentialSource = CredentialSource(kind: .oauth2, endpoint: "https://issuer.test", clientID: "mock")) {
        self.source = source
    }

    public func logIn(for id: User.ID, with password: String) async throws -> Credentials {
        let call = LogInCall(name: "logIn(for: \(id.rawValue))", arguments: (id, password))
        logIns.arrive(call)
        return try await call.value()
    }

    public func refresh(_ credentials: Credentials) async throws -> Credentials {
        let call = RefreshCall(name: "refresh(_:)", arguments: credentials)
        refreshes.arrive(call)
        return try await call.value()
    }

    public func revoke(_ credentials: Credentials) async throws {
        let call = RevokeCall(name: "revoke(_:)", arguments: credentials)
        revocations.arrive(call)
        try await call.value()
    }

    public func nextLogIn() async -> LogInCall { await logIns.next() }
    public func nextRefresh() async -> RefreshCall { await refreshes.next() }
    public func nextRevoke() async -> RevokeCall { await revocations.next() }

    /// How many refreshes arrived.
    public var refreshCallCount: Int { refreshes.all.count }

    /// Reports (and releases) every call never resumed.
    public func verify() {
        logIns.verify()
        refreshes.verify()
        revocations.verify()
    }
}
