#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif
import Logging
import LoginKitHTTP

extension AuthService {
    /// Credentials valid for at least `minimumValidity` (and beyond the mandatory window),
    /// refreshing them — once, shared by every caller and process — when needed.
    ///
    /// A caller never refreshes credentials issued after its request began, and a caller whose
    /// wait ends with credentials someone else just refreshed takes them: one refresh per expiry.
    /// A `minimumValidity` beyond what the provider grants is met by a freshly issued token.
    /// Cancelling the caller ends only its own wait.
    ///
    /// - Throws: `LoginRequiredError` (no profile, the refresh token was rejected, the profile is
    ///   another provider's, a logout began), `ServerError`/`NetworkError` when refreshing kept
    ///   failing and the old credentials had expired, `LoginError` `.upgradeRequired`,
    ///   `TokenVerificationError`, `TokenStoreError`.
    public nonisolated(nonsending) func validCredentials(minimumValidity: Duration) async throws -> Credentials {
        try await valid(.any, minimumValidity: minimumValidity).credentials
    }

    /// A valid ID token. See ``validCredentials(minimumValidity:)``.
    ///
    /// - Throws: also `LoginRequiredError` `.noIDToken` when the provider issued no ID token (use
    ///   ``validAccessToken(minimumValidity:)``, which works with every provider).
    public nonisolated(nonsending) func validIDToken(minimumValidity: Duration) async throws -> IDToken {
        let shared = try await valid(.idToken, minimumValidity: minimumValidity)
        guard let idToken = shared.credentials.idToken else {
            throw LoginRequiredError(.noIDToken, profile: profileName, "the provider issued no ID token for this profile; use the access token")
        }
        return idToken
    }

    /// A valid access token. See ``validCredentials(minimumValidity:)``.
    public nonisolated(nonsending) func validAccessToken(minimumValidity: Duration) async throws -> String {
        let shared = try await valid(.accessToken, minimumValidity: minimumValidity)
        guard let accessToken = shared.credentials.accessToken else {
            throw LoginRequiredError(.noAccessToken, profile: profileName, "the provider issued no access token for this profile")
        }
        return accessToken
    }

    /// Credentials whose access token is not `accessToken`, which a resource server refused
    /// (`invalid_token`) in a request sent at `sentAt`: the forced refresh. It is the shared refresh
    /// every caller uses, in this process and, through the store's lock, across processes: any
    /// number of callers rejecting the same token cause one refresh, and a caller whose token
    /// someone already replaced is served the new one without a refresh. Credentials issued after
    /// `sentAt` are not what was refused, even with the same token (a provider may issue the same
    /// access token again): they are served. The new credentials then follow the usual rules (they
    /// may be in the advisory window, or wait for a refresh that is due anyway).
    ///
    /// Credentials a forced refresh brought are not refreshed again for a refusal within
    /// ``TokenRejection/quietPeriod`` (30 s) of that refresh, in any process sharing the store: they
    /// are handed back as they are. A resource server that refuses every token then costs one
    /// refresh per 30 s, not one per request.
    ///
    /// What the shared refresh brings is handed out as for every waiter: when it could not refresh
    /// (a transient failure while the old token is still valid, a deadline), that may be the old
    /// token again. A caller that joined a refresh another caller started for another reason, and
    /// got the refused token back from it, looks once more (and may refresh); one that joined a
    /// refresh started for the refusal of those very credentials does not (that refresh could not
    /// replace them: any number of callers refusing a token cause one refresh attempt).
    ///
    /// - Throws: what ``validCredentials(minimumValidity:)`` throws; `LoginRequiredError`
    ///   `.cannotRefresh` when there is no refresh token.
    package nonisolated(nonsending) func validCredentials(rejecting accessToken: String, sentAt: Date) async throws -> Credentials {
        try await valid(.accessToken, minimumValidity: .zero, rejecting: TokenRejection(accessToken: accessToken, sentAt: sentAt)).credentials
    }

    /// ``validCredentials(rejecting:sentAt:)`` for a token refused in a request sent no later than
    /// now: the token as it is held now is what was refused.
    package nonisolated(nonsending) func validCredentials(rejecting accessToken: String) async throws -> Credentials {
        try await validCredentials(rejecting: accessToken, sentAt: clock.now)
    }

