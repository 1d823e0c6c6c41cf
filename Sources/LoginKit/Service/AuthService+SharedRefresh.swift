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
        case rejected
        case keptOld(Credentials)
    }

    /// Under the store's lock: re-read; if another task or process already refreshed, take that;
    /// else refresh (with retries) and save before anyone gets the new credentials.
    private func performRefresh(firstSeen: StoredProfile, decision: RefreshDecision, epoch: UInt64) async throws -> Credentials {
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
                    stored.credentials = credentials
                    stored.updatedAt = clock.now
                    transaction[profileName] = stored  // saved before any caller sees it (rotation-safe)
                    saved = stored
                    return .refreshed(credentials)
                case .rejected:
                    transaction[profileName] = nil
                    return .rejected
                case let other:
                    return other
                }
            }
        } catch let error as TokenStoreError {
            if let saved {
                // The refreshed credentials are what callers get, even unsaved: they are the last known.
                let held = HeldProfile(saved)
                machine.withLock { $0.refreshSaved(held, stamp: nil, startedIn: epoch) }
                logger.error("the refreshed credentials could not be saved; serving them anyway", metadata: logMetadata.merging(["error": "\(error)"]) { $1 })
                eventBroadcaster.emit(.storeFailed(error))  // the caller still gets the fresh token
                return saved.credentials
            }
            if [.lockFailed, .lockTimedOut].contains(error.code), let expiry = decision.kind.expiry(of: firstSeen.credentials), expiry > clock.now {
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

    /// Calls the API, retrying what the configuration's `RetryPolicy` says (transient failures,
    /// with jittered exponential backoff that honours `Retry-After`, bounded). A rejected refresh
    /// token is re-read from the store first: another process may have rotated it.
    private func refreshRetrying(_ stored: StoredProfile) async throws -> Outcome {
        let policy = configuration.retryPolicy
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
