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
        Task { await self.evaluateGoal() }
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

    /// (Re)starts the proactive loop when sessions are held: sleep until the goal's margin before
    /// expiry (minus up to 10 % jitter), refresh, repeat.
    func restartProactiveRefresh() {
        proactiveRefresh?.cancel()
        proactiveRefresh = nil
        guard let goal = combinedGoal else { return }
        proactiveRefresh = Task { await self.proactiveLoop(goal: goal) }
    }

    private func proactiveLoop(goal: AuthSession.Goal) async {
        while !Task.isCancelled {
            guard let profile = try? await store.profile(named: profileName), let expiry = profile.credentials.expiresAt else {
                await evaluateGoal()
                return  // nothing to keep fresh until someone logs in (login restarts the loop)
            }
            let margin = max(configuration.advisoryWindow, goal.minimumValidity).timeInterval
            let jitter = Double.random(in: 0...(margin * 0.1))
            let wait = expiry.timeIntervalSince(clock.now) - margin - jitter
            if wait > 0 {
                do { try await clock.sleep(for: Duration(timeInterval: wait)) } catch { return }
            }
            guard !Task.isCancelled else { return }
            do {
                _ = try await startRefresh(trigger: profile.credentials, kind: .any).wait()
            } catch is CancellationError {
                return
            } catch is LoginRequiredError {
                await evaluateGoal()
                return
            } catch {
                // Transient: try again after the backoff, without spinning.
                do { try await clock.sleep(for: backoff(attempt: 2, retryAfter: nil)) } catch { return }
            }
            await evaluateGoal()
        }
    }

    /// Recomputes the goal-related diagnostics from the stored credentials.
    func evaluateGoal() async {
        let profile = try? await store.profile(named: profileName)
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