    /// A refresh the user asked for (`loginkit token --force-refresh`): the access token held at
    /// `heldSince` is replaced, once across every caller and process that asked while it was held —
    /// one that began after the replacement was issued takes it without a refresh of its own. The
    /// quiet period of refusals does not apply, and what this refresh brings starts none: a
    /// resource server's refusal of it is refreshed at once.
    package nonisolated(nonsending) func refreshByRequest(replacing accessToken: String, heldSince: Date) async throws -> Credentials {
        var rejection = TokenRejection(accessToken: accessToken, sentAt: heldSince)
        rejection.isExplicit = true
        return try await valid(.accessToken, minimumValidity: .zero, rejecting: rejection).credentials
    }

    /// The cached path first (no actor hop: the profile served last, while the store's change
    /// stamp is the one it was read under and the decision is to serve it; or, when it needs a
    /// refresh and the shared one is running, the wait for that refresh), else the actor's step,
    /// and when that says wait, the wait for the shared refresh, also off the actor. With
    /// `rejection` (a forced refresh), a profile that holds the refused token is never served
    /// (``RefreshDecision/refreshesForRejection(accessToken:timing:now:)``).
    nonisolated(nonsending) func valid(
        _ kind: TokenKind, minimumValidity: Duration, rejecting rejection: TokenRejection? = nil
    ) async throws -> SharedCredentials {
        let decision = RefreshDecision(
            advisoryWindow: configuration.advisoryWindow, mandatoryWindow: configuration.mandatoryWindow,
            kind: kind, minimumValidity: minimumValidity, requestStart: clock.now, rejection: rejection
        )
        var stamp = stampSource?.stamp()
        var now = decision.requestStart
        // One acquisition of the machine's lock: the epoch this request began in (after waiting for
        // another call's read, nothing from a later epoch may be handed to it), the remembered
        // profile with the refresh it may wait for, and a read it may wait for.
        var look = machine.withLock { $0.cached(ifStamp: stamp) }
        let startEpoch = look.epoch
        // At most two waits for another call's store read, then this call reads itself: bounded.
        var joinedReads = 0
        // A forced call that waited for a refresh it did not start — one that runs for another
        // reason, which may take the refused token from the store — and got the refused token back
        // looks once more (``RefreshDecision/looksAgain(after:fromRefreshFor:)``): at most once, so
        // bounded.
        var mayLookAgain = decision.rejection != nil
        while true {
            // The decision on the remembered profile's dates alone (no copy of its strings); a
            // forced refresh also compares its token.
            if let remembered = look.remembered {
                let verdict = decision.verdict(for: remembered, now: now)
                if verdict == .serve, decision.grantsTheAskedValidity(remembered.timing) {
                    if decision.rejection != nil { noteQuietPeriod(decision, remembered, now: now) }
                    return remembered.credentials
                }
                // A storm's waiters: the profile needs a refresh and the shared one runs. The actor's
                // step would read the store again (two hops and a stat each, serialised) to answer
                // "wait for it"; they wait for it at once.
                if verdict == .refresh, let refresh = look.refresh {
                    sharedRefreshWaits.increment()
                    let shared = try await awaitRefresh(refresh, kind: kind, startedIn: startEpoch)
                    guard mayLookAgain, decision.looksAgain(after: shared.credentials, fromRefreshFor: look.refreshRejection) else {
                        return shared
                    }
                    mayLookAgain = false
                    (stamp, now, look) = try lookAgain(startedIn: startEpoch)
                    continue
                }
            }
            // Another call's step is reading the store under this same stamp: wait for it off the
            // actor, then look at what it remembered (and the refresh it may have started).
            let reading: Flight<Void>
            if joinedReads < 2, let announced = look.read {
                reading = announced
            } else {
                switch try await step(kind, decision, stamp: stamp, mayJoinRead: joinedReads < 2, startedIn: startEpoch) {
                case .serve(let credentials):
                    return credentials
                case .wait(let flight, let epoch, let started, let startedFor):
                    sharedRefreshWaits.increment()
                    let shared = try await awaitRefresh(flight, kind: kind, startedIn: epoch)
                    guard !started, mayLookAgain, decision.looksAgain(after: shared.credentials, fromRefreshFor: startedFor) else {
                        return shared
                    }
                    mayLookAgain = false
                    (stamp, now, look) = try lookAgain(startedIn: startEpoch)
                    continue
                case .joinRead(let announced):
                    reading = announced
                }
            }
            joinedReads += 1
            try await reading.wait()
            // The wait may have lasted (a keyring look-up, another process's change): the store's
            // stamp and the time are taken again. A logout since this request began ends it: what
            // the store holds next may be a new login's.
            (stamp, now, look) = try lookAgain(startedIn: startEpoch)
        }
    }

