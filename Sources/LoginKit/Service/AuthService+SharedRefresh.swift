#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKitHTTP
import LoginKitJOSE

/// The one shared refresh of the profile: started when the machine says so, bounded by its own
/// deadline, carried out under the store's lock, retried by the `RetryPolicy`, and handed to its
/// waiters once the machine no longer points at it.
extension AuthService {
    /// The sessions' refresh: through the same machine and flight as every other refresh.
    func refreshProactively(firstSeen: StoredProfile) async throws -> Credentials {
        var decision = RefreshDecision(
            advisoryWindow: configuration.advisoryWindow, mandatoryWindow: configuration.mandatoryWindow,
            kind: .any, minimumValidity: .zero, requestStart: clock.now
        )
        decision.isProactive = true
        let (epoch, action) = machine.withLock { machine -> (UInt64, AuthStateMachine.TokenAction) in
            let epoch = machine.epoch
            return (epoch, machine.tokenRequested(startedIn: epoch, verdict: .refresh))
        }
        switch action {
        case .waitForRefresh(let flight, let start):
            if start { startRefresh(flight, firstSeen: firstSeen, decision: decision, epoch: epoch) }
            return try await awaitRefresh(flight, kind: .any, startedIn: epoch).credentials
        case .serveAndRefresh(let start):
            if let start { startRefresh(start, firstSeen: firstSeen, decision: decision, epoch: epoch) }
            return firstSeen.credentials
        case .serve:
            return firstSeen.credentials
        case .loggedOut:
            throw loggedOut()
        }
    }

    /// Starts the task of the shared refresh `flight`, which the machine has just registered (and
    /// callers may already wait for); called in the same actor turn, so that ``logOut()`` and
    /// ``shutdown()`` always find the task beside the flight. The task is owned by the service:
    /// ``shutdown()`` awaits it and ``logOut()`` cancels and awaits it.
    func startRefresh(_ flight: Flight<SharedCredentials>, firstSeen: StoredProfile, decision: RefreshDecision, epoch: UInt64) {
        logger.debug("refresh started", metadata: logMetadata)
        updateDiagnostics { $0.refreshInProgress = true }
        // On the transport's executor when it has one (the curl driver thread): the refresh's jobs —
        // this actor's steps, the store's, the HTTP completion — then run there instead of queueing
        // on the global executor behind a storm of callers' first slices (docs/refresh.md). Only
        // with a store that has change stamps: its callers wait for a running refresh through the
        // machine's lock, off the actor, so that the actor's drain on that thread (which runs every
        // job queued on the actor) holds few other calls' steps; without stamps every call would.
        let executor = configuration.runsRefreshOnTransportExecutor && stamps != nil ? (api as? any PrefersTaskExecutor)?.preferredTaskExecutor : nil
        let task = Task(executorPreference: executor) {
            let outcome = await self.refreshWithDeadline(firstSeen: firstSeen, decision: decision, epoch: epoch)
            await self.finishRefresh(flight, outcome)
        }
        machine.withLock { $0.refreshStarted(task, for: flight) }
    }

    private func finishRefresh(_ flight: Flight<SharedCredentials>, _ outcome: Result<Credentials, any Error>) {
        var outcome = outcome
        // The machine lets go of the flight first: nobody joins it once its waiters are resumed.
        switch machine.withLock({ $0.refreshFinished(flight) }) {
        case .deliver:
            break
        case .loggedOut:
            outcome = .failure(LoginRequiredError(.loggedOut, profile: profileName, "the profile \"\(profileName)\" was logged out during the refresh; log in again"))
        }
        switch outcome {
        case .success: logger.debug("refresh finished", metadata: logMetadata)
        case .failure(let error): logger.warning("refresh failed", metadata: logMetadata.merging(["error": "\(error)"]) { $1 })
        }
        Telemetry.count("loginkit_refreshes_total", [("outcome", (try? outcome.get()).map { _ in "success" } ?? outcome.failureOutcome), ("profile", profileName)])
        updateDiagnostics { diagnostics in
            diagnostics.refreshInProgress = false
            switch outcome {
            case .success:
                diagnostics.serverUnreachable = false
                diagnostics.credentialsRejected = false
                diagnostics.loginRequired = false
            case .failure(let error as LoginRequiredError):
                diagnostics.loginRequired = true
                diagnostics.credentialsRejected = error.code == .credentialsRejected
            case .failure(is NetworkError), .failure(is ServerError):
                diagnostics.serverUnreachable = true
            case .failure(let error as LoginError) where error.code == .upgradeRequired:
                diagnostics.upgradeRequired = true
            case .failure:
                break
            }
        }
        // One object for every waiter: each takes a reference, not a copy of each string.
        flight.finish(with: outcome.map(SharedCredentials.init))
    }

