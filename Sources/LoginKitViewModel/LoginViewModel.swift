public import LoginKit
public import Logging
public import Observation

/// The state of a login screen (or the CLI's login prompt), driven by an injected service.
///
/// `loginButtonPressed()` disables the button for exactly as long as the call runs (`defer`
/// re-enables it); a press while it is disabled does nothing. Errors become a
/// ``LoginErrorMessage`` a view can show, and are logged without secrets (a configuration the
/// provider refuses at `error` level, the others at `notice`). A cancelled login (the user left
/// the screen) shows nothing and logs only at `debug`. A required upgrade sets ``forcedUpgrade``,
/// which the user cannot clear. Success sets ``user`` and is signalled on ``dismissals``;
/// ``logOutButtonPressed()`` clears ``user``.
///
/// Concurrency contract: `@MainActor`; observe it with the Observation framework.
@MainActor
@Observable
public final class LoginViewModel<Service: AuthServiceProtocol> {
    /// The user ID typed.
    public var id = ""
    /// The password typed. Cleared after every attempt.
    public var password = ""
    /// Whether the login button may be pressed: `false` exactly while a login runs.
    public private(set) var isLoginButtonEnabled = true
    /// Why the last login failed, or `nil`.
    public private(set) var loginErrorMessage: LoginErrorMessage?
    /// The policy that forces an upgrade; once set, nothing the user does clears it.
    public private(set) var forcedUpgrade: VersionPolicy?
    /// The user of the last successful login; `nil` before one and after ``logOutButtonPressed()``.
    /// A failed attempt leaves it as it was.
    public private(set) var user: User?
    /// The error behind ``loginErrorMessage``, for hosts that report details (the CLI's exit codes).
    @ObservationIgnored package private(set) var lastError: (any Error)?

    /// One element per successful login: the view should close.
    @ObservationIgnored public let dismissals: AsyncStream<User>
    @ObservationIgnored private let dismissContinuation: AsyncStream<User>.Continuation
    @ObservationIgnored private let service: Service
    /// Where failures are logged.
    @ObservationIgnored package let logger: Logger

    /// A view-model for `service`, logging failures to `logger`. Default: a logger that discards
    /// everything; hand in the host's.
    public init(
        service: Service, logger: Logger = Logger(label: "loginkit.login-view-model", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        self.service = service
        self.logger = logger
        (dismissals, dismissContinuation) = AsyncStream<User>.makeStream()
    }

    /// Logs in with `id` and `password`. Does nothing while a login runs or an upgrade is forced.
    /// When the calling task is cancelled (the user left), the login ends without a message.
    public func loginButtonPressed() async {
        guard isLoginButtonEnabled, forcedUpgrade == nil else { return }
        isLoginButtonEnabled = false
        defer { isLoginButtonEnabled = true }
        loginErrorMessage = nil
        lastError = nil
        let password = self.password
        self.password = ""
        do {
            let user = try await service.logIn(for: User.ID(rawValue: id), with: password)
            self.user = user
            dismissContinuation.yield(user)
        } catch {
            lastError = error
            if error is CancellationError || Task.isCancelled {
                logger.debug("login cancelled")
                return
            }
            let message = LoginErrorMessage(error)
            if case .upgradeRequired(let policy) = message { forcedUpgrade = policy }
            loginErrorMessage = message
            // The error types carry no secrets (their messages never hold a password, token or
            // client secret); the password and tokens are never logged.
            let metadata: Logger.Metadata = ["reason": "\(message.kind)", "error": "\(String(describing: type(of: error)))"]
            if message == .configuration {
                // Not the user's to fix: whoever runs the app needs the provider's answer.
                logger.error("login failed: the app's configuration was refused", metadata: metadata.merging(["detail": "\(error)"]) { $1 })
            } else {
                logger.notice("login failed", metadata: metadata)
            }
        }
    }

    /// The user dismissed the error alert. A forced upgrade stays.
    public func dismissError() {
        loginErrorMessage = nil
    }

    /// Logs out through the service and clears ``user`` once it returns; the result says what
    /// happened at the provider (revocation) and in the store.
    @discardableResult
    public func logOutButtonPressed() async -> LogoutResult {
        let result = await service.logOut()
        user = nil
        return result
    }
}

/// What to tell the user after a failed login. New cases may be added: switch over it with a
/// `default` (``text`` has a sentence for every case).
public enum LoginErrorMessage: Sendable, Hashable {
    /// The provider rejected the user ID or the password.
    case login
    /// The provider refused the app rather than the user (its client, scope or resource), or the
    /// app's configuration cannot work: not the user's fault. The details are logged at `error`.
    case configuration
    /// The user, or the provider on their behalf, denied the sign-in.
    case denied
    /// The sign-in expired before it completed (a device code, a browser sign-in nobody finished),
    /// or the session it would extend was refused: sign in again.
    case expired
    /// The server failed or answered something unusable.
    case server
    /// The network failed.
    case network
    /// A login is already in progress.
    case loginInProgress
    /// This version is too old.
    case upgradeRequired(VersionPolicy)
    /// The server's token, or its answer to the browser sign-in, did not verify.
    case tokenVerification
    /// Anything else: the store, a key, no browser, …
    case other

    init(_ error: any Error) {
        switch error {
        case let error as LoginError: self = Self.message(for: error)
        case is ServerError: self = .server
        case is NetworkError: self = .network
        case let error as TokenVerificationError where [.invalidKey, .authenticationFailed, .cryptoFailure].contains(error.code):
            self = .other  // a key that cannot sign, or OpenSSL failing: nothing failed to verify
        case is TokenVerificationError: self = .tokenVerification
        default: self = .other
        }
    }

    /// The message for each `LoginError` code; a code this version does not know is `.other`,
    /// never a wrong password.
    private static func message(for error: LoginError) -> LoginErrorMessage {
        switch error.code {
        case .invalidCredentials: .login
        case .invalidClient, .unauthorizedClient, .invalidScope, .invalidTarget, .invalidConfiguration, .verifierRequired,
            .challengeRequired:
            .configuration
        case .accessDenied: .denied
        case .deviceCodeExpired, .interactionTimedOut, .refreshTokenRejected: .expired
        case .loginInProgress: .loginInProgress
        case .upgradeRequired: error.upgradePolicy.map(LoginErrorMessage.upgradeRequired) ?? .other
        case .stateMismatch, .issuerMismatch: .tokenVerification
        default: .other
        }
    }

    /// A short English sentence for the message.
    public var text: String {
        switch self {
        case .login: "The ID or password is wrong."
        case .configuration: "This app cannot sign in right now. Try again later, or contact the app's support."
        case .denied: "The sign-in was denied."
        case .expired: "The sign-in has expired. Sign in again."
        case .server: "The server is having trouble. Try again later."
        case .network: "Could not reach the server. Check your connection."
        case .loginInProgress: "A login is already in progress."
        case .upgradeRequired(let policy): "\(policy.title): \(policy.message)"
        case .tokenVerification: "The server's answer could not be verified."
        case .other: "Login failed."
        }
    }

    var kind: String {
        switch self {
        case .login: "login"
        case .configuration: "configuration"
        case .denied: "denied"
        case .expired: "expired"
        case .server: "server"
        case .network: "network"
        case .loginInProgress: "loginInProgress"
        case .upgradeRequired: "upgradeRequired"
        case .tokenVerification: "tokenVerification"
        case .other: "other"
        }
    }
}