    /// The store's stamp, the time and the machine's look, taken again after a wait; a logout since
    /// the call began in `startEpoch` ends it.
    private nonisolated func lookAgain(startedIn startEpoch: UInt64) throws -> (UInt64?, Date, AuthStateMachine.CachedLook) {
        let stamp = stampSource?.stamp()
        let now = clock.now
        guard let look = machine.withLock({ $0.mayHandOut(startedIn: startEpoch) ? $0.cached(ifStamp: stamp) : nil }) else {
            throw loggedOut()
        }
        return (stamp, now, look)
    }

    enum TokenStep: Sendable {
        case serve(SharedCredentials)
        /// Wait for the shared refresh `flight`; `started`: this step started it; `startedFor`: the
        /// refusal it was started for, when a forced call started it.
        case wait(Flight<SharedCredentials>, startedIn: UInt64, started: Bool, startedFor: TokenRejection?)
        /// Another step reads the store under the same stamp: wait for it, then look again.
        case joinRead(Flight<Void>)
    }

    /// What the actor decides for a token call: serve what the store holds (remembering it for the
    /// cached path), or wait for the one shared refresh (starting it when none runs). The call began in
    /// `startEpoch`: nothing from after a logout that began since is handed to it.
    private func step(
        _ kind: TokenKind, _ decision: RefreshDecision, stamp: UInt64?, mayJoinRead: Bool, startedIn startEpoch: UInt64?
    ) async throws -> TokenStep {
        let epoch: UInt64
        let reading: Flight<Void>?
        // The logins saved so far, taken with the read: what is read is not the last known profile
        // once a login saved after it.
        let (action, loginsSeen) = machine.withLock { ($0.readRequested(stamp: stamp, mayJoin: mayJoinRead, startedIn: startEpoch), $0.logins) }
        switch action {
        case .loggedOut:
            throw loggedOut()
        case .join(let announced):
            return .joinRead(announced)
        case .read(let current, let announced):
            epoch = current
            reading = announced
        }
        // This step reads the store: calls under the same stamp wait for it (off the actor) until it
        // has remembered what it read and started the refresh it needs. `defer` ends it last, and
        // takes it out of the state before its waiters are resumed.
        defer {
            if let reading {
                machine.withLock { $0.readEnded(reading) }
                reading.finish(with: .success(()))
            }
        }
        let profile: StoredProfile
        do {
            guard let stored = try await store.profile(named: profileName) else {
                machine.withLock { $0.profileMissing(startedIn: epoch) }
                updateDiagnostics { $0.loginRequired = true }
                throw notLoggedIn()
            }
            // A refresh the store could not save stands in for the profile holding the refresh
            // token it retired: that token is never sent again.
            profile = machine.withLock { $0.inPlaceOf(stored, startedIn: epoch) } ?? stored
        } catch let error as TokenStoreError where error.code == .unavailable {
            // The store's database is unreachable: credentials this service already had are served
            // while they need no refresh; a refresh needs the store's lock, so it waits.
            guard let known = machine.withLock({ $0.knownProfile(startedIn: epoch) }),
                decision.verdict(for: known, now: clock.now) != .refresh
            else {
                throw error
            }
            logger.warning("the store is unavailable; serving the credentials held in memory", metadata: logMetadata.merging(["error": "\(error)"]) { $1 })
            if decision.rejection != nil { noteQuietPeriod(decision, known, now: clock.now) }
            return .serve(known.credentials)
        }
        let now = clock.now
        let verdict = decision.verdict(for: profile, now: now)
        reportIfUngrantable(decision, profile)
        let read = HeldProfile(profile)
        // The refusal a refresh started now is for, and the one the running refresh was started for
        // (what a forced caller that joins it needs), in one acquisition of the lock.
        let (tokenAction, startedFor) = machine.withLock { machine -> (AuthStateMachine.TokenAction, TokenRejection?) in
            let requested = machine.tokenRequested(
                startedIn: epoch, verdict: verdict, read: read, stamp: stamp, loginsSeen: loginsSeen, rejection: decision.rejection)
            return (requested, machine.refreshRejection)
        }
        switch tokenAction {
        case .serve:
            if decision.rejection != nil { noteQuietPeriod(decision, read, now: now) }
            return .serve(read.credentials)
        case .serveAndRefresh(let start):
            if let start { startRefresh(start, firstSeen: profile, decision: decision, epoch: epoch) }
            return .serve(read.credentials)
        case .waitForRefresh(let flight, let start):
            if start { startRefresh(flight, firstSeen: profile, decision: decision, epoch: epoch) }
            return .wait(flight, startedIn: epoch, started: start, startedFor: startedFor)
        case .loggedOut:
            throw loggedOut()
        }
    }

