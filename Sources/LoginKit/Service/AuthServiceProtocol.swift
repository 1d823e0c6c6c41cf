/// What code that logs in and uses tokens needs from an authentication service: `AuthService`
/// conforms; so does `MockAuthService` in `LoginKitMocks`, whose calls suspend until a test
/// resumes them.
public protocol AuthServiceProtocol: Sendable {
    /// Logs `id` in with `password` and saves the credentials.
    ///
    /// - Throws: `LoginError` when the credentials are rejected, a login is already running
    ///   (`.loginInProgress`) or the app must be upgraded (`.upgradeRequired`), `ServerError`,
    ///   `NetworkError`, `TokenVerificationError`, `TokenStoreError`.
    func logIn(for id: User.ID, with password: String) async throws -> User

    /// Revokes (bounded) and forgets the credentials; says what happened at the provider.
    @discardableResult
    func logOut() async -> LogoutResult

    /// The logged-in user, or `nil` when nobody is.
    ///
    /// - Throws: `TokenStoreError` when the store cannot be read.
    func currentUser() async throws -> User?

    /// Credentials valid for at least `minimumValidity`, refreshed once when needed.
    func validCredentials(minimumValidity: Duration) async throws -> Credentials

    /// An access token valid for at least `minimumValidity`: the call that works with every provider.
    func validAccessToken(minimumValidity: Duration) async throws -> String

    /// An ID token valid for at least `minimumValidity`.
    ///
    /// - Throws: also `LoginRequiredError` `.noIDToken` when the provider issued none.
    func validIDToken(minimumValidity: Duration) async throws -> IDToken
}

extension AuthServiceProtocol {
    /// Valid credentials (beyond the service's mandatory window).
    public func validCredentials() async throws -> Credentials {
        try await validCredentials(minimumValidity: .zero)
    }

    /// A valid access token: the call that works with every provider.
    public func validAccessToken() async throws -> String {
        try await validAccessToken(minimumValidity: .zero)
    }

    /// A valid ID token; `LoginRequiredError` `.noIDToken` when the provider issued none.
    public func validIDToken() async throws -> IDToken {
        try await validIDToken(minimumValidity: .zero)
    }
}
