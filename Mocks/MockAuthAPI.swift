public import LoginKit

/// An `AuthAPI` whose calls suspend until the test resumes them; for testing code built on
/// `AuthService` (hold a refresh until the test resumes it, fail it on purpose, count calls).
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

    /// A mock whose profiles remember `source`.
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

    /// Suspends until the test resumes the call; `true` (revoked) unless it throws.
    public func revoke(_ credentials: Credentials) async throws -> Bool {
        let call = RevokeCall(name: "revoke(_:)", arguments: credentials)
        revocations.arrive(call)
        try await call.value()
        return true
    }

    /// Waits for the next `logIn(for:with:)` to arrive and returns it, suspended.
    public func nextLogIn() async -> LogInCall { await logIns.next() }
    /// Waits for the next `refresh(_:)` to arrive and returns it, suspended.
    public func nextRefresh() async -> RefreshCall { await refreshes.next() }
    /// Waits for the next `revoke(_:)` to arrive and returns it, suspended.
    public func nextRevoke() async -> RevokeCall { await revocations.next() }

    /// How many logins arrived.
    public var logInCallCount: Int { logIns.all.count }

    /// How many revocations arrived.
    public var revokeCallCount: Int { revocations.all.count }

    /// How many refreshes arrived.
    public var refreshCallCount: Int { refreshes.all.count }

    /// Reports (and releases) every call never resumed.
    public func verify() {
        logIns.verify()
        refreshes.verify()
        revocations.verify()
    }
}
