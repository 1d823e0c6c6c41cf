import LoginKitHTTP

/// A browser login: the authorization code flow with PKCE over a loopback redirect (RFC 8252), as
/// `gh auth login` and kubelogin do it. `AuthService/logInWithBrowser(_:launcher:onEvent:pastedRedirect:)`
/// runs it with a ``Configuration``.
///
/// A login binds the redirect receiver on `127.0.0.1` (an ephemeral port unless
/// ``Configuration/listenAddresses`` says otherwise), builds a fresh request (new PKCE verifier,
/// `state`, `nonce`), opens the browser through the launcher, and waits — at most
/// ``Configuration/timeout`` on the service's clock — for the redirect. A request without this
/// login's `state` is not its response: it gets an error page and the wait goes on, so that nobody
/// who can reach the port can end the login. The response must also carry, where the provider
/// promises it, this login's `iss` (else the login ends); only then is the code exchanged (with the
/// verifier) and the ID token's `nonce` checked. The receiver is closed as soon as the wait ends,
/// however it ends. When no browser can be opened, the URL goes out in an event and a pasted
/// redirect URL (``PasteReader``) is accepted, checked exactly as the receiver checks a callback.
///
/// Concurrency contract: `Sendable`; each run is one independent login. Cancelling the task stops
/// the receiver (the port is free when the login returns), the timeout and the launcher. The
/// launcher is cancelled whenever the login ends and awaited before `run` returns, so what it keeps
/// for the browser (``SystemBrowserLauncher``'s page) is gone by then.
public struct BrowserLogin: Sendable {
    /// Where to listen, what to ask for, how long to wait.
    public struct Configuration: Sendable {
        /// What the authorization request asks for (scope, `login_hint`, `prompt`, …).
        public var authorization = AuthorizationOptions()
        /// Where the receiver may listen, tried in order; empty (the default): `127.0.0.1`, any free port.
        public var listenAddresses: [ListenAddress] = []
        /// Whether an address that is not loopback may be bound. Default `false`.
        public var allowsNonLoopbackListener = false
        /// The redirect URI sent; `nil` (the default): `http://127.0.0.1:PORT/callback` for the bound
        /// address. When set, it is sent as given and the receiver answers on its path.
        public var redirectURI: String?
        /// How long to wait for the redirect. Default 180 s.
        public var timeout: Duration = .seconds(180)

        /// The defaults: the API's scope, `127.0.0.1` on any free port with its `/callback` as the
        /// redirect URI, 180 s to wait.
        public init() {}
    }

    /// Reads a redirect URL the user pasted, given the authorization URL to show; `nil` when there
    /// will be none (end of input). Called again after a text that is not a redirect for this login.
    /// It must return promptly when its task is cancelled.
    public typealias PasteReader = @Sendable (_ authorizationURL: String) async throws -> String?

    /// The API that builds the request and exchanges the code.
    package let api: any AuthorizationCodeAPI
    /// What opens the browser.
    package let launcher: any BrowserLauncher
    /// The clock the timeout runs on.
    package let clock: any AuthClock
    /// Where to listen, what to ask for, how long to wait.
    package let configuration: Configuration

    /// A browser login through `api`, opening the browser with `launcher`, timed on `clock`.
    package init(
        api: any AuthorizationCodeAPI, launcher: any BrowserLauncher = SystemBrowserLauncher(),
        clock: any AuthClock = SystemClock(),
        configuration: Configuration = Configuration()
    ) {
        self.api = api
        self.launcher = launcher
        self.clock = clock
        self.configuration = configuration
    }

