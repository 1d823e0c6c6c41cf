#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKitHTTP

extension AuthService {
    /// Which expiry a caller cares about.
    enum TokenKind: Sendable {
        case any, idToken, accessToken

        func expiry(of credentials: Credentials) -> Date? {
            switch self {
            case .any, .accessToken: credentials.expiresAt
            case .idToken: credentials.idTokenExpiresAt ?? credentials.expiresAt
            }
        }
    }

    /// Credentials valid for at least `minimumValidity` (and beyond the mandatory window),
    /// refreshing them — once, shared by every caller and process — when needed.
    ///
    /// A caller whose wait ends with credentials someone else just refreshed takes them even if
    /// they are shorter-lived than `minimumValidity`: one refresh per expiry, never a loop.
    /// Cancelling the caller ends only its own wait.
    ///
    /// - Throws: `LoginRequiredError` (no profile, or the refresh token was rejected),
    ///   `ServerError`/`NetworkError` when refreshing kept failing and the old credentials had
    ///   expired, `UpgradeRequiredError`, `TokenVerificationError`, `TokenStoreError`.
    public func validCredentials(minimumValidity: Duration = .zero) async throws -> Credentials {
        try await valid(.any, minimumValidity: minimumValidity)
    }

    /// A valid ID token. See ``validCredentials(minimumValidity:)``.
    ///
    /// - Throws: also `LoginRequiredError` `.noIDToken` when the provider issued no ID token (use
    ///   ``validAccessToken()``).
    public func validIDToken() async throws -> IDToken {
        let credentials = try await valid(.idToken, minimumValidity: .zero)
        guard let idToken = credentials.idToken else {
            throw LoginRequiredError(.noIDToken, profile: profileName, "the provider issued no ID token for this profile; use the access token")
        }
        return idToken
    }

    /// A valid access token. See ``validCredentials(minimumValidity:)``.
    public func validAccessToken() async throws -> String {
        let credentials = try await valid(.accessToken, minimumValidity: .zero)
        guard let accessToken = credentials.accessToken else {
            throw LoginRequiredError(.cannotRefresh, profile: profileName, "this profile has no access token")
        }
        return accessToken
    }

    func valid(_ kind: TokenKind, minimumValidity: Duration) async throws -> Credentials {
        let profile: StoredProfile
        do {
            guard let stored = try await store.profile(named: profileName) else {
                lastKnownProfile = nil
                updateDiagnostics { $0.loginRequired = true }
                throw LoginRequiredError(.notLoggedIn, profile: profileName, "not logged in (profile \"\(profileName)\"); log in first")
            }
            profile = stored
            lastKnownProfile = stored
        } catch let error as TokenStoreError where error.code == .unavailable {
            // The store's database is unreachable: credentials this service already had are served
            // until they enter the mandatory window; a refresh needs the store's lock, so it waits.
            guard let known = lastKnownProfile, freshness(of: known, kind, minimumValidity: minimumValidity) != .mustRefresh else { throw error }
            logger.warning("the store is unavailable; serving the credentials held in memory", metadata: ["profile": "\(profileName)", "error": "\(error)"])
            return known.credentials
        }
        switch freshness(of: profile, kind, minimumValidity: minimumValidity) {
        case .fresh:
            return profile.credentials
        case .advisory:
            _ = startRefresh(trigger: profile.credentials, kind: kind)  // refresh in the background
            return profile.credentials
        case .mustRefresh:
            return try await startRefresh(trigger: profile.credentials, kind: kind).wait()
        }
    }

    enum Freshness { case fresh, advisory, mustRefresh }

    /// Where `profile`'s credentials stand against the windows. Windows never exceed a share of the
    /// token's lifetime, so that short-lived tokens are not refreshed the moment they arrive:
    /// advisory ≤ ½, mandatory ≤ ¼ of the lifetime.
    func freshness(of profile: StoredProfile, _ kind: TokenKind, minimumValidity: Duration) -> Freshness {
        guard let expiry = kind.expiry(of: profile.credentials) else { return .fresh }  // never expires
        let remaining = expiry.timeIntervalSince(clock.now)
        let lifetime = max(0, expiry.timeIntervalSince(profile.updatedAt))
        let mandatory = min(configuration.mandatoryWindow.timeInterval, lifetime / 4)
        let advisory = min(configuration.advisoryWindow.timeInterval, lifetime / 2)
        let mustHave = max(minimumValidity.timeInterval, mandatory)
        if remaining > max(mustHave, advisory) { return .fresh }
        return remaining > mustHave ? .advisory : .mustRefresh
    }

    /// The shared refresh, started if none is running.
    func startRefresh(trigger: Credentials, kind: TokenKind) -> SharedRefresh {
        if let refreshInFlight { return refreshInFlight }
        let flight = SharedRefresh()
        refreshInFlight = flight
        logger.debug("refresh started", metadata: ["profile": "\(profileName)"])
        updateDiagnostics { $0.refreshInProgress = true }
        Task {
            let result = await self.refreshWithDeadline(trigger: trigger, kind: kind)
            self.finishRefresh(flight, result)
        }
        return flight
    }

