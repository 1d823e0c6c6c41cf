public import LoginKit
public import Logging
public import Observation

/// The state of a login screen (or the CLI's login prompt), driven by an injected service.
///
/// `loginButtonPressed()` disables the button for exactly as long as the call runs (`defer`
/// re-enables it); a press while it is disabled does nothing. Errors become a
/// ``LoginErrorMessage`` a view can show, and are logged without secrets. A required upgrade sets
/// ``forcedUpgrade``, which the user cannot clear. Success sets ``user`` and is signalled on
/// ``dismissals``; ``logOutButtonPressed()`` clears ``user``.
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
    @ObservationIgnored private let logger: Logger

    /// A view-model for `service`, logging failures to `logger`.
    public init(service: Service, logger: Logger = Logger(label: "loginkit.login-view-model")) {
        self.service = service
        self.logger = logger
        (dismissals, dismissContinuation) = AsyncStream<User>.makeStream()
    }

    /// Logs in with `id` and `password`. Does nothing while a login runs or an upgrade is forced.
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
            let message = LoginErrorMessage(error)
            if case .upgradeRequired(let policy) = message { forcedUpgrade = policy }
            loginErrorMessage = message
            // The error types carry no secrets; the password and tokens are never logged.
            logger.notice("login failed", metadata: ["reason": "\(message.kind)", "error": "\(String(describing: type(of: error)))"])
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

/// What to tell the user after a failed login.
public enum LoginErrorMessage: Sendable, Hashable {
    /// The provider rejected the ID, the password or the client.
    case login
    /// The server failed or answered something unusable.
    case server
    /// The network failed.
    case network
    /// A login is already in progress.
    case loginInProgress
    /// This version is too old.
    case upgradeRequired(VersionPolicy)
    /// The server's token did not verify.
    case tokenVerification
    /// Anything else: the store, the configuration, a key, …
    case other

    init(_ error: any Error) {
        switch error {
        case let error as LoginError where error.code == .loginInProgress: self = .loginInProgress
        case let error as LoginError where error.code == .upgradeRequired:
            if let policy = error.upgradePolicy {
                self = .upgradeRequired(policy)
            } else {
                self = .other
            }
        case let error as LoginError where error.isProviderRejection: self = .login
        case is ServerError: self = .server
        case is NetworkError: self = .network
        case let error as TokenVerificationError where [.invalidKey, .authenticationFailed, .cryptoFailure].contains(error.code):
            self = .other  // a key that cannot sign, or OpenSSL failing: nothing failed to verify
        case is TokenVerificationError: self = .tokenVerification
        default: self = .other
        }
    }

    /// A short English sentence for the message.
    public var text: String {
        switch self {
        case .login: "The ID or password is wrong."
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
        case .server: "server"
        case .network: "network"
        case .loginInProgress: "loginInProgress"
        case .upgradeRequired: "upgradeRequired"
        case .tokenVerification: "tokenVerification"
        case .other: "other"
        }
    }
}
