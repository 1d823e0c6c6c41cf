import LoginKitHTTP

/// `AuthService`'s state as one value: events in, actions out. It lives behind one lock
/// (`AuthService.machine`), which the actor's steps and the token calls' cached path both take; the
/// actor carries out what it answers and keeps no copy of any of it. Tested without a network
/// (AuthStateMachineTests).
///
/// The state is one enum whose cases carry what belongs to them:
/// - `active`: no logout is under way. It holds the epoch, whether a login runs, the one shared
///   refresh of the profile (its `Flight`, the refusal a forced call started it for, and its task
///   once started), the store read of a token call that calls under the same change stamp may
///   wait for, the profile remembered for the cached path under the stamp it was read under, and
///   the last known profile (served while the store is unavailable).
/// - `loggingOut`: one logout or more (they nest) are under way. It holds the epoch (each logout
///   bumps it), how many logouts run, and the refresh that was running when the first one began,
///   until that refresh ends; nothing is handed out, remembered or started.
///
/// The epoch is bumped when a logout begins, and again when the last one ends. Work that started in an older epoch (a login, a
/// refresh, a token request) must not hand out or save credentials: the user logged out since. A
/// logout drops everything the active state held, so nothing from before it can be found again.
struct AuthStateMachine: Sendable {
    private enum State: Sendable {
        case active(Active)
        case loggingOut(LoggingOut)
    }

    private struct Active: Sendable {
        var epoch: UInt64
        /// A login runs (started in this epoch): a second one is refused.
        var isLoggingIn = false
        /// The one shared refresh, started in this epoch.
        var refresh: Refresh?
        /// A token call's step reading the store under `stamp`, until it has remembered what it
        /// read and started the refresh it needs.
        var read: (flight: Flight<Void>, stamp: UInt64)?
        /// What the cached path serves while the store's change stamp is still `stamp`.
        var remembered: (stamp: UInt64, profile: HeldProfile)?
        /// The profile as last read or written, served while the store is `.unavailable`.
        var lastKnown: HeldProfile?
        /// A refresh whose credentials the store could not take: served in place of the stored
        /// profile while the store still holds the refresh token it retired (`retired`), so that
        /// token is never sent again; saved by the next access that can.
        var unsaved: UnsavedRefresh?
        /// Logins saved in this epoch: a step that read the store before one was saved does not
        /// make what it read the last known profile.
        var logins: UInt64 = 0

        /// Keeps `profile` as the last known one, unless the one kept was issued later: a step that
        /// read the store before a login or a refresh saved finishes after it, and must not put
        /// back what it read.
        mutating func know(_ profile: HeldProfile) {
            if let lastKnown, lastKnown.timing.issuedAt > profile.timing.issuedAt { return }
            lastKnown = profile
        }

        /// Remembers `profile`, read under `stamp`; never in place of one read under a later stamp
        /// (steps may finish out of order).
        mutating func remember(_ profile: HeldProfile, stamp: UInt64) {
            guard stamp >= remembered?.stamp ?? 0 else { return }
            remembered = (stamp, profile)
        }

        /// The running refresh, or a new one registered now, started for `rejection` (a forced
        /// call's); `isNew` says which.
        mutating func joinOrStartRefresh(for rejection: TokenRejection?) -> (flight: Flight<SharedCredentials>, isNew: Bool) {
            if let refresh { return (refresh.flight, false) }
            let flight = Flight<SharedCredentials>()
            refresh = Refresh(flight: flight, rejection: rejection)
            return (flight, true)
        }
    }

    /// A refresh the store could not save (`Active.unsaved`), by reference: the state every token
    /// call looks at stays a few words (the cached path copies it under the lock).
    private final class UnsavedRefresh: Sendable {
        let profile: StoredProfile
        let retired: String
        let error: TokenStoreError

        init(profile: StoredProfile, retired: String, error: TokenStoreError) {
            self.profile = profile
            self.retired = retired
            self.error = error
        }
    }

    private struct LoggingOut: Sendable {
        var epoch: UInt64
        /// Logouts under way.
        var count: Int
        /// The refresh that ran when the first logout began: it cancels and awaits it.
        var refresh: Refresh?
    }

    private struct Refresh: Sendable {
        let flight: Flight<SharedCredentials>
        /// The refusal it was started for, when a forced call started it: a forced call that joins
        /// it and gets back credentials this refusal holds does not look again (the refresh could
        /// not replace them; a second one would send the same refresh token again).
        let rejection: TokenRejection?
        /// Its task, registered by the actor in the same turn as the refresh was registered.
        var task: Task<Void, Never>?
    }

    private var state = State.active(Active(epoch: 0))

    init() {}

