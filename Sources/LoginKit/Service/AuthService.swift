#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import Logging
import LoginKitHTTP

/// Logs in, hands out valid tokens to any number of concurrent callers, and refreshes them exactly
/// once when due — in this process and, through the store's lock, across processes.
///
/// - ``logIn(for:with:)``: a second call while one is in flight fails at once with
///   a `LoginError` `.loginInProgress` and sends nothing. Credentials are saved, then ``events`` reports the
///   login, then the call returns. A password is never retried.
/// - ``validCredentials(minimumValidity:)``, ``validAccessToken(minimumValidity:)``,
///   ``validIDToken(minimumValidity:)``: the stored credentials while they stay valid; in the advisory
///   window a background refresh starts and the current token is served; in the mandatory window
///   (or with less than `minimumValidity` left) callers wait for the one shared refresh. A caller
///   never refreshes credentials issued after its request began (docs/refresh.md).
/// - ``send(_:body:)``: sends a request to a resource server with the access token (Bearer, or
///   DPoP with a proof); a 401 for a refused token refreshes it once (shared like every refresh)
///   and sends the request once more.
/// - ``logOut()``: cancels and awaits a running refresh, revokes what the store holds under its
///   lock, deletes it; nobody gets credentials from before the logout afterwards.
/// - ``session(goal:)``: proactive refresh while any session is held, with ``AuthDiagnostics``.
/// - ``shutdown()`` (or, with LoginKitLifecycle, `run()` under a service group): stops background work and awaits a refresh
///   whose request has left, so that a rotated refresh token is saved before the process exits.
///
/// Concurrency contract: an actor whose state is one value behind one lock, consulted before the
/// first `await` of every operation and again after each one. Two token-call steps take that lock
/// without entering the actor: serving the profile last served while the store's change stamp
/// vouches for it (the cached path), and handing a waiter the shared refresh's result, so that a
/// storm of waiters is not resumed one actor turn at a time.
public actor AuthService: AuthServiceProtocol {
    /// Windows, retries and timeouts.
    public struct Configuration: Sendable {
        /// Before expiry, a refresh starts in the background while the current token is served.
        /// Default 5 minutes (at most half the token's lifetime).
        public var advisoryWindow: Duration = .seconds(300)
        /// Before expiry, callers wait for the refresh. Default 60 s (at most a quarter of the lifetime).
        public var mandatoryWindow: Duration = .seconds(60)
        /// Retries of a transient refresh failure (network, 5xx, 429). Default 3.
        public var maximumRetries = 3
        /// The scale of the wait before a retry: retry `n` (from 0) waits a random time between half
        /// and all of `min(initialBackoff × 2ⁿ, maximumBackoff)`, or the server's `Retry-After` when
        /// that is longer (still at most `maximumBackoff`). Default 1 s.
        public var initialBackoff: Duration = .seconds(1)
        /// The longest single wait, `Retry-After` included. Default 30 s.
        public var maximumBackoff: Duration = .seconds(30)
        /// The shared refresh's own deadline, the store's lock and retries included. Default 60 s.
        public var refreshTimeout: Duration = .seconds(60)
        /// How long logout waits for revocation before deleting the profile anyway. Default 5 s.
        public var revocationTimeout: Duration = .seconds(5)
        /// Where logins, refreshes and logouts are logged (debug: each step and outcome; notice:
        /// rejected credentials; warning and error: failures). Never a password, token or secret.
        /// Default: a logger that discards everything; hand in the host's.
        public var logger = Logger(label: "loginkit.auth", factory: { _ in SwiftLogNoOpLogHandler() })
        /// Whether the shared refresh runs on the API's transport executor
        /// (`PrefersTaskExecutor`; for `CurlHTTPClient`, its driver thread) — its
        /// actor steps, store write and HTTP completion then never queue behind a storm of callers
        /// on the global executor. The store's write (two `fsync`s) then holds that thread, and
        /// the client's other transfers, for its duration. Default `true`; `false` runs it on the
        /// global concurrent executor.
        package var runsRefreshOnTransportExecutor = true
        /// Attributes a login keeps: its save copies each of them that the profile it replaces holds
        /// (and the login itself does not set) into the new profile, in the transaction that writes
        /// it — no process ever sees the profile without them, and a login cut short loses nothing.
        /// Default: none (a login replaces every attribute).
        package var attributesKeptAcrossLogins: Set<String> = []

        /// The defaults: refresh from 5 minutes before expiry, wait from 60 s before it, 3 retries
        /// backing off from 1 s to 30 s, 60 s for a whole refresh, 5 s for revocation, no logging,
        /// the refresh on the transport's executor.
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
    /// Interactive steps (device-code prompts) run one at a time through this queue.
    public nonisolated let workflows: AuthWorkflowQueue
    nonisolated let clock: any AuthClock
    nonisolated var logger: Logger { configuration.logger }
    nonisolated let eventBroadcaster = Broadcaster<AuthEvent>()
    /// `loginkit_shared_refresh_waits_total` for this profile, made once: a storm's thousand
    /// waiters then only increment it (docs/server-side.md).
    nonisolated let sharedRefreshWaits: Telemetry.SharedCounter
    nonisolated let diagnosticsBroadcaster = Broadcaster<AuthDiagnostics>()
    /// Checked before every login and refresh, when set (see `VersionGate`).
    nonisolated let gate: (any AuthGate)?
    /// The proactive-refresh loop and session bookkeeping.
    nonisolated let background = TaskOwner()

    /// The service's state: the one `AuthStateMachine` value, behind one lock. The actor's steps and
    /// the token calls' cached path (which never enters the actor) both go through it; nothing keeps
    /// a copy of any of it.
    nonisolated let machine = LockedState(AuthStateMachine())
    /// The store's change stamps, which vouch for the profile the cached path serves (`nil`: the
    /// store has none, every call takes the actor's step).
    nonisolated let stamps: (any TokenStoreChangeStamp)?
    /// The stamp of this service's profile (``TokenStoreChangeStamp/changeStampSource(for:)``),
    /// asked for once: a save of another profile does not send the cached path to the actor.
    nonisolated let stampSource: (any ChangeStampSource)?

    // Bookkeeping of the sessions and the diagnostics, isolated to the actor: not part of any
    // login, token or refresh decision (the machine makes those).
    var diagnostics = AuthDiagnostics()
    var sessionGoals: [UInt64: AuthSession.Goal] = [:]
    var nextSessionID: UInt64 = 0
    var proactiveRefresh: Task<Void, Never>?
    /// Minimum validities already reported as beyond what the provider grants (logged once each).
    var reportedUngrantable: Set<Duration> = []

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
        let stamps = store as? any TokenStoreChangeStamp
        self.stamps = stamps
        self.stampSource = stamps?.changeStampSource(for: profile)
        self.profileName = profile
        self.sharedRefreshWaits = Telemetry.SharedCounter("loginkit_shared_refresh_waits_total", [("profile", profile)])
        self.clock = clock
        self.configuration = configuration
        self.workflows = workflows
        self.gate = gate
    }

    /// Every event from now on, for as long as the stream is kept. Any number of subscribers.
    public nonisolated var events: AsyncStream<AuthEvent> {
        eventBroadcaster.subscribe()
    }

    /// The logged-in user: `User.id` is the ID the profile was logged in as (the ID token's `sub`
    /// when the login brought one, else the login ID; for a client-credentials profile, the client
    /// ID), and never changes on refresh. `nil` when no profile is stored.
    ///
    /// - Throws: `TokenStoreError` when the store cannot be read (that is not "logged out").
    public func currentUser() async throws -> User? {
        guard let profile = try await store.profile(named: profileName) else { return nil }
        return User(profile: profile)
    }

    // MARK: Lifecycle

    /// Stops background work (proactive refresh) and waits for a refresh whose request may have
    /// left, so that rotated tokens are saved before the process exits. Token calls keep working
    /// afterwards, without background refreshes. Short-lived programs (a CLI) call this before
    /// they exit.
    public func shutdown() async {
        proactiveRefresh?.cancel()
        proactiveRefresh = nil
        await background.shutdown(cancelling: true)
        await machine.withLock { $0.refreshTask }?.value
    }

    /// Runs the version gate, recording a refusal in the diagnostics.
    func checkGate() async throws {
        do {
            try await gate?.check()
        } catch let error as LoginError where error.code == .upgradeRequired {
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

    var logMetadata: Logger.Metadata { ["profile": "\(profileName)"] }
}

/// A check that may forbid logins and refreshes (the version gate).
public protocol AuthGate: Sendable {
    /// Throws (a `LoginError` `.upgradeRequired`, with `upgradePolicy`) when logins and refreshes must not happen.
    func check() async throws
}
