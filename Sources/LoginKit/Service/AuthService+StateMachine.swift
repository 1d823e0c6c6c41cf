/// `AuthService`'s state as a value: events in, actions out. The actor asks it before every step
/// and after every `await`, and carries out what it answers; nothing else decides. Tested without
/// a network (AuthStateMachineTests).
///
/// - `phase`: idle, logging in, or logging out (logins and logouts are exclusive; a second login
///   is refused at once).
/// - `isRefreshing`: the one shared refresh of the profile is running.
/// - `epoch`: bumped when a logout begins. Work that started in an older epoch (a login, a
///   refresh, a token request) must not hand out or save credentials: the user logged out since.
struct AuthStateMachine: Sendable, Hashable {
    enum Phase: Sendable, Hashable {
        case idle
        case loggingIn
        case loggingOut(count: Int)
    }

    private(set) var phase: Phase = .idle
    private(set) var isRefreshing = false
    private(set) var epoch: UInt64 = 0

    // MARK: Login

    enum LoginAction: Sendable, Hashable {
        /// Go ahead; remember the epoch and hand it back with ``loginFinished(startedIn:)``.
        case start(epoch: UInt64)
        /// Refuse with `LoginInProgressError`: another login, or a logout, is under way.
        case refuse(reason: String)
    }

    mutating func loginRequested() -> LoginAction {
        switch phase {
        case .idle:
            phase = .loggingIn
            return .start(epoch: epoch)
        case .loggingIn:
            return .refuse(reason: "a login is already in progress")
        case .loggingOut:
            return .refuse(reason: "a logout is in progress")
        }
    }

    enum LoginResultAction: Sendable, Hashable {
        /// Save the credentials and report the login.
        case save
        /// A logout began meanwhile: revoke what was issued, save nothing.
        case discard
    }

    /// The provider answered a login that started in `epoch`; says whether to keep the result.
    func loginSucceeded(startedIn epoch: UInt64) -> LoginResultAction {
        epoch == self.epoch ? .save : .discard
    }

    /// The login that started in `epoch` ended, however it ended. A login overtaken by a logout
    /// changes nothing: the phase now belongs to the logout, or to a login started after it.
    mutating func loginFinished(startedIn epoch: UInt64) {
        if phase == .loggingIn, epoch == self.epoch { phase = .idle }
    }

    /// Whether credentials obtained for a request that began in `epoch` may be handed out now
    /// (checked again after every wait: a logout may have begun meanwhile).
    func mayHandOut(startedIn epoch: UInt64) -> Bool {
        if case .loggingOut = phase { return false }
        return epoch == self.epoch
    }

    // MARK: Tokens

    enum TokenAction: Sendable, Hashable {
        case serve
        /// Serve, and start the shared refresh in the background unless it runs already.
        case serveAndRefresh(start: Bool)
        /// Wait for the shared refresh, starting it unless it runs already.
        case waitForRefresh(start: Bool)
        /// A logout began after the request did (or is under way): no credentials.
        case loggedOut
    }

    /// A caller whose request began in `epoch` read credentials that `verdict` describes.
    mutating func tokenRequested(startedIn epoch: UInt64, verdict: RefreshDecision.Verdict) -> TokenAction {
        guard mayHandOut(startedIn: epoch) else { return .loggedOut }
        switch verdict {
        case .serve:
            return .serve
        case .serveAndRefresh:
            defer { isRefreshing = true }
            return .serveAndRefresh(start: !isRefreshing)
        case .refresh:
            defer { isRefreshing = true }
            return .waitForRefresh(start: !isRefreshing)
        }
    }

    enum RefreshResultAction: Sendable, Hashable {
        /// Hand the outcome to the waiters.
        case deliver
        /// A logout began since the refresh started: the waiters get login-required.
        case loggedOut
    }

    /// The shared refresh that started in `epoch` ended.
    mutating func refreshFinished(startedIn epoch: UInt64) -> RefreshResultAction {
        isRefreshing = false
        return epoch == self.epoch ? .deliver : .loggedOut
    }

    // MARK: Logout

    enum LogoutAction: Sendable, Hashable {
        /// Cancel the running refresh (when `cancelRefresh`) and wait for it to end, then revoke
        /// and delete under the store's lock.
        case start(cancelRefresh: Bool)
    }

    /// A logout begins: from now on nobody gets credentials from before it.
    mutating func logoutRequested() -> LogoutAction {
        epoch += 1
        if case .loggingOut(let count) = phase {
            phase = .loggingOut(count: count + 1)
        } else {
            phase = .loggingOut(count: 1)
        }
        return .start(cancelRefresh: isRefreshing)
    }

    /// A logout ended.
    mutating func logoutFinished() {
        guard case .loggingOut(let count) = phase else { return }
        phase = count > 1 ? .loggingOut(count: count - 1) : .idle
    }
}