    /// The refresh, bounded by `refreshTimeout` (the store's lock wait included: it is cancellable).
    /// When the deadline passes while the credentials first seen are still valid, they are served:
    /// a provider that hangs is a transient failure.
    private func refreshWithDeadline(firstSeen: StoredProfile, decision: RefreshDecision, epoch: UInt64) async -> Result<Credentials, any Error> {
        let clock = self.clock
        let timeout = configuration.refreshTimeout
        return await withTaskGroup(of: Result<Credentials, any Error>?.self) { group in
            group.addTask {
                do { return .success(try await self.performRefresh(firstSeen: firstSeen, decision: decision, epoch: epoch)) } catch { return .failure(error) }
            }
            group.addTask {
                do { try await clock.sleep(for: timeout) } catch { return nil }
                if let expiry = decision.kind.expiry(of: firstSeen.credentials), expiry > clock.now { return .success(firstSeen.credentials) }
                return .failure(NetworkError(.timedOut, "the token refresh took longer than \(timeout); try again"))
            }
            defer { group.cancelAll() }
            while let next = await group.next() {
                if let next { return next }
            }
            return .failure(CancellationError())
        }
    }

    /// What the locked part of a refresh decided.
    enum Outcome: Sendable {
        case refreshed(Credentials)
        case tookStored(Credentials)
        /// The provider refused the refresh token; `lostAnswerAt`: the profile's mark of an
        /// earlier refresh whose answer was lost (``lostAnswerAttribute``), when it has one.
        case rejected(lostAnswerAt: String?)
        case keptOld(Credentials)
        /// The answer to the refresh may have been lost after the provider acted on it, so the
        /// refresh token was not sent again: the error to throw, and the credentials read under
        /// the lock (served instead while they are valid).
        case answerLost(any Error, Credentials)
    }

    /// The profile attribute that marks a refresh whose answer was lost (a timeout or a dropped
    /// connection after the request left, or a refresh cancelled while it waited): the time, in
    /// seconds since 1970. A refusal of the refresh token that follows then says why it may have
    /// come; the next saved refresh removes it.
    package static let lostAnswerAttribute = "refresh_answer_lost_at"

    /// The profile attribute that marks credentials a forced refresh brought (a resource server
    /// had refused the token before, `validCredentials(rejecting:sentAt:)`): the time, in seconds
    /// since 1970. A refusal of those credentials within ``TokenRejection/quietPeriod`` of it
    /// refreshes nothing, in this process or another one sharing the store; any other refresh (one
    /// the user asked for, `refreshByRequest(replacing:heldSince:)`, too), and a login, removes it.
    package static let forcedRefreshAttribute = "forced_refresh_at"

    /// What ``unsavedRefresh`` holds: the save that failed after the last refresh.
    ///
    /// The refresh's fresh credentials are handed out from memory, but the provider has retired the
    /// refresh token the store still holds: the session ends with this process (another process,
    /// or this one after a restart, will have to log in again). `nil` again once a refresh was
    /// saved. A short-lived program (the CLI) asks after its token call and says so loudly.
    package nonisolated var unsavedRefresh: TokenStoreError? {
        machine.withLock { $0.unsavedRefreshError }
    }

