/// The server rejected the credentials: wrong password, a refresh token it no longer accepts, a
/// denied device request, a misconfigured client. Retrying the same request will not help.
public struct LoginError: Error, Sendable, CustomStringConvertible {
    /// Why. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case invalidCredentials, refreshTokenRejected, accessDenied, deviceCodeExpired, invalidClient
            case unauthorizedClient, invalidScope, challengeRequired, invalidTarget, subjectTokenRejected
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// Wrong user ID or password (`invalid_grant` on a password grant, `NotAuthorizedException`).
        public static let invalidCredentials = Code(.invalidCredentials)
        /// The refresh token was rejected (`invalid_grant` on a refresh).
        public static let refreshTokenRejected = Code(.refreshTokenRejected)
        /// The user denied the device request (`access_denied`).
        public static let accessDenied = Code(.accessDenied)
        /// The device code expired before the user approved it (`expired_token`).
        public static let deviceCodeExpired = Code(.deviceCodeExpired)
        /// The client ID or secret is wrong (`invalid_client`).
        public static let invalidClient = Code(.invalidClient)
        /// The client may not use this grant (`unauthorized_client`).
        public static let unauthorizedClient = Code(.unauthorizedClient)
        /// The scope was refused (`invalid_scope`).
        public static let invalidScope = Code(.invalidScope)
        /// The provider wants an extra step LoginKit does not perform (a Cognito challenge).
        public static let challengeRequired = Code(.challengeRequired)
        /// The resource or audience asked for is unknown or not allowed for this client
        /// (`invalid_target`, RFC 8707 §2, RFC 8693 §2.2.2).
        public static let invalidTarget = Code(.invalidTarget)
        /// A token exchange's subject or actor token was refused (`invalid_grant` on RFC 8693's
        /// token exchange): expired, revoked, or not one the provider accepts.
        public static let subjectTokenRejected = Code(.subjectTokenRejected)

        public var description: String { base.rawValue }
    }

    /// Why the credentials were rejected.
    public let code: Code
    /// What failed and what to do; never the password or a token.
    public let message: String
    /// The provider's own error code (`invalid_grant`, `NotAuthorizedException`, …), when it sent one.
    public let providerError: String?
    /// The error underneath, when there is one.
    public let underlying: (any Error)?
    /// Where the error was thrown.
    public let file: String
    /// Where the error was thrown.
    public let line: Int

    /// A rejection: `code` says why, `message` what to do next (never the password or a token), and
    /// `providerError` keeps the provider's own code for logs and support.
    public init(
        _ code: Code, _ message: String, providerError: String? = nil, underlying: (any Error)? = nil,
        file: String = #fileID, line: Int = #line
    ) {
        self.code = code
        self.message = message
        self.providerError = providerError
        self.underlying = underlying
        self.file = file
        self.line = line
    }

    public var description: String { "LoginError(\(code)): \(message)" }
}

/// The server failed or answered something LoginKit cannot use: 5xx, 429, an HTML error page, a
/// malformed or truncated body, a protocol error.
public struct ServerError: Error, Sendable, CustomStringConvertible {
    /// What went wrong. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case unavailable, rateLimited, malformedResponse, unexpectedStatus, protocolError, misconfigured
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// 5xx: try again later.
        public static let unavailable = Code(.unavailable)
        /// 429: try again after `retryAfter`.
        public static let rateLimited = Code(.rateLimited)
        /// The body is not the JSON expected (HTML page, truncated, wrong shape).
        public static let malformedResponse = Code(.malformedResponse)
        /// A status the protocol does not allow here.
        public static let unexpectedStatus = Code(.unexpectedStatus)
        /// The server reported a protocol error (`invalid_request`, `unsupported_grant_type`, …).
        public static let protocolError = Code(.protocolError)
        /// The provider's metadata is unusable or does not fit the configuration: an issuer mismatch,
        /// no endpoint advertised, an advertised URL that is not absolute http(s). A fault in the
        /// caller's own settings is a `ConfigurationError` instead.
        public static let misconfigured = Code(.misconfigured)

