import Foundation
@testable import LoginKit
import Testing

/// The refresh decision of a forced refresh (`rejectedAccessToken`: a resource server refused that
/// token): a profile that holds it is never served and is refreshed under the lock while the store
/// still holds it; any other profile is decided as for every caller.
@Suite struct ForcedRefreshDecisionTests {
    static let t0 = Date(timeIntervalSince1970: 1_900_000_000)

    static func profile(_ token: String, age: TimeInterval = 0, lifetime: TimeInterval? = 3600) -> StoredProfile {
        let issuedAt = t0.addingTimeInterval(-age)
        return StoredProfile(
            credentials: Credentials(
                accessToken: token, refreshToken: "r-\(token)", expiresAt: lifetime.map { issuedAt.addingTimeInterval($0) }, issuedAt: issuedAt),
            source: CredentialSource(kind: .oauth2, endpoint: "https://issuer.test", clientID: "c"), userID: "u", updatedAt: issuedAt)
    }

    static func decision(rejecting token: String?) -> RefreshDecision {
        RefreshDecision(
            advisoryWindow: .seconds(300), mandatoryWindow: .seconds(60), kind: .accessToken, minimumValidity: .zero,
            requestStart: t0, rejectedAccessToken: token)
    }

    @Test(arguments: [
        // (stored token, its age in seconds, rejected token, verdict)
        ("a", 60.0, "a" as String?, RefreshDecision.Verdict.refresh),  // fresh, but refused: refreshed
        ("a", 60, "b", .serve),  // someone already replaced the refused token
        ("a", 60, nil, .serve),  // no forced refresh
        ("a", 3350, "b", .serveAndRefresh),  // another token: the usual windows apply
        ("a", 3560, "b", .refresh),
        ("a", 3700, "b", .refresh),  // another token, expired
        ("a", 3700, "a", .refresh),
        ("a", 3350, "a", .refresh),
    ])
    func verdicts(token: String, age: Double, rejected: String?, expected: RefreshDecision.Verdict) {
        let profile = Self.profile(token, age: age)
        let decision = Self.decision(rejecting: rejected)
        #expect(decision.verdict(for: profile, now: Self.t0) == expected)
        // The cached path decides the same on the profile it holds in memory.
        #expect(decision.verdict(for: HeldProfile(profile), now: Self.t0) == expected)
    }

    @Test func aRefusedTokenThatNeverExpiresIsRefreshedAnotherIsServed() {
        let neverExpires = Self.profile("a", lifetime: nil)
        #expect(Self.decision(rejecting: "a").verdict(for: neverExpires, now: Self.t0) == .refresh)
        #expect(Self.decision(rejecting: "a").verdict(for: HeldProfile(neverExpires), now: Self.t0) == .refresh)
        #expect(Self.decision(rejecting: "b").verdict(for: neverExpires, now: Self.t0) == .serve)
        #expect(Self.decision(rejecting: "a").mustRefresh(stored: neverExpires, firstSeen: neverExpires, now: Self.t0))
        #expect(!Self.decision(rejecting: "b").mustRefresh(stored: neverExpires, firstSeen: neverExpires, now: Self.t0))
    }

    @Test(arguments: [
        // (stored token and age, first seen token, rejected token, must refresh)
        ("a", 60.0, "a", "a" as String?, true),  // the store still holds the refused token
        ("b", 10, "a", "a", false),  // replaced meanwhile, by this process or another: taken
        ("b", 3700, "a", "a", true),  // replaced by one that has expired since: the usual rule
        ("b", 3350, "b", "a", true),  // the caller itself read another token in the advisory window
        ("a", 60, "a", nil, false),  // no forced refresh: nothing is due
    ])
    func underTheLock(storedToken: String, age: Double, firstSeen: String, rejected: String?, expected: Bool) {
        let decision = Self.decision(rejecting: rejected)
        let stored = Self.profile(storedToken, age: age)
        let first = storedToken == firstSeen ? stored : Self.profile(firstSeen, age: 60)
        #expect(decision.mustRefresh(stored: stored, firstSeen: first, now: Self.t0) == expected)
    }

    @Test func aDecisionWithoutARefusedTokenNeverComparesTokens() {
        let decision = Self.decision(rejecting: nil)
        #expect(!decision.holdsRejectedToken(Self.profile("a").credentials))
        #expect(!decision.holdsRejectedToken(Credentials()))
        #expect(!Self.decision(rejecting: "a").holdsRejectedToken(Credentials()), "no access token is not the refused one")
    }
}
