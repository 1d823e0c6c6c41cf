public import LoginKitHTTP

/// The login or the request cannot succeed as attempted, and trying the same thing again will not
/// help: the provider rejected the credentials or the client (a wrong password, a refresh token it
/// no longer accepts, a denied sign-in); the client's or the app's configuration cannot work; a
/// login is already in progress; a browser login failed (nobody signed in in time, no browser could
/// be opened, a response that does not belong to this login); or this app is below the minimum
/// version its provider supports.
///
/// ``isProviderRejection`` tells the provider's refusals from LoginKit's own; ``isForgedResponse``
/// picks out browser responses that did not belong to the login; ``upgradePolicy`` holds what to
/// show the user when an upgrade is required. `message` never contains the password, a token, an
/// authorization code or the PKCE verifier.
public struct LoginError: LoginKitError {
    /// Why. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case invalidCredentials, refreshTokenRejected, accessDenied, deviceCodeExpired, invalidClient
            case unauthorizedClient, invalidScope, challengeRequired, invalidTarget, subjectTokenRejected
            case invalidConfiguration, verifierRequired, loginInProgress, upgradeRequired
            case stateMismatch, issuerMismatch, interactionTimedOut, browserUnavailable, invalidRedirect, cannotListen
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// Wrong user ID or password (`invalid_grant` on a password grant, `NotAuthorizedException`).
        public static let invalidCredentials = Code(.invalidCredentials)
        /// The refresh token was rejected (`invalid_grant` on a refresh).
        public static let refreshTokenRejected = Code(.refreshTokenRejected)
        /// The user denied the request: a device request, or the sign-in in the browser (`access_denied`).
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
        /// The configuration cannot work as given: a value missing or in the wrong format (a URL
        /// that is not absolute http(s), a Cognito region that is not an AWS region, a version that
        /// is not a semantic version), or the configured API cannot do what was asked (a device
        /// login with an API that has no device flow). Nothing was sent; `message` names the setting.
        public static let invalidConfiguration = Code(.invalidConfiguration)
        /// ID tokens would be accepted without verification: no verifier is configured and the
        /// configuration does not explicitly opt out of verifying. Nothing was sent.
        public static let verifierRequired = Code(.verifierRequired)
        /// Another login, or a logout, is under way; nothing was sent. Wait for its outcome.
        public static let loginInProgress = Code(.loginInProgress)
        /// This app is below the minimum version the provider's policy allows: logins and
        /// refreshes are refused until it is upgraded. ``LoginError/upgradePolicy`` says what to show.
        public static let upgradeRequired = Code(.upgradeRequired)
        /// A pasted sign-in redirect's `state` is not this login's (RFC 6749 §10.12): it belongs to
        /// another login, or someone forged it. Nothing was exchanged. (A request to the loopback
        /// receiver without this login's `state` ends nothing: it is refused and the login waits.)
        public static let stateMismatch = Code(.stateMismatch)
        /// A browser sign-in response's `iss` is not the issuer the request went to, or it is
        /// missing although the provider advertises `authorization_response_iss_parameter_supported`
        /// (RFC 9207 mix-up defence).
        public static let issuerMismatch = Code(.issuerMismatch)
        /// Nobody completed the browser sign-in within the configured timeout.
        public static let interactionTimedOut = Code(.interactionTimedOut)
        /// No browser could be opened (no display, an SSH session, `xdg-open` missing or failing,
        /// every `$BROWSER` command failing). Thrown by launchers; `BrowserLogin` then shows the URL
        /// and accepts a pasted redirect instead of failing.
        public static let browserUnavailable = Code(.browserUnavailable)
        /// A pasted text is not a redirect to this login's redirect URI carrying a sign-in response.
        /// Nothing was checked or sent; paste the whole address again.
        public static let invalidRedirect = Code(.invalidRedirect)
        /// The browser login's redirect receiver could not listen (address in use, not an IP
        /// address) or failed.
        public static let cannotListen = Code(.cannotListen)

