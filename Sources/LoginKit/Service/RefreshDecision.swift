#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKitHTTP

/// The refresh decision as a pure function of what is stored, what the caller asked and when
/// (docs/refresh.md). `AuthService` carries it out; it never looks at anything else.
///
/// The rules:
/// - Windows never exceed a share of the credentials' lifetime (issue to expiry): advisory ≤ ½,
///   mandatory ≤ ¼, so short-lived tokens are not refreshed the moment they arrive.
/// - A minimum validity the provider cannot grant is capped at 90 % of the lifetime: a freshly
///   issued token satisfies it.
/// - A caller never refreshes credentials issued after its request began, whichever task or
///   process refreshed them, as long as they have not expired.
/// - A forced refresh (`rejection`: the token a resource server refused, and when the refused
///   request was sent) never serves what was refused: a profile that holds it (that token, issued
///   no later than the request was sent) needs the refresh — unless a forced refresh brought it
///   less than ``TokenRejection/quietPeriod`` ago. Any other profile is decided by the rules above,
///   so a caller whose token someone already replaced (even with the same token string, issued
///   again) takes the new one.
struct RefreshDecision: Sendable, Hashable {
    /// What the caller gets.
    enum Verdict: Sendable, Hashable {
        /// The stored credentials as they are.
        case serve
        /// The stored credentials, and a refresh starts in the background.
        case serveAndRefresh
        /// The caller waits for the one shared refresh.
        case refresh
    }

    var advisoryWindow: Duration
    var mandatoryWindow: Duration
    var kind: TokenKind
    var minimumValidity: Duration
    /// When the caller's request began.
    var requestStart: Date
    /// A proactive refresh (sessions): under the lock it refreshes unless someone else already did.
    var isProactive = false
    /// A forced refresh: the access token a resource server refused (`invalid_token`) and when the
    /// refused request was sent. A profile that holds it is never served, unless a forced refresh
    /// brought it less than ``TokenRejection/quietPeriod`` ago; under the lock it is refreshed while
    /// the store still holds it.
    var rejection: TokenRejection?

    /// The verdict for `profile` at `now`.
    func verdict(for profile: StoredProfile, now: Date) -> Verdict {
        let timing = TokenTiming(profile)
        if refreshesForRejection(accessToken: profile.credentials.accessToken, timing: timing, now: now) { return .refresh }
        return verdict(for: timing, now: now)
    }

    /// The verdict for a profile held in memory (the cached path, the last known profile), at
    /// `now`: on its dates alone, unless this is a forced refresh, which also compares its token.
    func verdict(for held: HeldProfile, now: Date) -> Verdict {
        if rejection != nil, refreshesForRejection(accessToken: held.credentials.credentials.accessToken, timing: held.timing, now: now) {
            return .refresh
        }
        return verdict(for: held.timing, now: now)
    }

    /// Whether `credentials` hold what this forced refresh is for: the refused access token, issued
    /// no later than the refused request was sent (never for any other decision).
    func holdsRejectedToken(_ credentials: Credentials) -> Bool {
        rejection?.holds(credentials) ?? false
    }

    /// Whether this forced refresh refreshes a profile whose access token is `accessToken` and whose
    /// dates are `timing`, at `now`, whatever its dates say: it holds the refused token, and no
    /// forced refresh brought that less than ``TokenRejection/quietPeriod`` ago (a resource server
    /// that refuses every token then costs one refresh per quiet period, not one per request).
    func refreshesForRejection(accessToken: String?, timing: TokenTiming, now: Date) -> Bool {
        guard let rejection, rejection.holds(accessToken: accessToken, issuedAt: timing.issuedAt) else { return false }
        return rejection.isExplicit || !Self.cameFromRecentForcedRefresh(timing, now: now)
    }