    /// The current epoch.
    var epoch: UInt64 {
        switch state {
        case .active(let active): active.epoch
        case .loggingOut(let loggingOut): loggingOut.epoch
        }
    }

    /// Whether a shared refresh is in the state (running, or ending under a logout).
    var isRefreshing: Bool { refresh != nil }

    /// The task of the shared refresh in the state: what `shutdown()` awaits.
    var refreshTask: Task<Void, Never>? { refresh?.task }

    /// The refusal the shared refresh in the state was started for (`nil`: none runs, or it was
    /// not started by a forced call).
    var refreshRejection: TokenRejection? { refresh?.rejection }

    private var refresh: Refresh? {
        switch state {
        case .active(let active): active.refresh
        case .loggingOut(let loggingOut): loggingOut.refresh
        }
    }

    /// Whether credentials obtained for work that began in `epoch` may be handed out (or saved)
    /// now: no logout is under way and none began since. Checked again after every wait.
    func mayHandOut(startedIn epoch: UInt64) -> Bool {
        guard case .active(let active) = state else { return false }
        return active.epoch == epoch
    }

    /// Runs `change` on the active state; `nil` while a logout is under way.
    @discardableResult
    private mutating func updateActive<Result>(_ change: (inout Active) -> Result) -> Result? {
        guard case .active(var active) = state else { return nil }
        let result = change(&active)
        state = .active(active)
        return result
    }

    // MARK: Login

    enum LoginAction: Sendable, Hashable {
        /// Go ahead; remember the epoch and hand it back with ``loginFinished(startedIn:)``.
        case start(epoch: UInt64)
        /// Refuse with `LoginError` `.loginInProgress`: another login, or a logout, is under way.
        case refuse(reason: String)
    }