    /// Runs the login and returns the credentials, which it does not save.
    ///
    /// A request to the redirect URI without this login's `state` is answered with an error page and
    /// ignored (``BrowserLoginEvent/foreignResponseRefused``): the login goes on waiting for its own.
    ///
    /// - Parameters:
    ///   - onEvent: progress; ``BrowserLoginEvent/waitingForBrowser(url:redirectURI:)``
    ///     carries the URL to show ("If the browser does not open, visit: …"). Called from the
    ///     login's tasks, possibly two at once (a refused response while a paste is read).
    ///   - pastedRedirect: how to read a pasted redirect URL when no browser could be opened; `nil`
    ///     to wait for the receiver only.
    /// - Throws: `LoginError` (`.stateMismatch` for a pasted redirect, `.issuerMismatch`, `.interactionTimedOut`,
    ///   `.cannotListen`, `.invalidConfiguration`; `.accessDenied` when the user denied),
    ///   `TokenVerificationError` (an ID token that does not verify or carries another `nonce`),
    ///   `ServerError`, `NetworkError`, `CancellationError`.
    package func run(
        onEvent: @escaping @Sendable (BrowserLoginEvent) -> Void = { _ in },
        pastedRedirect: PasteReader? = nil
    ) async throws -> Credentials {
        let receiver = try LoopbackReceiver(
            addresses: configuration.listenAddresses, allowsNonLoopback: configuration.allowsNonLoopbackListener)
        defer { receiver.close() }
        let redirectURI = configuration.redirectURI ?? receiver.defaultRedirectURI
        guard let redirect = URLParts(redirectURI) else {
            throw LoginError(
                .invalidConfiguration,
                "the redirect URI \"\(printableExcerpt(redirectURI, limit: 200))\" is not an absolute http(s) URL")
        }
        let path = String(
            redirect.pathAndQuery.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? "/")
        let request = try await api.authorizationRequest(redirectURI: redirectURI, options: configuration.authorization)
        // The receiver's thread never waits for the host: a refused response is only noted here, and
        // reported from the login's own task. Refusals that come faster than they are reported
        // count as one.
        let (refusals, refusal) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        defer { refusal.finish() }
        // Serving from now on, on the receiver's own thread: not when a task gets to run.
        try receiver.start(path: path) { query in
            let outcome = request.outcome(ofCallbackQuery: query)
            if case .foreign = outcome { refusal.yield() }
            return CallbackPage.reply(for: outcome)
        }
        onEvent(.waitingForBrowser(url: request.url, redirectURI: redirectURI))

        let code = try await withThrowingTaskGroup(of: String?.self, returning: String.self) { group in
            group.addTask {
                try await receiver.result()
            }
            group.addTask {
                for await _ in refusals { onEvent(.foreignResponseRefused) }
                return nil
            }
            group.addTask {
                try await clock.sleep(for: configuration.timeout)
                throw LoginError(
                    .interactionTimedOut, "no browser sign-in within \(configuration.timeout.components.seconds) s")
            }
            group.addTask {
                try await openBrowser(for: request, onEvent: onEvent, pastedRedirect: pastedRedirect)
            }
            defer { group.cancelAll() }
            while let next = try await group.next() {
                if let code = next { return code }
            }
            throw CancellationError()  // not reached: the receiver returns a code or throws
        }
        receiver.close()
        onEvent(.exchangingCode)
        return try await api.exchangeCode(code, for: request)
    }

    /// Opens the browser; when none can be opened, reports it and reads pasted redirects until one is
    /// this login's (its code) or there are no more (`nil`: the receiver may still get the redirect).
    private func openBrowser(
        for request: AuthorizationRequest, onEvent: @Sendable (BrowserLoginEvent) -> Void, pastedRedirect: PasteReader?
    ) async throws -> String? {
        do {
            try await launcher.open(request.url)
            return nil
        } catch let error as LoginError where error.code == .browserUnavailable {
            onEvent(.browserUnavailable(url: request.url, reason: error.message))
        }
        guard let pastedRedirect else { return nil }
        while true {
            guard let text = try await pastedRedirect(request.url) else { return nil }
            do {
                return try PastedRedirect.authorizationCode(from: text, for: request)
            } catch let error as LoginError where error.code == .invalidRedirect {
                onEvent(.pastedRedirectRejected(reason: error.message))
            }
        }
    }
}

/// What a browser login is doing, for a host to show.
public enum BrowserLoginEvent: Sendable, Hashable {
    /// The receiver listens and the browser is being opened with `url`. Show the URL in case the
    /// browser does not open.
    case waitingForBrowser(url: String, redirectURI: String)
    /// No browser could be opened (`reason`): show `url` to open elsewhere; a pasted redirect URL is
    /// accepted when the caller gave a way to read one, and the receiver keeps listening.
    case browserUnavailable(url: String, reason: String)
    /// A pasted text was not a redirect for this login (`reason`); the next paste is read.
    case pastedRedirectRejected(reason: String)
    /// A request to the redirect URI did not carry this login's `state` — another sign-in's response,
    /// or one sent by another program or a web page — so it was answered with an error page and
    /// ignored; the login keeps waiting. Several such requests in quick succession may be reported
    /// once. Tell the user: someone may be trying to sign them in to an account not theirs.
    case foreignResponseRefused
    /// The redirect arrived and passed its checks; the code is being exchanged.
    case exchangingCode
}