        /// Whether the provider gave this answer (the codes up to ``subjectTokenRejected``), rather
        /// than LoginKit refusing on its own.
        fileprivate var isProviderRejection: Bool {
            switch base {
            case .invalidCredentials, .refreshTokenRejected, .accessDenied, .deviceCodeExpired, .invalidClient,
                .unauthorizedClient, .invalidScope, .challengeRequired, .invalidTarget, .subjectTokenRejected:
                true
            case .invalidConfiguration, .verifierRequired, .loginInProgress, .upgradeRequired,
                .stateMismatch, .issuerMismatch, .interactionTimedOut, .browserUnavailable, .invalidRedirect, .cannotListen:
                false
            }
        }

        public var description: String { base.rawValue }
    }

    /// Why, what to do next, the error underneath and where it was thrown.
    public let details: ErrorDetails<Code>
    /// The provider's own error code (`invalid_grant`, `NotAuthorizedException`, …), when it sent one.
    public let providerError: String?
    /// For `.upgradeRequired` from the version gate: the policy in force — the title, message and
    /// URL to show the user.
    public let upgradePolicy: VersionPolicy?
    /// For `.upgradeRequired` from the version gate: this app's version.
    public let currentVersion: SemanticVersion?

    /// A login error: `code` says why, `message` what to do next (never the password or a token;
    /// kept to one line with control characters escaped, whatever was interpolated into it), and
    /// `providerError` keeps the provider's own code for logs and support.
    public init(
        _ code: Code, _ message: String, providerError: String? = nil, underlying: (any Error)? = nil,
        file: String = #fileID, line: Int = #line
    ) {
        self.details = ErrorDetails(code, message, underlying: underlying, file: file, line: line)
        self.providerError = providerError
        self.upgradePolicy = nil
        self.currentVersion = nil
    }

    /// The refusal (`.upgradeRequired`) of an app at `currentVersion`, below `policy`'s minimum.
    public init(
        upgradeRequiredBy policy: VersionPolicy, currentVersion: SemanticVersion, underlying: (any Error)? = nil,
        file: String = #fileID, line: Int = #line
    ) {
        let message = "version \(currentVersion) is below the minimum \(policy.version)\(policy.url.map { "; get it at \($0)" } ?? "")"
        self.details = ErrorDetails(.upgradeRequired, message, underlying: underlying, file: file, line: line)
        self.providerError = nil
        self.upgradePolicy = policy
        self.currentVersion = currentVersion
    }

    /// Whether the provider refused (the credentials, the client, the scope, the target, the
    /// user's consent), rather than LoginKit itself (its configuration, a login in progress, a
    /// browser login, the version gate).
    public var isProviderRejection: Bool { code.isProviderRejection }

    /// Whether a browser sign-in response was refused as not belonging to this login (`state` or
    /// `iss`): a forgery, a mix-up or a stale browser tab. Hosts report these apart from ordinary
    /// failures.
    public var isForgedResponse: Bool { code == .stateMismatch || code == .issuerMismatch }
}

/// The server failed or answered something LoginKit cannot use: 5xx, 429, an HTML error page, a
/// malformed or truncated body, a protocol error, provider metadata that does not fit the
/// configuration. ``isTransient`` says whether trying again later may help.
public struct ServerError: LoginKitError {
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
        /// caller's own settings is a `LoginError` `.invalidConfiguration` instead.
        public static let misconfigured = Code(.misconfigured)

