public import LoginKit

/// An `AuthServiceProtocol` whose every call suspends until the test resumes it, so that a test can
/// observe the state in between (a button disabled while a login is under way, a feature waiting
/// for its token).
///
/// ```swift
/// let service = MockAuthService()
/// let viewModel = LoginViewModel(service: service)
/// async let pressed: Void = viewModel.loginButtonPressed()
/// let call = await service.nextLogIn()        // the login has reached the service
/// #expect(viewModel.isLoginButtonEnabled == false)
/// call.resume(returning: user)
/// await pressed
/// ```
///
/// Calls honour cancellation as the real service does: a cancelled caller throws
/// `CancellationError`, and the call no longer needs resuming.
///
/// Call ``verify()`` at the end of a test (or use ``withMock(_:)``): a call still suspended is
/// reported as a test failure naming it, and released with an error so nothing hangs.
public final class MockAuthService: AuthServiceProtocol {
    /// A suspended `logIn(for:with:)`.
    public typealias LogInCall = SuspendedCall<(id: User.ID, password: String), User>
    /// A suspended `logOut()`.
    public typealias LogOutCall = SuspendedCall<Void, LogoutResult>
    /// A suspended token request (`validCredentials`, `validAccessToken`, `validIDToken`), with the
    /// minimum validity asked; resume it with the credentials the caller is to get.
    public typealias CredentialsCall = SuspendedCall<Duration, Credentials>

    private let logIns = CallQueue<LogInCall>()
    private let logOuts = CallQueue<LogOutCall>()
    private let credentialRequests = CallQueue<CredentialsCall>()
    /// What `currentUser()` returns (not suspended).
    package let user: User?

    /// A mock whose `currentUser()` is `currentUser`.
    public init(currentUser: User? = nil) {
        self.user = currentUser
    }

    /// Runs `body` with a fresh mock and verifies it afterwards.
    public nonisolated(nonsending) static func withMock<T>(_ body: (MockAuthService) async throws -> T) async rethrows -> T {
        let mock = MockAuthService()
        let result = try await body(mock)
        mock.verify()
        return result
    }

    public func logIn(for id: User.ID, with password: String) async throws -> User {
        let call = LogInCall(name: "logIn(for: \(id.rawValue))", arguments: (id, password))
        logIns.arrive(call)
        return try await call.value()
    }

    @discardableResult
    public func logOut() async -> LogoutResult {
        let call = LogOutCall(name: "logOut()", arguments: ())
        logOuts.arrive(call)
        do {
            return try await call.value()
        } catch {
            return LogoutResult(revocation: .failed(reason: "\(error)"), profileRemoved: false, storeError: nil)
        }
    }

    public func currentUser() async throws -> User? { user }

    public func validCredentials(minimumValidity: Duration) async throws -> Credentials {
        try await requestCredentials("validCredentials(minimumValidity: \(minimumValidity))", minimumValidity)
    }

    public func validAccessToken(minimumValidity: Duration) async throws -> String {
        let credentials = try await requestCredentials("validAccessToken(minimumValidity: \(minimumValidity))", minimumValidity)
        guard let accessToken = credentials.accessToken else {
            throw LoginRequiredError(.noAccessToken, profile: nil, "the mock was resumed with credentials that hold no access token")
        }
        return accessToken
    }

    public func validIDToken(minimumValidity: Duration) async throws -> IDToken {
        let credentials = try await requestCredentials("validIDToken(minimumValidity: \(minimumValidity))", minimumValidity)
        guard let idToken = credentials.idToken else {
            throw LoginRequiredError(.noIDToken, profile: nil, "the mock was resumed with credentials that hold no ID token")
        }
        return idToken
    }

    private func requestCredentials(_ name: String, _ minimumValidity: Duration) async throws -> Credentials {
        let call = CredentialsCall(name: name, arguments: minimumValidity)
        credentialRequests.arrive(call)
        return try await call.value()
    }

    /// Waits for the next `logIn` call to arrive and returns it, suspended.
    public func nextLogIn() async -> LogInCall { await logIns.next() }

    /// Waits for the next `logOut` call.
    public func nextLogOut() async -> LogOutCall { await logOuts.next() }

    /// Waits for the next token request (any of the three `valid…` calls).
    public func nextCredentialsRequest() async -> CredentialsCall { await credentialRequests.next() }

    /// How many `logIn` calls arrived.
    package var logInCallCount: Int { logIns.all.count }

    /// Reports every call that was never resumed as a test failure, and releases it with an error.
    public func verify() {
        logIns.verify()
        logOuts.verify()
        credentialRequests.verify()
    }
}