    mutating func loginRequested() -> LoginAction {
        switch state {
        case .active(var active):
            guard !active.isLoggingIn else { return .refuse(reason: "a login is already in progress") }
            active.isLoggingIn = true
            state = .active(active)
            return .start(epoch: active.epoch)
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
        mayHandOut(startedIn: epoch) ? .save : .discard
    }

    /// The login that started in `epoch` saved `profile`: it is the last known profile, unless a
    /// logout began during the save (which then revokes and deletes what was saved).
    mutating func loginSaved(_ profile: HeldProfile, startedIn epoch: UInt64) -> LoginResultAction {
        guard mayHandOut(startedIn: epoch) else { return .discard }
        updateActive { active in
            active.lastKnown = profile
            active.unsaved = nil
            active.logins &+= 1
        }
        return .save
    }

    /// The login that started in `epoch` ended, however it ended. A login overtaken by a logout
    /// changes nothing: the guard now belongs to the logout, or to a login started after it.
    mutating func loginFinished(startedIn epoch: UInt64) {
        updateActive { active in
            if active.epoch == epoch { active.isLoggingIn = false }
        }
    }

    // MARK: Tokens: the cached path

    /// What a token call looks at before it enters the actor, in one acquisition of the lock.
    struct CachedLook: Sendable {
        /// The epoch now: the one a call that begins with this look began in.
        var epoch: UInt64
        /// The profile remembered under the stamp asked about (none while a logout is under way).
        var remembered: HeldProfile?
        /// The shared refresh running in this epoch, offered with `remembered` only: what the
        /// actor's step would answer when the remembered profile needs a refresh.
        var refresh: Flight<SharedCredentials>?
        /// The refusal `refresh` was started for, when a forced call started it.
        var refreshRejection: TokenRejection?
        /// Another call's step reading the store under the stamp asked about, in this epoch.
        var read: Flight<Void>?
    }

    /// What a token call under the store's change `stamp` may serve or wait for without entering
    /// the actor (with no stamp, only the epoch).
    func cached(ifStamp stamp: UInt64?) -> CachedLook {
        guard case .active(let active) = state else { return CachedLook(epoch: epoch) }
        var look = CachedLook(epoch: active.epoch)
        guard let stamp else { return look }
        if let remembered = active.remembered, remembered.stamp == stamp {
            look.remembered = remembered.profile
            look.refresh = active.refresh?.flight
            look.refreshRejection = active.refresh?.rejection
        }
        if let read = active.read, read.stamp == stamp { look.read = read.flight }
        return look
    }

    // MARK: Tokens: the actor's step

    enum ReadAction: Sendable, Equatable {
        /// Another call's step reads the store under the same stamp: wait for it, then look again.
        case join(Flight<Void>)
        /// Read the store, in `epoch`. When `announced` is set, calls under the same stamp wait for
        /// it: end it with ``readEnded(_:)``, then finish it, once what was read is remembered and
        /// the refresh it needs is started (or the step failed).
        case read(epoch: UInt64, announced: Flight<Void>?)
        /// A logout began after the request did: no credentials.
        case loggedOut

        static func == (lhs: Self, rhs: Self) -> Bool {
            switch (lhs, rhs) {
            case (.join(let left), .join(let right)): left === right
            case (.read(let leftEpoch, let left), .read(let rightEpoch, let right)): leftEpoch == rightEpoch && left === right
            case (.loggedOut, .loggedOut): true
            default: false
            }
        }
    }

    /// A token call's step is about to read the store under `stamp`. A call that already waited
    /// for another read began in `startEpoch`; it may join one more read when `mayJoin`.
    mutating func readRequested(stamp: UInt64?, mayJoin: Bool, startedIn startEpoch: UInt64?) -> ReadAction {
        let epoch = self.epoch
        if let startEpoch, startEpoch != epoch { return .loggedOut }
        guard let stamp else { return .read(epoch: epoch, announced: nil) }
        return updateActive { active -> ReadAction in
            if mayJoin, let read = active.read, read.stamp == stamp { return .join(read.flight) }
            let flight = Flight<Void>()
            active.read = (flight, stamp)
            return .read(epoch: epoch, announced: flight)
        } ?? .read(epoch: epoch, announced: nil)
    }

    /// The step reading with `flight` is over: called before the flight's waiters are resumed, so
    /// that no call joins it after.
    mutating func readEnded(_ flight: Flight<Void>) {
        updateActive { active in
            if active.read?.flight === flight { active.read = nil }
        }
    }

    /// A step that began in `epoch` found no profile in the store.
    mutating func profileMissing(startedIn epoch: UInt64) {
        guard mayHandOut(startedIn: epoch) else { return }
        updateActive { $0.lastKnown = nil }
    }

    /// The profile to serve while the store is unavailable, to a step that began in `epoch`.
    func knownProfile(startedIn epoch: UInt64) -> HeldProfile? {
        guard mayHandOut(startedIn: epoch), case .active(let active) = state else { return nil }
        return active.lastKnown
    }

    enum TokenAction: Sendable, Equatable {
        case serve
        /// Serve; when `start` is set, it is a new shared refresh, already in the state (callers may
        /// find it there): start its task before the next `await`.
        case serveAndRefresh(start: Flight<SharedCredentials>?)
        /// Wait for the shared refresh `flight`; when `start`, it is new: start its task before the
        /// next `await`.
        case waitForRefresh(Flight<SharedCredentials>, start: Bool)
        /// A logout began after the request did (or is under way): no credentials.
        case loggedOut

        static func == (lhs: Self, rhs: Self) -> Bool {
            switch (lhs, rhs) {
            case (.serve, .serve), (.loggedOut, .loggedOut): true
            case (.serveAndRefresh(let left), .serveAndRefresh(let right)): left === right
            case (.waitForRefresh(let left, let leftStart), .waitForRefresh(let right, let rightStart)):
                left === right && leftStart == rightStart
            default: false
            }
        }
    }

    /// A caller whose request began in `epoch` read `profile` (under the store's change `stamp`,
    /// when the store has stamps), which `verdict` describes. A served profile becomes the last
    /// known one; a served one, or one that needs the refresh the caller waits for, is remembered
    /// for the cached path, so that the calls that follow under the same stamp are served or wait
    /// without reading the store. The sessions' refresh asks with no profile. A refresh started
    /// here is recorded as started for `rejection`, the forced call's refusal, when there is one.
    mutating func tokenRequested(
        startedIn epoch: UInt64, verdict: RefreshDecision.Verdict, read profile: HeldProfile? = nil, stamp: UInt64? = nil,
        loginsSeen: UInt64? = nil, rejection: TokenRejection? = nil
    ) -> TokenAction {
        guard mayHandOut(startedIn: epoch) else { return .loggedOut }
        return updateActive { active -> TokenAction in
            // A profile read before a login was saved is served to its caller, but is not the
            // last known one after that login.
            let profile = loginsSeen.map { $0 == active.logins } ?? true ? profile : nil
            switch verdict {
            case .serve:
                if let profile {
                    active.know(profile)
                    if let stamp { active.remember(profile, stamp: stamp) }
                }
                return .serve
            case .serveAndRefresh:
                if let profile { active.know(profile) }
                let refresh = active.joinOrStartRefresh(for: rejection)
                return .serveAndRefresh(start: refresh.isNew ? refresh.flight : nil)
            case .refresh:
                let refresh = active.joinOrStartRefresh(for: rejection)
                if let profile, let stamp { active.remember(profile, stamp: stamp) }
                return .waitForRefresh(refresh.flight, start: refresh.isNew)
            }
        } ?? .loggedOut
    }

    /// The task of the new shared refresh `flight` started.
    mutating func refreshStarted(_ task: Task<Void, Never>, for flight: Flight<SharedCredentials>) {
        switch state {
        case .active(var active):
            guard active.refresh?.flight === flight else { return }
            active.refresh?.task = task
            state = .active(active)
        case .loggingOut(var loggingOut):
            guard loggingOut.refresh?.flight === flight else { return }
            loggingOut.refresh?.task = task
            state = .loggingOut(loggingOut)
        }
    }

    /// The shared refresh that started in `epoch` saved `profile`, and the store vouches for it
    /// with `stamp` (when it has stamps): the calls that follow are served it from the cached path.
    mutating func refreshSaved(_ profile: HeldProfile, stamp: UInt64?, startedIn epoch: UInt64) {
        guard mayHandOut(startedIn: epoch) else { return }
        updateActive { active in
            active.know(profile)
            active.unsaved = nil
            if let stamp { active.remember(profile, stamp: stamp) }
        }
    }

    /// The shared refresh that started in `epoch` got `profile` from the provider, but the store
    /// could not save it (`error`) and still holds `retired`, the refresh token the provider has
    /// retired: `profile` is what this service serves and refreshes from now on (the last known
    /// profile, and in place of the stored one while that still holds `retired`).
    mutating func refreshUnsaved(_ profile: StoredProfile, replacing retired: String?, error: TokenStoreError, startedIn epoch: UInt64) {
        guard mayHandOut(startedIn: epoch) else { return }
        updateActive { active in
            active.lastKnown = HeldProfile(profile)
            if let retired { active.unsaved = UnsavedRefresh(profile: profile, retired: retired, error: error) }
        }
    }

    /// The unsaved refresh's profile, when `stored` (read from the store by work that began in
    /// `epoch`) still holds the refresh token that refresh retired; `nil` otherwise.
    func inPlaceOf(_ stored: StoredProfile, startedIn epoch: UInt64) -> StoredProfile? {
        guard case .active(let active) = state, active.epoch == epoch, let unsaved = active.unsaved,
            stored.credentials.refreshToken == unsaved.retired
        else { return nil }
        return unsaved.profile
    }

    /// Logins saved in this epoch (see `Active.logins`); 0 during a logout.
    var logins: UInt64 {
        guard case .active(let active) = state else { return 0 }
        return active.logins
    }

    /// The save that failed after the last refresh, while its credentials are the ones served.
    var unsavedRefreshError: TokenStoreError? {
        guard case .active(let active) = state else { return nil }
        return active.unsaved?.error
    }

    enum RefreshResultAction: Sendable, Hashable {
        /// Hand the outcome to the waiters.
        case deliver
        /// A logout began since the refresh started: the waiters get login-required.
        case loggedOut
    }

    /// The shared refresh `flight` ended. It leaves the state here, before its waiters are resumed,
    /// so that no caller joins it after.
    mutating func refreshFinished(_ flight: Flight<SharedCredentials>) -> RefreshResultAction {
        switch state {
        case .active(var active):
            guard active.refresh?.flight === flight else { return .loggedOut }  // an epoch that is over
            active.refresh = nil
            state = .active(active)
            return .deliver
        case .loggingOut(var loggingOut):
            if loggingOut.refresh?.flight === flight {
                loggingOut.refresh = nil
                state = .loggingOut(loggingOut)
            }
            return .loggedOut
        }
    }

    // MARK: Logout

    enum LogoutAction: Sendable, Hashable {
        /// Cancel the refresh's task, when one runs, and wait for it to end; then revoke and delete
        /// under the store's lock.
        case start(cancelRefresh: Task<Void, Never>?)
    }

    /// A logout begins: from now on nobody gets credentials from before it. The remembered and last
    /// known profiles and the announced read are dropped; the running refresh stays in the state,
    /// offered to nobody, until it ends.
    mutating func logoutRequested() -> LogoutAction {
        let next =
            switch state {
            case .active(let active): LoggingOut(epoch: active.epoch + 1, count: 1, refresh: active.refresh)
            case .loggingOut(let loggingOut): LoggingOut(epoch: loggingOut.epoch + 1, count: loggingOut.count + 1, refresh: loggingOut.refresh)
            }
        state = .loggingOut(next)
        return .start(cancelRefresh: next.refresh?.task)
    }

    /// A logout ended. When it was the last one, the state is active again in the new epoch, with
    /// nothing from the old one: each logout awaited the refresh it found before ending.
    mutating func logoutFinished() {
        guard case .loggingOut(var loggingOut) = state else { return }
        if loggingOut.count > 1 {
            loggingOut.count -= 1
            state = .loggingOut(loggingOut)
        } else {
            // A new epoch again: work that began while the logout ran (a read of what it then
            // deleted) hands out nothing.
            state = .active(Active(epoch: loggingOut.epoch + 1))
        }
    }
}
