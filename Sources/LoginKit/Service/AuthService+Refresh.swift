#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKitHTTP
import LoginKitJOSE

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
    ///   failing and the old credentials had expired, `UpgradeRequiredError`,
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

    /// The cached path first (no actor hop: the profile served last, while the store's change
    /// stamp is the one it was read under and the decision is to serve it; or, when it needs a
    /// refresh and the shared one is running, the wait for that refresh), else the actor's step,
    /// and when that says wait, the wait for the shared refresh, also off the actor.
    nonisolated(nonsending) func valid(_ kind: TokenKind, minimumValidity: Duration) async throws -> SharedCredentials {
        let decision = RefreshDecision(
            advisoryWindow: configuration.advisoryWindow, mandatoryWindow: configuration.mandatoryWindow,
            kind: kind, minimumValidity: minimumValidity, requestStart: clock.now
        )
        var stamp = stamps?.changeStamp()
        var now = decision.requestStart
        // The epoch this request began in: after waiting for another call's read, nothing from a
        // later epoch (a logout and a new login meanwhile) may be handed to it.
        let startEpoch = currentEpoch
        // At most two waits for another call's store read, then this call reads itself: bounded.
        var joinedReads = 0
        while true {
            // The remembered profile and the running refresh, in one acquisition of the lock; the
            // decision on the profile's dates alone (no copy of its strings).
            if let current = stamp, let cached = served.withLock({ $0.cached(ifStamp: current) }) {
                let verdict = decision.verdict(for: cached.remembered.timing, now: now)
                if verdict == .serve, decision.grantsTheAskedValidity(cached.remembered.timing) {
                    return cached.remembered.credentials
                }
                // A storm's waiters: the profile needs a refresh and the shared one runs. The actor's
                // step would read the store again (two hops and a stat each, serialised) to answer
                // "wait for it"; they wait for it at once.
                if verdict == .refresh, let running = cached.refresh {
                    sharedRefreshWaits.increment()
                    return try await awaitRefresh(running.flight, kind: kind, startedIn: running.epoch)
                }
            }
            // Another call's step is reading the store under this same stamp: wait for it off the
            // actor, then look at what it remembered (and the refresh it may have started).
            if joinedReads < 2, let current = stamp, let reading = served.withLock({ $0.runningRead(ifStamp: current) }) {
                joinedReads += 1
                try await reading.wait()
                try afterJoin(startEpoch, stamp: &stamp, now: &now)
                continue
            }
            switch try await step(kind, decision, stamp: stamp, mayJoinRead: joinedReads < 2, startedIn: joinedReads > 0 ? startEpoch : nil) {
            case .serve(let credentials):
                return credentials
            case .wait(let flight, let epoch):
                sharedRefreshWaits.increment()
                return try await awaitRefresh(flight, kind: kind, startedIn: epoch)
            case .joinRead(let reading):
                joinedReads += 1
                try await reading.wait()
                try afterJoin(startEpoch, stamp: &stamp, now: &now)
            }
        }
    }

    /// After waiting for another call's store read: a logout since this request began ends it
    /// (what comes next may be a new login's), and the store's stamp and the time are taken again
    /// (the wait may have lasted: a keyring look-up, another process's change).
    nonisolated private func afterJoin(_ startEpoch: UInt64, stamp: inout UInt64?, now: inout Date) throws {
        guard mayHandOut(startedIn: startEpoch) else { throw loggedOut() }
        stamp = stamps?.changeStamp()
        now = clock.now
    }

    enum TokenStep: Sendable {
        case serve(SharedCredentials)
        case wait(Flight<SharedCredentials>, startedIn: UInt64)
        /// Another step reads the store under the same stamp: wait for it, then look again.
        case joinRead(Flight<Void>)
    }

    /// What the actor decides for a token call: serve what the store holds (remembering it for the
    /// cached path), or wait for the one shared refresh (starting it when none runs).
    private func step(
        _ kind: TokenKind, _ decision: RefreshDecision, stamp: UInt64?, mayJoinRead: Bool, startedIn startEpoch: UInt64? = nil
    ) async throws -> TokenStep {
        let epoch = machine.epoch
        // A request that waited for another call's read before coming here began in `startEpoch`.
        if let startEpoch, startEpoch != epoch { throw loggedOut() }
        if mayJoinRead, let stamp, let reading = served.withLock({ $0.runningRead(ifStamp: stamp) }) {
            return .joinRead(reading)
        }
        // This step reads the store: calls under the same stamp wait for it (off the actor) until
        // it has remembered what it read and started the refresh it needs — `defer` ends it last.
        let reading = Flight<Void>()
        if let stamp { served.withLock { $0.readStarted(reading, stamp: stamp, epoch: epoch) } }
        defer {
            served.withLock { $0.readEnded(reading) }
            reading.finish(with: .success(()))
        }
        let profile: StoredProfile
        do {
            guard let stored = try await store.profile(named: profileName) else {
                if machine.epoch == epoch { lastKnownProfile = nil }
                updateDiagnostics { $0.loginRequired = true }
                throw notLoggedIn()
            }
            profile = stored
        } catch let error as TokenStoreError where error.code == .unavailable {
            // The store's database is unreachable: credentials this service already had are served
            // while they need no refresh; a refresh needs the store's lock, so it waits.
            guard machine.mayHandOut(startedIn: epoch), let known = lastKnownProfile, decision.verdict(for: known, now: clock.now) != .refresh else {
                throw error
            }
            logger.warning("the store is unavailable; serving the credentials held in memory", metadata: logMetadata.merging(["error": "\(error)"]) { $1 })
            return .serve(SharedCredentials(known.credentials))
        }
        let verdict = decision.verdict(for: profile, now: clock.now)
        reportIfUngrantable(decision, profile)
        switch machine.tokenRequested(startedIn: epoch, verdict: verdict) {
        case .serve:
            lastKnownProfile = profile
            if let stamp { served.withLock { $0.remember(profile, stamp: stamp, startedIn: epoch) } }
            return .serve(SharedCredentials(profile.credentials))
        case .serveAndRefresh(let start):
            lastKnownProfile = profile
            if start { startRefresh(firstSeen: profile, decision: decision, epoch: epoch) }
            return .serve(SharedCredentials(profile.credentials))
        case .waitForRefresh(let start):
            if start { startRefresh(firstSeen: profile, decision: decision, epoch: epoch) }
            guard let flight = currentRefresh?.flight else { throw notLoggedIn() }
            // Remembered although it is not served: the calls that follow under the same stamp see
            // that it needs a refresh, and wait for this one without coming here.
            if let stamp { served.withLock { $0.remember(profile, stamp: stamp, startedIn: epoch) } }
            return .wait(flight, startedIn: epoch)
        case .loggedOut:
            throw loggedOut()
        }
    }

    /// Waits for the shared refresh, then checks again that what it brought may be handed out: a
    /// logout may have begun meanwhile (checked against the machine's mirror, so that the waiters
    /// of a storm go on together instead of one actor turn each), and a refresh may have brought no
    /// new token of the kind asked (no new ID token) or one that has already expired.
    nonisolated(nonsending) private func awaitRefresh(_ flight: Flight<SharedCredentials>, kind: TokenKind, startedIn epoch: UInt64) async throws -> SharedCredentials {
        let shared = try await flight.wait()
        guard mayHandOut(startedIn: epoch) else { throw loggedOut() }
        if let expiry = shared.expiry(of: kind), expiry <= clock.now {
            throw LoginRequiredError(
                .cannotRefresh, profile: profileName,
                kind == .idToken
                    ? "the provider's refresh brought no new ID token and the stored one has expired; log in again"
                    : "the provider's refresh brought credentials that have already expired; log in again")
        }
        return shared
    }

    nonisolated func loggedOut() -> LoginRequiredError {
        LoginRequiredError(.loggedOut, profile: profileName, "the profile \"\(profileName)\" was logged out; log in again")
    }

    /// The sessions' refresh: through the same machine and flight as every other refresh.
    func refreshProactively(firstSeen: StoredProfile) async throws -> Credentials {
        var decision = RefreshDecision(
            advisoryWindow: configuration.advisoryWindow, mandatoryWindow: configuration.mandatoryWindow,
            kind: .any, minimumValidity: .zero, requestStart: clock.now
        )
        decision.isProactive = true
        let epoch = machine.epoch
        switch machine.tokenRequested(startedIn: epoch, verdict: .refresh) {
        case .waitForRefresh(let start):
            if start { startRefresh(firstSeen: firstSeen, decision: decision, epoch: epoch) }
            guard let flight = currentRefresh?.flight else { throw notLoggedIn() }
            return try await awaitRefresh(flight, kind: .any, startedIn: epoch).credentials
        case .loggedOut:
            throw loggedOut()
        case .serve, .serveAndRefresh:
            return firstSeen.credentials
        }
    }

    nonisolated func notLoggedIn() -> LoginRequiredError {
        LoginRequiredError(.notLoggedIn, profile: profileName, "not logged in (profile \"\(profileName)\"); log in first")
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

    /// The running shared refresh, its task and the epoch it started in.
    struct RunningRefresh: Sendable {
        let flight: Flight<SharedCredentials>
        let task: Task<Void, Never>
    }

    /// Starts the shared refresh (the machine said so). Its task is owned by the service:
    /// ``shutdown()`` awaits it and ``logOut()`` cancels and awaits it.
    private func startRefresh(firstSeen: StoredProfile, decision: RefreshDecision, epoch: UInt64) {
        let flight = Flight<SharedCredentials>()
        logger.debug("refresh started", metadata: logMetadata)
        updateDiagnostics { $0.refreshInProgress = true }
        // On the transport's executor when it has one (the curl driver thread): the refresh's jobs —
        // this actor's steps, the store's, the HTTP completion — then run there instead of queueing
        // on the global executor behind a storm of callers' first slices (docs/refresh.md). Only
        // with a store that has change stamps: its callers wait for a running refresh through the
        // mirror, off the actor, so that the actor's drain on that thread (which runs every job
        // queued on the actor) holds few other calls' steps; without stamps every call would.
        let executor = configuration.runsRefreshOnTransportExecutor && stamps != nil ? api.preferredTaskExecutor : nil
        let task = Task(executorPreference: executor) {
            let outcome = await self.refreshWithDeadline(firstSeen: firstSeen, decision: decision, epoch: epoch)
            await self.finishRefresh(flight, outcome, startedIn: epoch)
        }
        currentRefresh = RunningRefresh(flight: flight, task: task)
        served.withLock { $0.refreshStarted(flight, epoch: epoch) }
    }

    private func finishRefresh(_ flight: Flight<SharedCredentials>, _ outcome: Result<Credentials, any Error>, startedIn epoch: UInt64) {
        if currentRefresh?.flight === flight { currentRefresh = nil }
        served.withLock { $0.refreshEnded(flight) }
        var outcome = outcome
        switch machine.refreshFinished(startedIn: epoch) {
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
            case .failure(is UpgradeRequiredError):
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
        case rejected
        case keptOld(Credentials)
    }

    /// Under the store's lock: re-read; if another task or process already refreshed, take that;
    /// else refresh (with retries) and save before anyone gets the new credentials.
    private func performRefresh(firstSeen: StoredProfile, decision: RefreshDecision, epoch: UInt64) async throws -> Credentials {
        var refreshed: Credentials?
        var saved: StoredProfile?
        let outcome: Outcome
        let savedStamp: UInt64?
        do {
            (outcome, savedStamp) = try await exclusiveAccess { transaction -> Outcome in
                guard var stored = transaction[profileName] else { throw notLoggedIn() }
                guard decision.mustRefresh(stored: stored, firstSeen: firstSeen, now: clock.now) else {
                    return .tookStored(stored.credentials)  // someone else refreshed meanwhile
                }
                try checkSource(of: stored)
                try await checkGate()
                switch try await refreshRetrying(stored) {
                case .refreshed(var credentials):
                    try Self.checkSameSubject(credentials, replacing: stored.credentials)
                    credentials.issuedAt = clock.now  // received now: the APIs carry the old stamp over
                    refreshed = credentials
                    stored.credentials = credentials
                    stored.updatedAt = clock.now
                    transaction[profileName] = stored  // saved before any caller sees it (rotation-safe)
                    saved = stored
                    if machine.mayHandOut(startedIn: epoch) { lastKnownProfile = stored }
                    return .refreshed(credentials)
                case .rejected:
                    transaction[profileName] = nil
                    return .rejected
                case let other:
                    return other
                }
            }
        } catch let error as TokenStoreError {
            if let refreshed {
                logger.error("the refreshed credentials could not be saved; serving them anyway", metadata: logMetadata.merging(["error": "\(error)"]) { $1 })
                eventBroadcaster.emit(.storeFailed(error))  // the caller still gets the fresh token
                return refreshed
            }
            if [.lockFailed, .lockTimedOut].contains(error.code), let expiry = decision.kind.expiry(of: firstSeen.credentials), expiry > clock.now {
                logger.warning("the store's lock could not be taken; serving the still-valid credentials", metadata: logMetadata.merging(["error": "\(error)"]) { $1 })
                return firstSeen.credentials
            }
            throw error
        }
        switch outcome {
        case .refreshed(let credentials):
            // Calls that come after the save, under the stamp it produced, are served what it
            // saved from the cached path: a storm's late callers do not read the store again.
            if let saved, let savedStamp {
                served.withLock { $0.remember(saved, stamp: savedStamp, startedIn: epoch) }
            }
            logger.debug("refreshed", metadata: logMetadata)
            eventBroadcaster.emit(.refreshed)
            return credentials
        case .tookStored(let credentials):
            logger.debug("took the credentials another task or process had just refreshed", metadata: logMetadata)
            return credentials
        case .keptOld(let credentials):
            logger.warning("refreshing keeps failing; serving the old credentials while they are valid", metadata: logMetadata)
            return credentials
        case .rejected:
            logger.notice("the provider rejected the refresh token; the profile needs a new login", metadata: logMetadata)
            eventBroadcaster.emit(.credentialsRejected)
            throw LoginRequiredError(.credentialsRejected, profile: profileName, "the provider rejected the stored credentials; log in again")
        }
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

    /// Calls the API, retrying transient failures with jittered exponential backoff (honouring
    /// `Retry-After`), bounded. A rejected refresh token is re-read from the store first: another
    /// process may have rotated it.
    private func refreshRetrying(_ stored: StoredProfile) async throws -> Outcome {
        var attempt = 0
        while true {
            do {
                if stored.attributes["grant"] == "client_credentials", stored.credentials.refreshToken == nil,
                    let api = api as? any ClientCredentialsAPI
                {
                    return .refreshed(try await api.clientCredentials(for: TokenTarget(attributes: stored.attributes)))
                }
                return .refreshed(try await api.refresh(stored.credentials))
            } catch let error as LoginError where error.code == .refreshTokenRejected {
                // A failed read is not "not rotated": it throws, and the profile stays.
                if let current = try await store.profile(named: profileName),
                    current.credentials.refreshToken != stored.credentials.refreshToken
                {
                    return .tookStored(current.credentials)  // rotated elsewhere: theirs is the live one
                }
                return .rejected
            } catch let error as LoginRequiredError {
                throw LoginRequiredError(error.code, profile: profileName, error.message, underlying: error.underlying)
            } catch {
                guard Self.isTransient(error), attempt < configuration.maximumRetries else {
                    if Self.isTransient(error), let expiry = stored.credentials.expiresAt, expiry > clock.now {
                        return .keptOld(stored.credentials)  // still valid: serve it rather than fail
                    }
                    throw error
                }
                try await clock.sleep(for: backoff(attempt: attempt, retryAfter: (error as? ServerError)?.retryAfter))
                attempt += 1
            }
        }
    }

    static func isTransient(_ error: any Error) -> Bool {
        if let error = error as? ServerError { return error.isTransient }
        if let error = error as? NetworkError {
            return [.connectFailed, .timedOut, .connectionLost, .hostNotFound].contains(error.code)
        }
        return false
    }

    /// Full jitter: a random wait in [0, min(max, initial × 2^attempt)]; `Retry-After` when longer.
    func backoff(attempt: Int, retryAfter: Duration?) -> Duration {
        let ceiling = min(configuration.maximumBackoff.timeInterval, configuration.initialBackoff.timeInterval * Double(1 << min(attempt, 20)))
        let jittered = Double.random(in: 0...max(ceiling, 0.001))
        let wait = max(jittered, retryAfter?.timeInterval ?? 0)
        return Duration(timeInterval: min(wait, configuration.maximumBackoff.timeInterval))
    }
}