    /// Waits for the shared refresh, then checks again that what it brought may be handed out: a
    /// logout may have begun meanwhile (checked under the machine's lock, without entering the
    /// actor, so that the waiters of a storm go on together instead of one actor turn each), and a
    /// refresh may have brought no new token of the kind asked (no new ID token) or one that has
    /// already expired.
    ///
    /// Credentials that were valid when they arrived (their `issuedAt`, stamped on receipt) and
    /// have expired since were held up on their way — a save retried or waiting for the store, a
    /// process stopped — while the session is healthy: that is the store's failure (its own error
    /// when the save failed), never "log in again", which would send a needless login.
    nonisolated(nonsending) func awaitRefresh(_ flight: Flight<SharedCredentials>, kind: TokenKind, startedIn epoch: UInt64) async throws -> SharedCredentials {
        let shared = try await flight.wait()
        guard machine.withLock({ $0.mayHandOut(startedIn: epoch) }) else { throw loggedOut() }
        let now = clock.now
        if let expiry = shared.expiry(of: kind), expiry <= now {
            if let received = shared.credentials.issuedAt, expiry > received {
                if let unsaved = unsavedRefresh { throw unsaved }
                let lifetime = Int(min(expiry.timeIntervalSince(received), 1e9).rounded(.down))
                let late = Int(min(now.timeIntervalSince(received), 1e9).rounded(.up))
                throw TokenStoreError(
                    .unavailable, path: storeLocation,
                    "the refreshed credentials were valid for \(lifetime) s when they arrived, and had expired when the refresh ended \(late) s later: saving them in the store (\(storeLocation)) took too long. The session itself is fine; try again, and check the store if this repeats")
            }
            throw LoginRequiredError(
                .cannotRefresh, profile: profileName,
                kind == .idToken
                    ? "the provider's refresh brought no new ID token and the stored one has expired; log in again"
                    : "the provider's refresh brought credentials that have already expired; log in again")
        }
        return shared
    }

    /// Where the store is, for messages: the file store's path, else the kind of store.
    nonisolated var storeLocation: String {
        (store as? IDTokenStore)?.path ?? "\(type(of: store))"
    }

    nonisolated func loggedOut() -> LoginRequiredError {
        LoginRequiredError(.loggedOut, profile: profileName, "the profile \"\(profileName)\" was logged out; log in again")
    }

    nonisolated func notLoggedIn() -> LoginRequiredError {
        LoginRequiredError(.notLoggedIn, profile: profileName, "not logged in (profile \"\(profileName)\"); log in first")
    }

    /// Says (notice, no token) that a forced call is handed back the token a resource server
    /// refused, because a forced refresh brought it less than ``TokenRejection/quietPeriod`` ago:
    /// `send` then returns the `401` without a refresh.
    private nonisolated func noteQuietPeriod(_ decision: RefreshDecision, _ held: HeldProfile, now: Date) {
        guard let left = decision.quietPeriodLeft(for: held.credentials.credentials, timing: held.timing, now: now) else { return }
        logger.notice(
            "the resource server refused the access token that a refresh for an earlier refusal brought; it is not refreshed again for another \(Int(left.rounded(.up))) s (the quiet period), so the refusal stands",
            metadata: ["profile": "\(profileName)"])
    }

    /// Says once per asked validity that the provider grants less.
    private func reportIfUngrantable(_ decision: RefreshDecision, _ profile: StoredProfile) {
        guard decision.minimumValidity > .zero, let expiry = decision.kind.expiry(of: profile.credentials) else { return }
        let lifetime = RefreshDecision.lifetime(of: profile, expiry: expiry)
        guard RefreshDecision.grantable(decision.minimumValidity, lifetime: lifetime).capped,
            reportedUngrantable.insert(decision.minimumValidity).inserted
        else { return }
        logger.notice(
            "the provider grants \(Int(lifetime.rounded())) s; \(Int(decision.minimumValidity.timeInterval)) s was asked: a freshly issued token is served",
            metadata: logMetadata)
    }
}
