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
/// - A forced refresh (`rejectedAccessToken`, the token a resource server refused) never serves
///   that token: a profile that holds it needs the refresh; one that holds another token is decided
///   by the rules above, so a caller whose token someone already replaced takes the new one.
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
    /// A forced refresh: the access token a resource server refused (`invalid_token`). A profile
    /// that holds it is never served; under the lock it is refreshed while the store still holds it.
    var rejectedAccessToken: String?

    /// The verdict for `profile` at `now`.
    func verdict(for profile: StoredProfile, now: Date) -> Verdict {
        if holdsRejectedToken(profile.credentials) { return .refresh }
        return verdict(for: TokenTiming(profile), now: now)
    }

    /// The verdict for a profile held in memory (the cached path, the last known profile), at
    /// `now`: on its dates alone, unless this is a forced refresh, which also compares its token.
    func verdict(for held: HeldProfile, now: Date) -> Verdict {
        if rejectedAccessToken != nil, holdsRejectedToken(held.credentials.credentials) { return .refresh }
        return verdict(for: held.timing, now: now)
    }

    /// Whether `credentials` hold the access token this forced refresh is for (never for any other
    /// decision).
    func holdsRejectedToken(_ credentials: Credentials) -> Bool {
        guard let rejectedAccessToken else { return false }
        return credentials.accessToken == rejectedAccessToken
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
    /// needed while the store holds the rejected token; once someone replaced it, the rules for
    /// every refresh apply.
    func mustRefresh(stored: StoredProfile, firstSeen: StoredProfile, now: Date) -> Bool {
        if holdsRejectedToken(stored.credentials) { return true }
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