    /// Whether what a refresh under the lock saves in place of `stored`, at `now`, is marked as
    /// brought by a forced refresh (``AuthService/forcedRefreshAttribute``): the refresh is for a
    /// resource server's refusal of the stored token (``refreshesForRejection(accessToken:timing:now:)``).
    /// A refresh the user asked for (``TokenRejection/isExplicit``) is not one: a resource server's
    /// refusal of what it brought refreshes at once.
    func marksForcedRefresh(of stored: StoredProfile, now: Date) -> Bool {
        guard let rejection, !rejection.isExplicit else { return false }
        return refreshesForRejection(accessToken: stored.credentials.accessToken, timing: TokenTiming(stored), now: now)
    }

    /// Whether a forced call that waited for a shared refresh it did not start, and got
    /// `credentials` back, looks once more: they hold the refused token, and that refresh was not
    /// started for a refusal of these very credentials (`startedFor`: the refusal it was started
    /// for, `nil` when it was started for another reason). Such a refresh could not replace them (a
    /// transient failure, a lost answer, the deadline): looking again would send the same refresh
    /// token again, within milliseconds.
    func looksAgain(after credentials: Credentials, fromRefreshFor startedFor: TokenRejection?) -> Bool {
        guard holdsRejectedToken(credentials) else { return false }
        return !(startedFor?.holds(credentials) ?? false)
    }

    /// The seconds of ``TokenRejection/quietPeriod`` left when this forced refresh (not one the user
    /// asked for) hands back `credentials`, whose dates are `timing`, only because a forced refresh
    /// brought them less than that ago: they hold the refused token. `nil` otherwise.
    func quietPeriodLeft(for credentials: Credentials, timing: TokenTiming, now: Date) -> TimeInterval? {
        guard let rejection, !rejection.isExplicit, rejection.holds(accessToken: credentials.accessToken, issuedAt: timing.issuedAt),
            Self.cameFromRecentForcedRefresh(timing, now: now),
            let forcedAt = timing.forcedRefreshAt
        else { return nil }
        return max(0, forcedAt.addingTimeInterval(TokenRejection.quietPeriod).timeIntervalSince(now))
    }

    /// Whether a forced refresh brought the credentials whose dates are `timing` less than
    /// ``TokenRejection/quietPeriod`` before `now` (or that long after it: a clock behind the one
    /// that wrote the mark).
    static func cameFromRecentForcedRefresh(_ timing: TokenTiming, now: Date) -> Bool {
        guard let forcedAt = timing.forcedRefreshAt else { return false }
        return abs(now.timeIntervalSince(forcedAt)) < TokenRejection.quietPeriod
    }

    /// The verdict for a profile whose dates are `timing`, at `now`. The dates alone: a forced
    /// refresh decides with the `StoredProfile` or the `HeldProfile` verdict, which see its token.
    func verdict(for timing: TokenTiming, now: Date) -> Verdict {
        guard let expiry = timing.expiry(of: kind) else { return .serve }  // never expires
        let remaining = expiry.timeIntervalSince(now)
        if remaining > 0, Self.wasIssued(timing, since: requestStart) { return .serve }
        let lifetime = Self.lifetime(of: timing, expiry: expiry)
        let mandatory = min(mandatoryWindow.timeInterval, lifetime / 4)
        let advisory = min(advisoryWindow.timeInterval, lifetime / 2)
        let mustHave = max(Self.grantable(minimumValidity, lifetime: lifetime).seconds, mandatory)
        if remaining > max(mustHave, advisory) { return .serve }
        return remaining > mustHave ? .serveAndRefresh : .refresh
    }

    /// Under the store's lock, with `stored` as read there: whether the refresh the caller came
    /// for is still needed, given `firstSeen`, what the caller read before. A forced refresh is
    /// needed while the store holds the rejected token (``refreshesForRejection(accessToken:timing:now:)``);
    /// once someone replaced it, or when a forced refresh brought it within the quiet period, the
    /// rules for every refresh apply.
    func mustRefresh(stored: StoredProfile, firstSeen: StoredProfile, now: Date) -> Bool {
        if refreshesForRejection(accessToken: stored.credentials.accessToken, timing: TokenTiming(stored), now: now) { return true }
        guard let expiry = kind.expiry(of: stored.credentials) else { return false }
        let unexpired = expiry > now
        if unexpired, stored.credentials != firstSeen.credentials { return false }  // refreshed meanwhile
        return isProactive || verdict(for: stored, now: now) != .serve
    }

