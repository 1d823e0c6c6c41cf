public import LoginKit

/// An `AuthServiceProtocol` whose every call suspends until the test resumes it, so that a test can
/// observe the state in between (a button disabled while a login is in flight).
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
/// Call ``verify()`` at the end of a test (or use ``withMock(_:)``): a call still suspended is
/// reported as a test failure naming it, and thrown `MockCallNeverResumed` so nothing hangs.
public final class MockAuthService: AuthServiceProtocol {
    /// A suspended `logIn(for:with:)`.
    public typealias LogInCall = SuspendedCall<(id: User.ID, password: String), User>
    /// A suspended `logOut()`.
    public typealias LogOutCall = SuspendedCall<Void, Void>

    private let logIns = CallQueue<LogInCall>()
    private let logOuts = CallQueue<LogOutCall>()
    /// What `currentUser()` returns (not suspended).
    public let user: User?

    /// A `MockAuthService` from its parts; see each property for what it means.
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

    public func logOut() async {
        let call = LogOutCall(name: "logOut()", arguments: ())
        logOuts.arrive(call)
        _ = try? await call.value()
    }

    public func currentUser() async -> User? { user }

    /// Waits for the next `logIn` call to arrive and returns it, suspended.
    public func nextLogIn() async -> LogInCall { await logIns.next() }

    /// Waits for the next `logOut` call.
    public func nextLogOut() async -> LogOutCall { await logOuts.next() }

    /// How many `logIn` calls arrived.
    public var logInCallCount: Int { logIns.all.count }

    /// Reports every call that was never resumed (and releases it with `MockCallNeverResumed`).
    public func verify() {
        logIns.verify()
        logOuts.verify()
    }
}