    /// Under the store's lock: re-read; if another task or process already refreshed, take that;
    /// else check that the store can take the save, refresh (with retries) and save before anyone
    /// gets the new credentials.
    private func performRefresh(firstSeen: StoredProfile, decision: RefreshDecision, epoch: UInt64) async throws -> Credentials {
        var saved: StoredProfile?
        var resaved: StoredProfile?
        var heldByStore: String?
        var refusedSave = false
        let outcome: Outcome
        let savedStamp: UInt64?
        do {
            (outcome, savedStamp) = try await exclusiveAccess { transaction -> Outcome in
                guard var stored = transaction[profileName] else { throw notLoggedIn() }
                heldByStore = stored.credentials.refreshToken
                if let unsaved = machine.withLock({ $0.inPlaceOf(stored, startedIn: epoch) }) {
                    // The store still holds the refresh token an unsaved refresh retired: the
                    // unsaved profile stands in for it, and is saved now if the store can take it.
                    stored = unsaved
                    transaction[profileName] = unsaved
                    resaved = unsaved
                }
                guard decision.mustRefresh(stored: stored, firstSeen: firstSeen, now: clock.now) else {
                    return .tookStored(stored.credentials)  // someone else refreshed meanwhile
                }
                // A refresh because a resource server refused the stored token (not one the user
                // asked for): what it brings is marked, so that a refusal of that in the quiet
                // period refreshes nothing.
                let forced = decision.marksForcedRefresh(of: stored, now: clock.now)
                try checkSource(of: stored)
                if stored.credentials.refreshToken != nil {
                    // The provider retires the refresh token it is sent: a store that cannot keep
                    // the new one would end the session with this process. Nothing is sent then.
                    do {
                        try transaction.checkCanSave()
                    } catch {
                        refusedSave = true
                        throw error
                    }
                }
                try await checkGate()
                switch try await refreshRetrying(stored, heldByStore: heldByStore) {
                case .refreshed(var credentials):
                    try Self.checkSameSubject(credentials, replacing: stored.credentials)
                    credentials.issuedAt = clock.now  // received now: the APIs carry the old stamp over
                    stored.credentials = credentials
                    stored.attributes[Self.lostAnswerAttribute] = nil
                    stored.attributes[Self.forcedRefreshAttribute] = forced ? String(Int64(clock.now.timeIntervalSince1970)) : nil
                    stored.updatedAt = clock.now
                    transaction[profileName] = stored  // saved before any caller sees it (rotation-safe)
                    saved = stored
                    return .refreshed(credentials)
                case .rejected(let lostAnswerAt):
                    transaction[profileName] = nil
                    return .rejected(lostAnswerAt: lostAnswerAt)
                case .answerLost(let error, let credentials):
                    // Kept, and marked: a later refusal of this refresh token says why it may come.
                    stored.attributes[Self.lostAnswerAttribute] = String(Int64(clock.now.timeIntervalSince1970))
                    transaction[profileName] = stored
                    return .answerLost(error, credentials)
                case let other:
                    return other
                }
            }
        } catch let error as TokenStoreError {
            if let saved {
                // The refreshed credentials are what callers get, even unsaved: they are the last
                // known. The provider retired the stored refresh token, so this is said loudly.
                let retired = heldByStore
                machine.withLock { $0.refreshUnsaved(saved, replacing: retired, error: error, startedIn: epoch) }
                logger.error(
                    "the refreshed credentials could not be saved; serving them from memory, and the session ends with this process",
                    metadata: logMetadata.merging(["error": "\(error)"]) { $1 })
                eventBroadcaster.emit(.storeFailed(error))  // the caller still gets the fresh token
                return saved.credentials
            }
            let stillValid = decision.kind.expiry(of: firstSeen.credentials).map { $0 > clock.now } ?? false
            if refusedSave, stillValid {
                logger.warning(
                    "the store cannot take a save; no refresh was sent, serving the still-valid credentials",
                    metadata: logMetadata.merging(["error": "\(error)"]) { $1 })
                eventBroadcaster.emit(.storeFailed(error))
                return firstSeen.credentials
            }
            if [.lockFailed, .lockTimedOut].contains(error.code), stillValid {
                logger.warning("the store's lock could not be taken; serving the still-valid credentials", metadata: logMetadata.merging(["error": "\(error)"]) { $1 })
                return firstSeen.credentials
            }
            throw error
        }
        switch outcome {
        case .refreshed(let credentials):
            // The last known profile; and with the stamp the save produced, the calls that come
            // after it are served what it saved from the cached path: a storm's late callers do not
            // read the store again.
            if let saved {
                let held = HeldProfile(saved)
                machine.withLock { $0.refreshSaved(held, stamp: savedStamp, startedIn: epoch) }
            }
            logger.debug("refreshed", metadata: logMetadata)
            eventBroadcaster.emit(.refreshed)
            return credentials
        case .tookStored(let credentials):
            if let resaved {
                // An unsaved refresh's profile, saved now.
                let held = HeldProfile(resaved)
                machine.withLock { $0.refreshSaved(held, stamp: savedStamp, startedIn: epoch) }
            }
            logger.debug("took the credentials another task or process had just refreshed", metadata: logMetadata)
            return credentials
        case .keptOld(let credentials):
            logger.warning("refreshing keeps failing; serving the old credentials while they are valid", metadata: logMetadata)
            return credentials
        case .answerLost(let error, let credentials):
            if !(error is CancellationError), let expiry = decision.kind.expiry(of: credentials), expiry > clock.now {
                logger.warning(
                    "the refresh's answer was lost and its refresh token is not sent again; serving the still-valid credentials",
                    metadata: logMetadata.merging(["error": "\(error)"]) { $1 })
                return credentials
            }
            logger.warning("the refresh's answer was lost; its refresh token is not sent again", metadata: logMetadata.merging(["error": "\(error)"]) { $1 })
            throw error
        case .rejected(let lostAnswerAt):
            logger.notice("the provider rejected the refresh token; the profile needs a new login", metadata: logMetadata)
            eventBroadcaster.emit(.credentialsRejected)
            throw LoginRequiredError(.credentialsRejected, profile: profileName, Self.rejectionMessage(lostAnswerAt: lostAnswerAt, now: clock.now))
        }
    }