    /// `minimumValidity`, capped at 90 % of `lifetime`; `capped` says whether it was.
    static func grantable(_ minimumValidity: Duration, lifetime: TimeInterval) -> (seconds: TimeInterval, capped: Bool) {
        let asked = minimumValidity.timeInterval
        let ceiling = lifetime * 0.9
        return asked > ceiling ? (ceiling, true) : (asked, false)
    }

    /// Whether `profile`'s credentials were issued at or after `start`, to the millisecond: a stored
    /// date comes back from the file's `secondsSince1970` a few hundred nanoseconds off.
    static func wasIssued(_ profile: StoredProfile, since start: Date) -> Bool {
        wasIssued(TokenTiming(profile), since: start)
    }

    static func wasIssued(_ timing: TokenTiming, since start: Date) -> Bool {
        timing.issuedAt.timeIntervalSince(start) >= -0.001
    }

    /// Seconds from issue to `expiry` (0 when the stamps are inconsistent).
    static func lifetime(of profile: StoredProfile, expiry: Date) -> TimeInterval {
        lifetime(of: TokenTiming(profile), expiry: expiry)
    }

    static func lifetime(of timing: TokenTiming, expiry: Date) -> TimeInterval {
        max(0, expiry.timeIntervalSince(timing.issuedAt))
    }
}

extension RefreshDecision {
    /// Whether the asked minimum validity is one the provider grants for a profile whose dates are
    /// `timing`: with a verdict of serve, the profile may then be served as it is, with nothing to
    /// log or start (an ungrantable one is reported once, on the actor's path).
    func grantsTheAskedValidity(_ timing: TokenTiming) -> Bool {
        guard minimumValidity > .zero, let expiry = timing.expiry(of: kind) else { return true }
        return !Self.grantable(minimumValidity, lifetime: Self.lifetime(of: timing, expiry: expiry)).capped
    }
}

/// An access token a resource server refused (`invalid_token`), and when the refused request was
/// sent. Credentials hold it when they carry that token and were issued no later than that, to the
/// millisecond (a stored date comes back from the file a few hundred nanoseconds off): credentials
/// issued after the request was sent are not what was refused, even with the same token — a
/// provider may issue the same access token again.
struct TokenRejection: Sendable, Hashable {
    /// The refused access token.
    var accessToken: String
    /// When the refused request was sent.
    var sentAt: Date
    /// Asked for by the user (`loginkit token --force-refresh`), not by a resource server's
    /// refusal: the quiet period does not apply, and what the refresh brings is not marked as a
    /// forced refresh's (a refusal of it refreshes at once).
    var isExplicit = false

    /// How long a token obtained because its predecessor was refused — by `AuthService`'s forced
    /// refresh, or by `ClientCredentialsTokens.send` — is not replaced again for a refusal: 30 s
    /// from its issue. A resource server that refuses every token then costs one refresh (and one
    /// rotation of the refresh token) per 30 s, not one per request.
    static let quietPeriod: TimeInterval = 30

    /// Whether credentials whose access token is `token`, issued at `issuedAt`, are what was
    /// refused. Without an issue time, the same token is taken for the refused one.
    func holds(accessToken token: String?, issuedAt: Date?) -> Bool {
        guard let token, token == accessToken else { return false }
        guard let issuedAt else { return true }
        return issuedAt.timeIntervalSince(sentAt) <= 0.001
    }

    /// Whether `credentials` are what was refused (see ``holds(accessToken:issuedAt:)``).
    func holds(_ credentials: Credentials) -> Bool {
        holds(accessToken: credentials.accessToken, issuedAt: credentials.issuedAt)
    }
}
