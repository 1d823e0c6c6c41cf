#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension AuthService {
    /// Declares `goal` for as long as the returned session is held; see ``AuthSession``.
    public func session(goal: AuthSession.Goal = AuthSession.Goal()) -> AuthSession {
        let id = nextSessionID
        nextSessionID += 1
        sessionGoals[id] = goal
        let stream = diagnosticsBroadcaster.subscribe(initial: diagnostics)
        let session = AuthSession(id: id, goal: goal, diagnostics: stream, service: self)
        restartProactiveRefresh()
        background.spawn { await self.evaluateGoal() }
        return session
    }

    /// The strictest goal of the sessions held, or `nil` when none is.
    var combinedGoal: AuthSession.Goal? {
        sessionGoals.values.reduce(nil) { partial, goal in partial?.combined(with: goal) ?? goal }
    }

    func endSession(_ id: UInt64) async {
        guard sessionGoals.removeValue(forKey: id) != nil else { return }
        if sessionGoals.isEmpty {
            proactiveRefresh?.cancel()
            proactiveRefresh = nil
        } else {
            restartProactiveRefresh()
        }
        await evaluateGoal()  // the remaining goal may be looser
    }

    /// (Re)starts the proactive loop when sessions are held (not after ``shutdown()``).
    func restartProactiveRefresh() {
        proactiveRefresh?.cancel()
        proactiveRefresh = nil
        guard let goal = combinedGoal else { return }
        proactiveRefresh = background.spawn { await self.proactiveLoop(goal: goal) }
    }

    /// Sleeps until the margin before expiry (minus up to 10 % jitter), refreshes, repeats. The
    /// margin is the goal's (or the advisory window), capped at half the token's lifetime, so
    /// short-lived tokens are refreshed once per half-life, never back to back. Transient failures
    /// (provider, store) back off and try again; only a needed login or a logout ends the loop.
    func proactiveLoop(goal: AuthSession.Goal) async {
        var failures = 0
        var lastExpiry: Date?
        while !Task.isCancelled {
            let profile: StoredProfile?
            do {
                profile = try await store.profile(named: profileName)
            } catch {
                failures += 1
                logger.warning("proactive refresh: the store could not be read; trying again", metadata: logMetadata.merging(["error": "\(error)"]) { $1 })
                guard await pause(attempt: failures) else { return }
                continue
            }
            guard let profile, let expiry = profile.credentials.expiresAt else {
                await evaluateGoal()
                return  // nothing to keep fresh until someone logs in (login restarts the loop)
            }
            if let lastExpiry, expiry <= lastExpiry {
                // The provider handed back credentials that expire no later: do not spin.
                failures += 1
                guard await pause(attempt: failures) else { return }
            }
            lastExpiry = expiry
            let lifetime = RefreshDecision.lifetime(of: profile, expiry: expiry)
            let margin = min(max(configuration.advisoryWindow, goal.minimumValidity).timeInterval, lifetime / 2)
            let jitter = Double.random(in: 0...max(margin * 0.1, 0))
            let wait = expiry.timeIntervalSince(clock.now) - margin - jitter
            if wait > 0 {
                do { try await clock.sleep(for: Duration(timeInterval: wait)) } catch { return }
            }
            guard !Task.isCancelled else { return }
            do {
                let refreshed = try await refreshProactively(firstSeen: profile)
                // Old credentials served while the provider fails do not count as a success.
                if let newExpiry = refreshed.expiresAt, newExpiry > expiry { failures = 0 }
            } catch is CancellationError {
                return
            } catch is LoginRequiredError {
                await evaluateGoal()
                return
            } catch {
                failures += 1
                guard await pause(attempt: failures) else { return }
            }
            await evaluateGoal()
        }
    }

    /// Backs off before the next attempt; `false` when cancelled.
    private func pause(attempt: Int) async -> Bool {
        do {
            try await clock.sleep(for: configuration.retryPolicy.backoff(attempt: attempt, retryAfter: nil, random: Double.random(in: 0...1)))
            return true
        } catch {
            return false
        }
    }

    /// Recomputes the goal-related diagnostics from the stored credentials.
    func evaluateGoal() async {
        let epoch = machine.withLock { $0.epoch }
        let profile: StoredProfile?
        do {
            profile = try await store.profile(named: profileName)
        } catch {
            return  // the store's state is unknown: the diagnostics stay as they are
        }
        guard machine.withLock({ $0.mayHandOut(startedIn: epoch) }) else { return }  // a logout began: it set them
        let goal = combinedGoal ?? AuthSession.Goal(minimumValidity: .zero)
        updateDiagnostics { diagnostics in
            guard let credentials = profile?.credentials else {
                diagnostics.loginRequired = true
                return
            }
            diagnostics.loginRequired = false
            let granted = Set((credentials.scope ?? "").split(separator: " ").map(String.init))
            diagnostics.insufficientScope = !goal.scopes.isSubset(of: granted) || (goal.requiresIDToken && credentials.idToken == nil)
            if let expiry = credentials.expiresAt {
                diagnostics.expiringSoon = expiry.timeIntervalSince(clock.now) < goal.minimumValidity.timeInterval
            } else {
                diagnostics.expiringSoon = false
            }
        }
    }
}