    /// Why the stored credentials were refused, and what to do. After a refresh whose answer was
    /// lost (the profile's mark), the refusal most likely comes from it: the provider acted on that
    /// request, replaced the refresh token, and now refuses the one the store kept.
    static func rejectionMessage(lostAnswerAt mark: String?, now: Date) -> String {
        guard let mark, let seconds = Int64(mark) else {
            return "the provider rejected the stored credentials; log in again"
        }
        let ago = max(0, Int64(now.timeIntervalSince1970) - seconds)
        return "the provider rejected the stored refresh token: the answer to an earlier refresh was lost \(ago) s ago (a timeout, a dropped connection, or a process stopped or interrupted while it waited), after which the provider had most likely replaced that token; log in again"
    }

    /// Whether the provider may have received the request that failed with `error`, and acted on
    /// it: a timeout or a lost connection, unless the transport knows that nothing was sent.
    static func mayHaveReachedProvider(_ error: NetworkError) -> Bool {
        (error.code == .timedOut || error.code == .connectionLost) && error.requestSent != false
    }

    /// `error`, saying that the refresh's answer was lost and its refresh token not sent again.
    static func lostAnswer(_ error: NetworkError) -> NetworkError {
        var lost = NetworkError(
            error.code,
            "the answer to the token refresh was lost (\(error.message)); the provider may have acted on it and replaced the refresh token, so it was not sent again. Try again; if the provider then refuses it, log in again",
            transportCode: error.transportCode, underlying: error)
        lost.requestSent = error.requestSent
        return lost
    }

    /// The store's exclusive access to this profile; with a store that has change stamps, also the
    /// stamp that vouches for what `body` left in it (``TokenStoreChangeStamp``).
    private func exclusiveAccess<T>(_ body: (inout TokenStoreTransaction) async throws -> T) async throws -> (T, UInt64?) {
        if let stamps { return try await stamps.withExclusiveAccessStamped(to: profileName, body) }
        return (try await store.withExclusiveAccess(to: profileName, body), nil)
    }

    /// Whether credentials from `source` belong to the provider and client this service's API
    /// talks to: only then may their tokens be sent to it (refresh, revocation).
    func isIssuedHere(_ source: CredentialSource) -> Bool {
        api.source.isSameProvider(as: source)
    }

    /// "oauth2 https://issuer (client cli)", escaped for messages.
    static func describe(_ source: CredentialSource) -> String {
        "\(source.kind.rawValue) \(printableExcerpt(source.endpoint, limit: 200)) (client \(printableExcerpt(source.clientID ?? "none", limit: 100)))"
    }

    /// Refuses to send a refresh token to another provider or client than the one that issued it.
    private func checkSource(of stored: StoredProfile) throws {
        guard !isIssuedHere(stored.source) else { return }
        throw LoginRequiredError(
            .sourceMismatch, profile: profileName,
            "profile \"\(profileName)\" was issued by \(Self.describe(stored.source)), but this service is configured for \(Self.describe(api.source)); nothing was sent. Log in again, or use the configuration the profile was logged in with")
    }

