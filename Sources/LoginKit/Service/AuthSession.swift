/// What a feature needs from the credentials for as long as it holds a session (like Core
/// Location's `CLServiceSession`): while any session is held, `AuthService` refreshes proactively
/// so that the goal stays met; when the last one is released, it stops.
///
/// Release a session with ``invalidate()`` (or by dropping it). Sessions layer: the service works
/// to the strictest goal held.
public final class AuthSession: Sendable {
    /// What a session asks for.
    public struct Goal: Sendable, Hashable {
        /// The credentials must stay valid at least this long. Default 60 s.
        public var minimumValidity: Duration
        /// Scopes the access token must carry.
        public var scopes: Set<String>
        /// Whether an ID token is needed (not only an access token).
        public var requiresIDToken: Bool

        /// A goal: at least `minimumValidity` left, these scopes, an ID token when asked.
        public init(minimumValidity: Duration = .seconds(60), scopes: Set<String> = [], requiresIDToken: Bool = false) {
            self.minimumValidity = minimumValidity
            self.scopes = scopes
            self.requiresIDToken = requiresIDToken
        }

        /// The stricter of two goals.
        func combined(with other: Goal) -> Goal {
            Goal(
                minimumValidity: max(minimumValidity, other.minimumValidity),
                scopes: scopes.union(other.scopes),
                requiresIDToken: requiresIDToken || other.requiresIDToken
            )
        }
    }

    /// The goal.
    public let goal: Goal
    /// Snapshots of why the goal is or is not met, the current one first, then every change.
    public let diagnostics: AsyncStream<AuthDiagnostics>
    let id: UInt64
    private weak let service: AuthService?

    init(id: UInt64, goal: Goal, diagnostics: AsyncStream<AuthDiagnostics>, service: AuthService) {
        self.id = id
        self.goal = goal
        self.diagnostics = diagnostics
        self.service = service
    }

    /// Releases the session; when it was the last, proactive refresh has stopped when this returns.
    /// Idempotent.
    public func invalidate() async {
        await service?.endSession(id)
    }

    deinit {
        guard let service else { return }
        let id = self.id
        // Owned by the service: its shutdown() awaits this bookkeeping like any background work.
        service.background.spawn { await service.endSession(id) }
    }
}

/// Why a session's goal is or is not met right now. Each property is one reason.
public struct AuthDiagnostics: Sendable, Hashable, CustomStringConvertible {
    /// No usable credentials: log in.
    public var loginRequired = false
    /// A refresh is running.
    public var refreshInProgress = false
    /// The provider rejected the credentials (a refresh token, a password).
    public var credentialsRejected = false
    /// The last attempt could not reach the provider, or it failed (5xx, 429).
    public var serverUnreachable = false
    /// The version gate requires an upgrade.
    public var upgradeRequired = false
    /// The granted scope lacks what a session asks for.
    public var insufficientScope = false
    /// The credentials expire sooner than a session needs.
    public var expiringSoon = false

    /// Diagnostics with no reason set: the goal is met.
    public init() {}

    /// Whether nothing stands between the sessions and their goal.
    public var isGoalMet: Bool {
        !(loginRequired || credentialsRejected || upgradeRequired || insufficientScope || expiringSoon)
    }

    public var description: String {
        let reasons = [
            ("loginRequired", loginRequired), ("refreshInProgress", refreshInProgress), ("credentialsRejected", credentialsRejected),
            ("serverUnreachable", serverUnreachable), ("upgradeRequired", upgradeRequired), ("insufficientScope", insufficientScope),
            ("expiringSoon", expiringSoon),
        ].filter(\.1).map(\.0)
        return "AuthDiagnostics(\(reasons.isEmpty ? "goal met" : reasons.joined(separator: ", ")))"
    }
}