        public var description: String { base.rawValue }
    }

    /// What went wrong, what to do next, the error underneath and where it was thrown; never a
    /// token or a body that may hold one.
    public let details: ErrorDetails<Code>
    /// The HTTP status, when there was a response.
    public let status: Int?
    /// The provider's error code, when it sent one.
    public let providerError: String?
    /// How long the server asked to wait (`Retry-After`), for `.rateLimited` and `.unavailable`.
    public let retryAfter: Duration?

    /// A server failure: `code` says what kind (`isTransient` follows from it), `message` what
    /// failed; `status`, `providerError` and `retryAfter` carry what the response said, when it said it.
    public init(
        _ code: Code, _ message: String, status: Int? = nil, providerError: String? = nil, retryAfter: Duration? = nil,
        underlying: (any Error)? = nil, file: String = #fileID, line: Int = #line
    ) {
        self.details = ErrorDetails(code, message, underlying: underlying, file: file, line: line)
        self.status = status
        self.providerError = providerError
        self.retryAfter = retryAfter
    }

    /// Whether trying again later may succeed (5xx, 429).
    public var isTransient: Bool { code == .unavailable || code == .rateLimited }
}

/// There are no usable credentials: never logged in, logged out, the refresh token was rejected,
/// or the stored profile belongs to another provider; or a resource server asked for stronger or
/// more recent authentication than the login gave (``Code/stepUpRequired``, with ``acrValues`` and
/// ``maxAge``). The host should ask the user to log in.
public struct LoginRequiredError: LoginKitError {
    /// Why a login is needed. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case notLoggedIn, credentialsRejected, cannotRefresh, noIDToken, noAccessToken, loggedOut, sourceMismatch
            case stepUpRequired
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
        /// A resource server refused the access token because the login behind it was not strong
        /// or recent enough (RFC 9470 `insufficient_user_authentication`). Log in again asking
        /// for what ``LoginRequiredError/acrValues`` and ``LoginRequiredError/maxAge`` say; the
        /// stored credentials were left as they are.
        public static let stepUpRequired = Code(.stepUpRequired)

        public var description: String { base.rawValue }
    }

    /// Why, what to do, the error underneath and where it was thrown.
    public let details: ErrorDetails<Code>
    /// The profile concerned; `nil` where it is not known (the API layer).
    public let profile: String?
    /// For ``Code/stepUpRequired``: the authentication context classes the resource server asked
    /// for (RFC 9470 `acr_values`, space-separated, most preferred first), exactly as it sent
    /// them; `nil` when it named none. Pass them to the next login's authorization request.
    public let acrValues: String?
    /// For ``Code/stepUpRequired``: the most seconds since the user last authenticated that the
    /// resource server accepts (RFC 9470 `max_age`); `nil` when it named no limit (or not a
    /// non-negative integer). Pass it to the next login's authorization request.
    public let maxAge: Int?

    /// A login-required error: `code` says why, `message` what to do next; for
    /// ``Code/stepUpRequired``, `acrValues` and `maxAge` say what the resource server asked for.
    public init(
        _ code: Code, profile: String?, _ message: String, underlying: (any Error)? = nil,
        acrValues: String? = nil, maxAge: Int? = nil, file: String = #fileID, line: Int = #line
    ) {
        self.details = ErrorDetails(code, message, underlying: underlying, file: file, line: line)
        self.profile = profile
        self.acrValues = acrValues
        self.maxAge = maxAge
    }
}

extension LoginRequiredError {
    /// ``Code/stepUpRequired`` for what a resource server asked (`acrValues`, `maxAge`, either may
    /// be `nil`), with a message that names it: the server's values escaped and cut short, since
    /// the server chose them.
    package static func stepUpRequired(
        profile: String?, acrValues: String?, maxAge: Int?, file: String = #fileID, line: Int = #line
    ) -> LoginRequiredError {
        var asked: [String] = []
        if let acrValues { asked.append("acr_values \"\(printableExcerpt(acrValues, limit: 200))\"") }
        if let maxAge { asked.append("max_age \(maxAge)") }
        let message =
            asked.isEmpty
            ? "the resource server requires stronger or more recent authentication; log in again"
            : "the resource server requires stronger authentication (\(asked.joined(separator: ", "))); log in again with those"
        return LoginRequiredError(.stepUpRequired, profile: profile, message, acrValues: acrValues, maxAge: maxAge, file: file, line: line)
    }
}
