import Foundation
@testable import LoginKit
import Testing

/// The refresh decision of a forced refresh (`rejection`: a resource server refused that token in
/// a request sent at a given time): a profile that holds it (that token, issued no later than the
/// request was sent) is never served and is refreshed under the lock while the store still holds
/// it, unless a forced refresh brought it less than 30 s ago; any other profile is decided as for
/// every caller.
@Suite struct ForcedRefreshDecisionTests {
    static let t0 = Date(timeIntervalSince1970: 1_900_000_000)

    /// A profile holding `token`, issued `age` seconds before `t0`; `forcedAgo`: a forced refresh
    /// brought it that many seconds before `t0` (its mark).
    static func profile(_ token: String, age: TimeInterval = 0, lifetime: TimeInterval? = 3600, forcedAgo: TimeInterval? = nil) -> StoredProfile {
        let issuedAt = t0.addingTimeInterval(-age)
        var attributes: [String: String] = [:]
        if let forcedAgo { attributes[AuthService.forcedRefreshAttribute] = String(Int64(t0.addingTimeInterval(-forcedAgo).timeIntervalSince1970)) }
        return StoredProfile(
            credentials: Credentials(
                accessToken: token, refreshToken: "r-\(token)", expiresAt: lifetime.map { issuedAt.addingTimeInterval($0) }, issuedAt: issuedAt),
            source: CredentialSource(kind: .oauth2, endpoint: "https://issuer.test", clientID: "c"), userID: "u", attributes: attributes,
            updatedAt: issuedAt)
    }

    /// A forced refresh for `token`, refused in a request sent at `sentAt` (default `t0`).
    static func decision(rejecting token: String?, sentAt: Date = t0) -> RefreshDecision {
        RefreshDecision(
            advisoryWindow: .seconds(300), mandatoryWindow: .seconds(60), kind: .accessToken, minimumValidity: .zero,
            requestStart: t0, rejection: token.map { TokenRejection(accessToken: $0, sentAt: sentAt) })
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

    /// A provider may issue the same access token again: credentials issued after the refused
    /// request was sent are not what was refused, and are served; those issued before, or without
    /// an issue time, are.
    @Test func theSameTokenIssuedAfterTheRefusedRequestWasSentIsNotWhatWasRefused() {
        let sentBefore = Self.decision(rejecting: "a", sentAt: Self.t0.addingTimeInterval(-1))
        let reissued = Self.profile("a", age: 0)  // issued at t0, a second after the request was sent
        #expect(sentBefore.verdict(for: reissued, now: Self.t0) == .serve)
        #expect(sentBefore.verdict(for: HeldProfile(reissued), now: Self.t0) == .serve)
        #expect(!sentBefore.mustRefresh(stored: reissued, firstSeen: reissued, now: Self.t0))
        #expect(!sentBefore.holdsRejectedToken(reissued.credentials))
        // Issued before the request was sent (or at the same moment, to the millisecond): refused.
        let sentNow = Self.decision(rejecting: "a")
        #expect(sentNow.verdict(for: reissued, now: Self.t0) == .refresh)
        #expect(sentNow.mustRefresh(stored: reissued, firstSeen: reissued, now: Self.t0))
        #expect(TokenRejection(accessToken: "a", sentAt: Self.t0).holds(accessToken: "a", issuedAt: Self.t0.addingTimeInterval(0.0005)))
        #expect(!TokenRejection(accessToken: "a", sentAt: Self.t0).holds(accessToken: "a", issuedAt: Self.t0.addingTimeInterval(0.002)))
        #expect(TokenRejection(accessToken: "a", sentAt: Self.t0).holds(accessToken: "a", issuedAt: nil), "no issue time: taken for the refused one")
        #expect(!TokenRejection(accessToken: "a", sentAt: Self.t0).holds(accessToken: "b", issuedAt: Self.t0.addingTimeInterval(-60)))
    }

    /// A token a forced refresh brought is not force-refreshed again within 30 s of that refresh:
    /// it is decided on its dates alone (served), in every verdict and under the lock.
    @Test(arguments: [
        // (seconds since the forced refresh's mark, verdict)
        (nil as TimeInterval?, RefreshDecision.Verdict.refresh),  // no mark: refreshed
        (0, .serve),
        (29, .serve),
        (31, .refresh),
        (-29, .serve),  // a mark from a clock a little ahead
        (-31, .refresh),  // one far ahead is not trusted
    ])
    func aTokenAForcedRefreshJustBroughtIsNotRefreshedAgain(forcedAgo: TimeInterval?, expected: RefreshDecision.Verdict) {
        let profile = Self.profile("a", age: 60, forcedAgo: forcedAgo)
        let decision = Self.decision(rejecting: "a")
        #expect(decision.verdict(for: profile, now: Self.t0) == expected)
        #expect(decision.verdict(for: HeldProfile(profile), now: Self.t0) == expected)
        #expect(decision.mustRefresh(stored: profile, firstSeen: profile, now: Self.t0) == (expected == .refresh))
        #expect(TokenTiming(profile).forcedRefreshAt == forcedAgo.map { Self.t0.addingTimeInterval(-$0) })
        // Due on its dates, it is refreshed as for every caller.
        let due = Self.profile("a", age: 3570, forcedAgo: 0)
        #expect(decision.verdict(for: due, now: Self.t0) == .refresh)
        #expect(decision.mustRefresh(stored: due, firstSeen: due, now: Self.t0))
    }

    @Test func aMarkThatIsNotANumberIsIgnored() {
        var profile = Self.profile("a", age: 60)
        profile.attributes[AuthService.forcedRefreshAttribute] = "soon"
        #expect(TokenTiming(profile).forcedRefreshAt == nil)
        #expect(Self.decision(rejecting: "a").verdict(for: profile, now: Self.t0) == .refresh)
    }
}
