#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import Logging

/// Logs in, hands out valid tokens to any number of concurrent callers, and refreshes them exactly
/// once when due — in this process and, through the store's lock, across processes.
///
/// - ``logIn(for:with:)``: a second call while one is in flight fails at once with
///   `LoginInProgressError` and sends nothing. Credentials are saved, then ``events`` reports the
///   login, then the call returns. A password is never retried.
/// - ``validCredentials(minimumValidity:)``, ``validIDToken()``, ``validAccessToken()``: the stored
///   credentials while they stay valid; in the advisory window (default: the last 5 minutes) a
///   background refresh starts and the current token is served; in the mandatory window (the last
///   60 s, or less than `minimumValidity` left) callers wait for the one shared refresh. See
///   docs/architecture.md for the refresh protocol (lock, re-read, rotation, retries).
/// - ``session(goal:)``: proactive refresh while any session is held, with ``AuthDiagnostics``.
///
/// Concurrency contract: an actor; all state that guards re-entrancy is set before the first `await`.
public actor AuthService: AuthServiceProtocol {
    /// Windows, retries and timeouts.
    public struct Configuration: Sendable {
        /// Before expiry, a refresh starts in the background while the current token is served.
        /// Default 5 minutes.
        public var advisoryWindow: Duration = .seconds(300)
        /// Before expiry, callers wait for the refresh. Default 60 s.
        public var mandatoryWindow: Duration = .seconds(60)
        /// Retries of a transient refresh failure (network, 5xx, 429). Default 3.
        public var maximumRetries = 3
        /// The first backoff; it doubles per retry, with full jitter, up to `maximumBackoff`. Default 1 s.
        public var initialBackoff: Duration = .seconds(1)
        /// The longest single wait, `Retry-After` included. Default 30 s.
        public var maximumBackoff: Duration = .seconds(30)
        /// The shared refresh's own deadline, retries included. Default 60 s.
        public var refreshTimeout: Duration = .seconds(60)
        /// How long logout waits for revocation before deleting the profile anyway. Default 5 s.
        public var revocationTimeout: Duration = .seconds(5)
        /// Where logins, refreshes and logouts are logged (debug: each step and outcome; notice:
        /// rejected credentials; warning and error: failures). Never a password, token or secret — only user IDs, error kinds and
        /// the errors' own descriptions, which hold none. Default: `loginkit.auth`.
        public var logger = Logger(label: "loginkit.auth")

        /// A `Configuration` with the defaults documented on each property.
        public init() {}
    }

    /// The API.
    public nonisolated let api: any AuthAPI
    /// The store.
    public nonisolated let store: any TokenStore
    /// The profile this service manages.
    public nonisolated let profileName: String
    /// The configuration.
    public nonisolated let configuration: Configuration
    nonisolated let clock: any AuthClock
    nonisolated var logger: Logger { configuration.logger }
    /// Interactive steps (device-code prompts) run one at a time through this queue.
    public nonisolated let workflows: AuthWorkflowQueue
    nonisolated let eventBroadcaster = Broadcaster<AuthEvent>()
    nonisolated let diagnosticsBroadcaster = Broadcaster<AuthDiagnostics>()
    /// Checked before every login and refresh, when set (see `VersionGate`).
    nonisolated let gate: (any AuthGate)?

    var isLoggingIn = false
    var refreshInFlight: SharedRefresh?
    var diagnostics = AuthDiagnostics()
    var sessionGoals: [UInt64: AuthSession.Goal] = [:]
    var nextSessionID: UInt64 = 0
    var proactiveRefresh: Task<Void, Never>?
    /// The profile as last read or written, served while the store is `.unavailable` and its
    /// credentials stay fresh.
    var lastKnownProfile: StoredProfile?

    /// A service for `profile` in `store`, logging in and refreshing through `api`.
    public init(
        api: any AuthAPI,
        store: any TokenStore,
        profile: String = "default",
        clock: any AuthClock = SystemClock(),
        configuration: Configuration = Configuration(),
        workflows: AuthWorkflowQueue = AuthWorkflowQueue(),
        gate: (any AuthGate)? = nil
    ) {
        self.api = api
        self.store = store
        self.profileName = profile
        self.clock = clock
        self.configuration = configuration
        self.workflows = workflows
        self.gate = gate
    }

    /// Every event from now on, for as long as the stream is kept. Any number of subscribers.
    public nonisolated var events: AsyncStream<AuthEvent> {
        eventBroadcaster.subscribe()
    }

    // MARK: Login and logout

    public func logIn(for id: User.ID, with password: String) async throws -> User {
        guard !isLoggingIn else {
            logger.debug("login refused: another login is in progress", metadata: ["profile": "\(profileName)"])
            throw LoginInProgressError()
        }
        isLoggingIn = true
        defer { isLoggingIn = false }
        logger.debug("login started", metadata: ["profile": "\(profileName)", "user": "\(id.rawValue)"])
        try await checkGate()
        let credentials: Credentials
        do {
            credentials = try await api.logIn(for: id, with: password)
        } catch let error as LoginError {
            updateDiagnostics { $0.credentialsRejected = true }
            logger.notice("login rejected", metadata: ["profile": "\(profileName)", "error": "\(error)"])
            throw error
        } catch {
            logger.warning("login failed", metadata: ["profile": "\(profileName)", "error": "\(error)"])
            throw error
        }
        return try await saveLogin(credentials, fallbackID: id)
    }

    /// Logs in with the device authorization grant (RFC 8628): `prompt` shows the user code and
    /// URI; the service then polls at the provider's interval (+5 s on `slow_down`) until approval,
    /// denial or expiry. Runs through ``workflows``, so prompts never interleave; when the step's
    /// turn comes and valid credentials already exist, it returns that user without prompting.
    public func logInWithDevice(scope: String? = nil, prompt: @escaping @Sendable (DeviceAuthorization) async -> Void) async throws -> User {
        guard let api = api as? any DeviceAuthorizationAPI else {
            throw ServerError(.misconfigured, "this API does not support the device authorization grant")
        }
        let result = try await workflows.run(
            isNeeded: { await self.currentUser() == nil },
            perform: { try await self.runDeviceLogin(api: api, scope: scope, prompt: prompt) }
        )
        if let result { return result }
        guard let user = await currentUser() else { throw LoginRequiredError(.notLoggedIn, profile: profileName, "log in") }
        return user
    }

    private func runDeviceLogin(api: any DeviceAuthorizationAPI, scope: String?, prompt: @Sendable (DeviceAuthorization) async -> Void) async throws -> User {
        guard !isLoggingIn else { throw LoginInProgressError() }
        isLoggingIn = true
        defer { isLoggingIn = false }
        try await checkGate()
        let authorization = try await api.startDeviceAuthorization(scope: scope)
        await prompt(authorization)
        var interval = authorization.interval
        while true {
            try await clock.sleep(for: interval)
            guard clock.now < authorization.expiresAt else {
                throw LoginError(.deviceCodeExpired, "the device code expired before it was approved; start again")
            }
            switch try await api.pollDeviceAuthorization(authorization) {
            case .pending: continue
            case .slowDown: interval += .seconds(5)
            case .authorized(let credentials):
                return try await saveLogin(credentials, fallbackID: User.ID(rawValue: authorization.userCode))
            }
        }
    }

    /// Logs the client itself in (client credentials grant), for services.
    public func logInAsClient(scope: String? = nil) async throws {
        guard let api = api as? any ClientCredentialsAPI else {
            throw ServerError(.misconfigured, "this API does not support the client credentials grant")
        }
        guard !isLoggingIn else { throw LoginInProgressError() }
        isLoggingIn = true
        defer { isLoggingIn = false }
        try await checkGate()
        let credentials = try await api.clientCredentials(scope: scope)
        var profile = StoredProfile(credentials: credentials, source: api.source, updatedAt: clock.now)
        profile.attributes["grant"] = "client_credentials"
        if let scope { profile.attributes["scope"] = scope }
        try await store.save(profile, as: profileName)
        lastKnownProfile = profile
        updateDiagnostics { $0 = AuthDiagnostics() }
    }

    private func saveLogin(_ credentials: Credentials, fallbackID: User.ID) async throws -> User {
        let user = User(credentials: credentials, fallbackID: fallbackID)
        let profile = StoredProfile(credentials: credentials, source: api.source, userID: user.id.rawValue, updatedAt: clock.now)
        try await store.save(profile, as: profileName)
        lastKnownProfile = profile
        updateDiagnostics { $0 = AuthDiagnostics() }
        logger.debug("logged in", metadata: ["profile": "\(profileName)", "user": "\(user.id.rawValue)", "idToken": "\(credentials.idToken != nil)"])
        eventBroadcaster.emit(.loggedIn(user))
        restartProactiveRefresh()
        return user
    }

    public func logOut() async {
        let profile = try? await store.profile(named: profileName)
        if let credentials = profile?.credentials {
            let api = self.api
            let clock = self.clock
            let timeout = configuration.revocationTimeout
            // Best effort and bounded: a provider that hangs does not keep the user logged in.
            await withTaskGroup(of: Void.self) { group in
                group.addTask { try? await api.revoke(credentials) }
                group.addTask { try? await clock.sleep(for: timeout) }
                await group.next()
                group.cancelAll()
            }
        }
        lastKnownProfile = nil
        do {
            try await store.removeProfile(named: profileName)
            logger.debug("logged out", metadata: ["profile": "\(profileName)"])
        } catch {
            logger.warning("logout could not remove the profile", metadata: ["profile": "\(profileName)", "error": "\(error)"])
        }
        updateDiagnostics { $0 = AuthDiagnostics(); $0.loginRequired = true }
        eventBroadcaster.emit(.loggedOut)
    }

    public func currentUser() async -> User? {
        guard let profile = try? await store.profile(named: profileName) else { return nil }
        return User(credentials: profile.credentials, fallbackID: User.ID(rawValue: profile.userID ?? ""))
    }

    /// Runs the version gate, recording a refusal in the diagnostics.
    func checkGate() async throws {
        do {
            try await gate?.check()
        } catch let error as UpgradeRequiredError {
            updateDiagnostics { $0.upgradeRequired = true }
            throw error
        }
    }

    // MARK: Diagnostics

    func updateDiagnostics(_ change: (inout AuthDiagnostics) -> Void) {
        var updated = diagnostics
        change(&updated)
        guard updated != diagnostics else { return }
        diagnostics = updated
        diagnosticsBroadcaster.emit(updated)
    }
}

/// A check that may forbid logins and refreshes (the version gate).
public protocol AuthGate: Sendable {
    /// Throws (an `UpgradeRequiredError`) when logins and refreshes must not happen.
    func check() async throws
}
