#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import LoginKitJOSE

/// A way to log in and refresh over HTTP: `OAuth2API` (OpenID Connect), `JSONLoginAPI`, `CognitoAPI`.
///
/// Implementations verify ID tokens (when they know the issuer's keys) before returning them, and
/// throw the kit's typed errors: `LoginError` (credentials rejected), `ServerError`, `NetworkError`,
/// `TokenVerificationError`.
///
/// Concurrency contract: `Sendable`; every method may run concurrently. Passwords are used for one
/// request and never kept.
public protocol AuthAPI: Sendable {
    /// What a stored profile must remember to refresh later (never a secret).
    var source: CredentialSource { get }

    /// Logs `id` in with `password`.
    func logIn(for id: User.ID, with password: String) async throws -> Credentials

    /// New credentials from `credentials`' refresh token. A response without a new refresh token
    /// keeps the old one; without a new ID token, the old one.
    ///
    /// - Throws: `LoginError` `.refreshTokenRejected` when the provider no longer accepts it;
    ///   `LoginRequiredError` `.cannotRefresh` when there is no refresh token or the API has no refresh.
    func refresh(_ credentials: Credentials) async throws -> Credentials

    /// Revokes `credentials` at the provider (the refresh token first).
    ///
    /// - Returns: `false` when this API has no way to revoke (no revocation endpoint known).
    /// - Throws: the kit's typed errors when the provider refused or could not be reached.
    @discardableResult
    func revoke(_ credentials: Credentials) async throws -> Bool
}

/// An API that supports the device authorization grant (RFC 8628); `AuthService.logInWithDevice`
/// drives it.
package protocol DeviceAuthorizationAPI: AuthAPI {
    /// Starts a device authorization: the code to show the user and where to enter it.
    func startDeviceAuthorization(scope: String?) async throws -> DeviceAuthorization
    /// Polls once for the token.
    func pollDeviceAuthorization(_ authorization: DeviceAuthorization) async throws -> DevicePollResult
}

/// An API that supports the client credentials grant (a service logging in as itself).
public protocol ClientCredentialsAPI: AuthAPI {
    /// Credentials for the client itself.
    func clientCredentials(scope: String?) async throws -> Credentials
    /// Credentials for the client itself, for a resource, audience and scope (RFC 8707). The
    /// default serves scope-only targets through ``clientCredentials(scope:)``.
    func clientCredentials(for target: TokenTarget) async throws -> Credentials
}

/// What a device authorization response says (RFC 8628 §3.2).
public struct DeviceAuthorization: Sendable, Hashable {
    /// The code the device polls with; never shown.
    package let deviceCode: String
    /// The code the user types.
    public let userCode: String
    /// Where the user types it.
    public let verificationURI: String
    /// The URI with the code filled in, when the provider offers one.
    public let verificationURIComplete: String?
    /// When the codes expire.
    public let expiresAt: Date
    /// How long to wait between polls.
    package let interval: Duration
    /// The DPoP key (RFC 9449) every poll proves possession of, when the API binds tokens to one;
    /// the credentials the poll returns keep it.
    package var proofKey: DPoPKey? = nil

    /// A device authorization as the provider answered it (RFC 8628 §3.2), `expires_in` already
    /// turned into `expiresAt`.
    package init(deviceCode: String, userCode: String, verificationURI: String, verificationURIComplete: String?, expiresAt: Date, interval: Duration) {
        self.deviceCode = deviceCode
        self.userCode = userCode
        self.verificationURI = verificationURI
        self.verificationURIComplete = verificationURIComplete
        self.expiresAt = expiresAt
        self.interval = interval
    }
}

/// One poll's outcome.
package enum DevicePollResult: Sendable {
    /// The user has not decided yet (`authorization_pending`).
    case pending
    /// Poll more slowly: add 5 seconds to the interval (`slow_down`).
    case slowDown
    /// Approved.
    case authorized(Credentials)
}
