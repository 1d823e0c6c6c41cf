import LoginKitHTTP

/// A browser login (authorization code with PKCE over a loopback redirect) failed for a reason of its
/// own: the response did not belong to this login, nobody signed in in time, no browser could be
/// opened, or the redirect could not be received.
///
/// Errors the provider reports keep their usual types: a denial is a `LoginError` (`.accessDenied`),
/// a provider failure a `ServerError`, a wrong ID token `nonce` a `TokenVerificationError`
/// (`.nonceMismatch`). `message` never contains a code, a token, the `state` or the verifier.
public struct BrowserLoginError: Error, Sendable, CustomStringConvertible {
    /// What failed. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case stateMismatch, issuerMismatch, timedOut, browserUnavailable, invalidRedirect, cannotListen
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The response's `state` is not this login's (RFC 6749 §10.12): it belongs to another login,
        /// or someone forged it. The login ended without exchanging anything.
        public static let stateMismatch = Code(.stateMismatch)
        /// The response's `iss` is not the issuer the request went to, or it is missing although the
        /// provider advertises `authorization_response_iss_parameter_supported` (RFC 9207 mix-up defence).
        public static let issuerMismatch = Code(.issuerMismatch)
        /// Nobody completed the sign-in within the configured timeout.
        public static let timedOut = Code(.timedOut)
        /// No browser could be opened (no display, an SSH session, `xdg-open` missing or failing,
        /// every `$BROWSER` command failing). Thrown by launchers; `BrowserLogin` then shows the URL
        /// and accepts a pasted redirect instead of failing.
        public static let browserUnavailable = Code(.browserUnavailable)
        /// A pasted text is not a redirect to this login's redirect URI carrying a sign-in response.
        /// Nothing was checked or sent; paste the whole address again.
        public static let invalidRedirect = Code(.invalidRedirect)
        /// The redirect receiver could not listen (address in use, not an IP address) or failed.
        public static let cannotListen = Code(.cannotListen)

        public var description: String { base.rawValue }
    }

    /// What failed.
    public let code: Code
    /// What failed and what to do next.
    public let message: String
    /// The error underneath, when there is one.
    public let underlying: (any Error)?
    /// Where the error was thrown.
    public let file: String
    /// Where the error was thrown.
    public let line: Int

    /// A browser-login failure; `message` is kept to one line with control characters escaped,
    /// whatever was interpolated into it (a provider's error description, a pasted address).
    public init(_ code: Code, _ message: String, underlying: (any Error)? = nil, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.message = escapingControlCharacters(message)  // one line, whatever was interpolated
        self.underlying = underlying
        self.file = file
        self.line = line
    }

    /// Whether the response was refused as not belonging to this login (`state` or `iss`): a forgery,
    /// a mix-up or a stale browser tab. Hosts report these apart from ordinary failures.
    public var isForgedResponse: Bool { code == .stateMismatch || code == .issuerMismatch }

    public var description: String { "BrowserLoginError(\(code)): \(message)" }
}
