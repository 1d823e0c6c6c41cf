#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension AuthService {
    /// Logs in through the system browser: the authorization code flow with PKCE over a loopback
    /// redirect (RFC 8252, RFC 7636), `state`, `nonce` and — when the provider advertises it — the
    /// RFC 9207 `iss` check (``BrowserLogin``).
    ///
    /// One browser login per store at a time, across processes: the login runs holding the
    /// store's interactive-login lock (waiting at most `login.timeout` for one under way). A caller
    /// that waited, and finds credentials another process saved after this call began, returns
    /// that user without opening a browser.
    ///
    /// The user is the ID token's `sub`; without an ID token (OAuth2-only providers), the login
    /// hint, else the client ID.
    ///
    /// - Parameters:
    ///   - login: where to listen, what to ask for, how long to wait (default 180 s).
    ///   - launcher: how to open the browser (default: `$BROWSER`, else `xdg-open`).
    ///   - onEvent: progress; ``BrowserLoginEvent/waitingForBrowser(url:redirectURI:)`` carries
    ///     the URL to show in case the browser does not open. ``events`` reports it too.
    ///   - pastedRedirect: reads a pasted redirect URL when no browser can be opened.
    /// - Throws: `LoginError` (`.loginInProgress`; `.invalidConfiguration` when the API has no
    ///   authorization endpoint; `.stateMismatch` (a pasted redirect of another login), `.issuerMismatch`, `.interactionTimedOut`,
    ///   `.cannotListen`; `.accessDenied`; `.upgradeRequired`), `TokenVerificationError`,
    ///   `ServerError`, `NetworkError`, `TokenStoreError`, `CancellationError` (the listener is closed).
    public func logInWithBrowser(
        _ login: BrowserLogin.Configuration = BrowserLogin.Configuration(),
        launcher: any BrowserLauncher = SystemBrowserLauncher(),
        onEvent: @escaping @Sendable (BrowserLoginEvent) -> Void = { _ in },
        pastedRedirect: BrowserLogin.PasteReader? = nil
    ) async throws -> User {
        guard let api = api as? any AuthorizationCodeAPI else {
            throw LoginError(.invalidConfiguration, "the configured API does not support the authorization code flow (browser login)")
        }
        let epoch = try beginLogin()
        defer { machine.withLock { $0.loginFinished(startedIn: epoch) } }
        let requestStart = clock.now
        try await checkGate()
        try await checkStoreIsUsable()
        return try await store.withInteractiveLogin(for: profileName, timeout: login.timeout) {
            // A login that asks for a stronger or fresher authentication (a step-up: `acr_values`,
            // `max_age`, or a `prompt`) is never met by what another process logged in with.
            let asksForMore = login.authorization.acrValues != nil || login.authorization.maxAge != nil || login.authorization.prompt != nil
            if !asksForMore, let stored = try await store.profile(named: profileName), isIssuedHere(stored.source),
                RefreshDecision.wasIssued(stored, since: requestStart),
                (stored.credentials.expiresAt ?? .distantFuture) > clock.now
            {
                logger.debug("took the login another process completed meanwhile", metadata: logMetadata)
                return User(profile: stored)
            }
            try checkNotOvertaken(startedIn: epoch)
            let broadcaster = eventBroadcaster
            let browserLogin = BrowserLogin(api: api, launcher: launcher, clock: clock, configuration: login)
            let credentials: Credentials
            do {
                credentials = try await browserLogin.run(
                    onEvent: { event in
                        if case .waitingForBrowser(let url, _) = event { broadcaster.emit(.waitingForBrowser(url: url)) }
                        onEvent(event)
                    },
                    pastedRedirect: pastedRedirect)
            } catch let error as LoginError where error.isProviderRejection {
                updateDiagnostics { $0.credentialsRejected = true }
                logger.notice("browser login refused", metadata: logMetadata.merging(["error": "\(error)"]) { $1 })
                throw error
            }
            let fallback = User.ID(rawValue: login.authorization.loginHint ?? api.source.clientID ?? "user")
            var attributes: [String: String] = ["grant": "authorization_code"]
            if let scope = login.authorization.scope ?? credentials.scope { attributes["scope"] = scope }
            return try await saveLogin(credentials, loginID: fallback, attributes: attributes, startedIn: epoch)
        }
    }
}
