/// What a view-model needs from an authentication service. `AuthService` conforms; so do the mocks
/// in `LoginKitMocks`.
public protocol AuthServiceProtocol: Sendable {
    /// Logs `id` in with `password` and saves the credentials.
    ///
    /// - Throws: `LoginInProgressError` when a login is already running, `LoginError` when the
    ///   credentials are rejected, `ServerError`, `NetworkError`, `TokenVerificationError`,
    ///   `UpgradeRequiredError`, `TokenStoreError`.
    func logIn(for id: User.ID, with password: String) async throws -> User

    /// Revokes (best effort) and forgets the credentials.
    func logOut() async

    /// The logged-in user, or `nil`.
    func currentUser() async -> User?
}