    private func finishRefresh(_ flight: SharedRefresh, _ result: Result<Credentials, any Error>) {
        if refreshInFlight === flight { refreshInFlight = nil }
        switch result {
        case .success: logger.debug("refresh finished", metadata: ["profile": "\(profileName)"])
        case .failure(let error): logger.warning("refresh failed", metadata: ["profile": "\(profileName)", "error": "\(error)"])
        }
        updateDiagnostics { diagnostics in
            diagnostics.refreshInProgress = false
            switch result {
            case .success:
                diagnostics.serverUnreachable = false
                diagnostics.credentialsRejected = false
                diagnostics.loginRequired = false
            case .failure(let error as LoginRequiredError):
                diagnostics.loginRequired = true
                diagnostics.credentialsRejected = error.reason == .credentialsRejected
            case .failure(is NetworkError), .failure(is ServerError):
                diagnostics.serverUnreachable = true
            case .failure(is UpgradeRequiredError):
                diagnostics.upgradeRequired = true
            case .failure:
                break
            }
        }
        flight.finish(with: result)
    }

    private func refreshWithDeadline(trigger: Credentials, kind: TokenKind) async -> Result<Credentials, any Error> {
        let clock = self.clock
        let timeout = configuration.refreshTimeout
        return await withTaskGroup(of: Result<Credentials, any Error>?.self) { group in
            group.addTask {
                do { return .success(try await self.performRefresh(trigger: trigger, kind: kind)) } catch { return .failure(error) }
            }
            group.addTask {
                do { try await clock.sleep(for: timeout) } catch { return nil }
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
    private enum Outcome: Sendable {
        case refreshed(Credentials)
        case tookStored(Credentials)
        case rejected
        case keptOld(Credentials)
    }

    /// Under the store's lock: re-read; if another task or process already refreshed, take that;
    /// else refresh (with retries) and save before anyone gets the new credentials.
    private func performRefresh(trigger: Credentials, kind: TokenKind) async throws -> Credentials {
        var refreshed: Credentials?
        var refreshedProfile: StoredProfile?
        defer { if let refreshedProfile { lastKnownProfile = refreshedProfile } }
        let outcome: Outcome
        do {
            outcome = try await store.withExclusiveAccess(to: profileName) { transaction -> Outcome in
                guard var stored = transaction[profileName] else {
                    throw LoginRequiredError(.notLoggedIn, profile: profileName, "not logged in (profile \"\(profileName)\"); log in first")
                }
                if stored.credentials != trigger, let expiry = kind.expiry(of: stored.credentials), expiry > clock.now {
                    return .tookStored(stored.credentials)  // someone else refreshed meanwhile
                }
                try await checkGate()
                switch try await refreshRetrying(stored) {
                case .refreshed(let credentials):
                    refreshed = credentials
                    stored.credentials = credentials
                    stored.updatedAt = clock.now
                    transaction[profileName] = stored  // saved before any caller sees it (rotation-safe)
                    refreshedProfile = stored
                    return .refreshed(credentials)
                case .rejected:
                    transaction[profileName] = nil
                    return .rejected
                case let other:
                    return other
                }
            }
        } catch let error as TokenStoreError {
            guard let refreshed else { throw error }
            logger.error("the refreshed credentials could not be saved; serving them anyway", metadata: ["profile": "\(profileName)", "error": "\(error)"])
            eventBroadcaster.emit(.storeFailed(error))  // the caller still gets the fresh token
            return refreshed
        }
        switch outcome {
        case .refreshed(let credentials):
            logger.debug("refreshed", metadata: ["profile": "\(profileName)"])
            eventBroadcaster.emit(.refreshed)
            return credentials
        case .tookStored(let credentials):
            logger.debug("took the credentials another task or process had just refreshed", metadata: ["profile": "\(profileName)"])
            return credentials
        case .keptOld(let credentials):
            logger.warning("refreshing keeps failing; serving the old credentials while they are valid", metadata: ["profile": "\(profileName)"])
            return credentials
        case .rejected:
            logger.notice("the provider rejected the refresh token; the profile needs a new login", metadata: ["profile": "\(profileName)"])
            eventBroadcaster.emit(.credentialsRejected)
            throw LoginRequiredError(.credentialsRejected, profile: profileName, "the provider rejected the stored credentials; log in again")
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
                    return .refreshed(try await api.clientCredentials(scope: stored.attributes["scope"]))
                }
                return .refreshed(try await api.refresh(stored.credentials))
            } catch let error as LoginError where error.code == .refreshTokenRejected {
                if let current = try? await store.profile(named: profileName),
                    current.credentials.refreshToken != stored.credentials.refreshToken
                {
                    return .tookStored(current.credentials)  // rotated elsewhere: theirs is the live one
                }
                return .rejected
            } catch let error as LoginRequiredError {
                throw LoginRequiredError(error.reason, profile: profileName, error.message)
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