        public var description: String { base.rawValue }
    }

    /// What went wrong.
    public let code: Code
    /// What failed and what to do; never a token or a body that may hold one.
    public let message: String
    /// The HTTP status, when there was a response.
    public let status: Int?
    /// The provider's error code, when it sent one.
    public let providerError: String?
    /// How long the server asked to wait (`Retry-After`), for `.rateLimited` and `.unavailable`.
    public let retryAfter: Duration?
    /// The error underneath, when there is one.
    public let underlying: (any Error)?
    /// Where the error was thrown.
    public let file: String
    /// Where the error was thrown.
    public let line: Int

    /// A server failure: `code` says what kind (`isTransient` follows from it), `message` what
    /// failed; `status`, `providerError` and `retryAfter` carry what the response said, when it said it.
    public init(
        _ code: Code, _ message: String, status: Int? = nil, providerError: String? = nil, retryAfter: Duration? = nil,
        underlying: (any Error)? = nil, file: String = #fileID, line: Int = #line
    ) {
        self.code = code
        self.message = message
        self.status = status
        self.providerError = providerError
        self.retryAfter = retryAfter
        self.underlying = underlying
        self.file = file
        self.line = line
    }

    /// Whether trying again later may succeed (5xx, 429).
    public var isTransient: Bool { code == .unavailable || code == .rateLimited }

    public var description: String { "ServerError(\(code)): \(message)" }
}

/// There are no usable credentials: never logged in, logged out, the refresh token was rejected,
/// or the stored profile belongs to another provider. The host should ask the user to log in.
public struct LoginRequiredError: Error, Sendable, CustomStringConvertible {
    /// Why a login is needed. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case notLoggedIn, credentialsRejected, cannotRefresh, noIDToken, noAccessToken, loggedOut, sourceMismatch
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// No profile is stored.
        public static let notLoggedIn = Code(.notLoggedIn)
        /// The provider rejected the refresh token; the profile was cleared.
        public static let credentialsRejected = Code(.credentialsRejected)
        /// The credentials expired and cannot be refreshed (no refresh token, or the API cannot refresh).
        public static let cannotRefresh = Code(.cannotRefresh)
        /// The profile has no ID token (the provider issued none); use the access token instead.
        public static let noIDToken = Code(.noIDToken)
        /// The profile has no access token (the provider issued none).
        public static let noAccessToken = Code(.noAccessToken)
        /// A logout began while the call was under way; nothing from before it is handed out.
        public static let loggedOut = Code(.loggedOut)
        /// The stored profile was issued by another provider or client than the service is
        /// configured for; nothing was sent to either (its refresh token stays with its issuer).
        public static let sourceMismatch = Code(.sourceMismatch)

        public var description: String { base.rawValue }
    }

    /// Why.
    public let code: Code
    /// The profile concerned; `nil` where it is not known (the API layer).
    public let profile: String?
    /// What to do.
    public let message: String
    /// The error underneath, when there is one.
    public let underlying: (any Error)?
    /// Where the error was thrown.
    public let file: String
    /// Where the error was thrown.
    public let line: Int

    /// A login-required error: `code` says why, `message` what to do next.
    public init(
        _ code: Code, profile: String?, _ message: String, underlying: (any Error)? = nil,
        file: String = #fileID, line: Int = #line
    ) {
        self.code = code
        self.profile = profile
        self.message = message
        self.underlying = underlying
        self.file = file
        self.line = line
    }

    public var description: String { "LoginRequiredError(\(code)): \(message)" }
}

/// A login was started while another one is still in flight; nothing was sent.
public struct LoginInProgressError: Error, Sendable, CustomStringConvertible {
    /// The error underneath, when there is one (`AuthService` sets none).
    public let underlying: (any Error)?
    /// Where the error was thrown.
    public let file: String
    /// Where the error was thrown.
    public let line: Int

    /// The refusal of a second login while one is in flight; wait for the first one's outcome.
    public init(underlying: (any Error)? = nil, file: String = #fileID, line: Int = #line) {
        self.underlying = underlying
        self.file = file
        self.line = line
    }

    public var description: String { "LoginInProgressError: a login is already in progress" }
}