    /// OpenID Connect Core §12.2: a refreshed ID token names the same issuer, subject and audience.
    static func checkSameSubject(_ new: Credentials, replacing old: Credentials) throws(TokenVerificationError) {
        guard let newToken = new.idToken, let oldToken = old.idToken, newToken != oldToken else { return }
        let newClaims = try newToken.unverifiedClaims()
        guard let oldClaims = try? oldToken.unverifiedClaims() else { return }
        guard newClaims.issuer == oldClaims.issuer, newClaims.subject == oldClaims.subject,
            Set(newClaims.audience) == Set(oldClaims.audience)
        else {
            throw TokenVerificationError(
                .subjectChanged, "the refreshed ID token names another issuer, subject or audience than the one it replaces; nothing was saved")
        }
    }

    /// Calls the API, retrying what the configuration's `RetryPolicy` says (transient failures,
    /// with jittered exponential backoff that honours `Retry-After`, bounded). A rejected refresh
    /// token is re-read from the store first: another process may have rotated it.
    ///
    /// A refresh token is never sent again after a failure that may have reached the provider (a
    /// timeout or a lost connection once the request had left, ``mayHaveReachedProvider(_:)``): a
    /// provider that rotates refresh tokens may have acted on it, and one with reuse detection
    /// revokes the whole family when it sees the retired token again. The store is re-read (another
    /// process may have rotated it: then theirs is taken); otherwise the answer is lost
    /// (`.answerLost`: the profile is kept and marked, and the caller is told). So is a refresh
    /// cancelled while it waited (the refresh's deadline, a logout).
    ///
    /// `heldByStore` is the refresh token the store holds (it differs from `stored`'s when an
    /// unsaved refresh stands in): a re-read store holding another one was rotated elsewhere.
    private func refreshRetrying(_ stored: StoredProfile, heldByStore: String?) async throws -> Outcome {
        let policy = configuration.retryPolicy
        var attempt = 0
        while true {
            do {
                // A service's own login (client credentials, JWT bearer): the grant again, which
                // asks an identity source again for its assertion.
                if stored.attributes["grant"].map({ StoredProfile.clientGrants.contains($0) }) ?? false, stored.credentials.refreshToken == nil,
                    let api = api as? any ClientCredentialsAPI
                {
                    return .refreshed(try await api.clientCredentials(for: TokenTarget(attributes: stored.attributes)))
                }
                return .refreshed(try await api.refresh(stored.credentials))
            } catch let error as LoginError where error.code == .refreshTokenRejected {
                // A failed read is not "not rotated": it throws, and the profile stays.
                if let current = try await store.profile(named: profileName),
                    current.credentials.refreshToken != heldByStore
                {
                    return .tookStored(current.credentials)  // rotated elsewhere: theirs is the live one
                }
                return .rejected(lostAnswerAt: stored.attributes[Self.lostAnswerAttribute])
            } catch let error as LoginRequiredError {
                throw LoginRequiredError(error.code, profile: profileName, error.message, underlying: error.underlying, acrValues: error.acrValues, maxAge: error.maxAge)
            } catch let error as NetworkError where stored.credentials.refreshToken != nil && Self.mayHaveReachedProvider(error) {
                if let current = try await store.profile(named: profileName),
                    current.credentials.refreshToken != heldByStore
                {
                    return .tookStored(current.credentials)  // rotated elsewhere: theirs is the live one
                }
                return .answerLost(Self.lostAnswer(error), stored.credentials)
            } catch is CancellationError where stored.credentials.refreshToken != nil {
                return .answerLost(CancellationError(), stored.credentials)
            } catch {
                let decision = policy.decision(
                    after: error, attempt: attempt, credentialsStillValidUntil: stored.credentials.expiresAt, now: clock.now,
                    random: Double.random(in: 0...1))
                switch decision {
                case .retry(let wait):
                    try await clock.sleep(for: wait)
                    attempt += 1
                case .keepOld:
                    return .keptOld(stored.credentials)  // still valid: serve it rather than fail
                case .fail:
                    throw error
                }
            }
        }
    }
}
