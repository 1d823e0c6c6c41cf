#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKitHTTP

/// Which expiry a caller cares about.
enum TokenKind: Sendable, Hashable {
    case any, idToken, accessToken

    func expiry(of credentials: Credentials) -> Date? {
        expiry(expiresAt: credentials.expiresAt, idTokenExpiresAt: credentials.idTokenExpiresAt)
    }

    func expiry(expiresAt: Date?, idTokenExpiresAt: Date?) -> Date? {
        switch self {
        case .any, .accessToken: expiresAt
        case .idToken: idTokenExpiresAt ?? expiresAt
        }
    }
}

/// The dates the refresh decision reads from a profile, without its strings: what the cached path
/// keeps beside the profile it serves, so that a storm's callers decide without copying the
/// profile (a retain and a release of every string in it, on cache lines both cores write).
struct TokenTiming: Sendable, Hashable {
    var expiresAt: Date?
    var idTokenExpiresAt: Date?
    /// When the credentials were issued: their own stamp, else the profile's last write.
    var issuedAt: Date

    init(_ profile: StoredProfile) {
        expiresAt = profile.credentials.expiresAt
        idTokenExpiresAt = profile.credentials.idTokenExpiresAt
        issuedAt = profile.credentials.issuedAt ?? profile.updatedAt
    }

    /// The expiry a caller asking for `kind` cares about.
    func expiry(of kind: TokenKind) -> Date? {
        kind.expiry(expiresAt: expiresAt, idTokenExpiresAt: idTokenExpiresAt)
    }
}

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

    /// The verdict for `profile` at `now`.
    func verdict(for profile: StoredProfile, now: Date) -> Verdict {
        verdict(for: TokenTiming(profile), now: now)
    }

    /// The verdict for a profile whose dates are `timing`, at `now`.
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
    /// for is still needed, given `firstSeen`, what the caller read before.
    func mustRefresh(stored: StoredProfile, firstSeen: StoredProfile, now: Date) -> Bool {
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

/// Credentials handed to many callers at once, by reference: a storm's callers each retain this
/// one object instead of every string in the credentials (a retain and a release apiece, on cache
/// lines both cores write), and take out only the token they asked for.
final class SharedCredentials: Sendable {
    let credentials: Credentials
    /// The credentials' expiries, read without touching their strings.
    private let expiresAt: Date?
    private let idTokenExpiresAt: Date?

    init(_ credentials: Credentials) {
        self.credentials = credentials
        expiresAt = credentials.expiresAt
        idTokenExpiresAt = credentials.idTokenExpiresAt
    }

    /// The expiry a caller asking for `kind` cares about.
    func expiry(of kind: TokenKind) -> Date? {
        kind.expiry(expiresAt: expiresAt, idTokenExpiresAt: idTokenExpiresAt)
    }
}

/// What a token call may serve without entering `AuthService`'s actor: the profile the service last
/// served, the store's change stamp it was read under, and a mirror of the state machine's epoch
/// and logout phase (kept in step by the actor, synchronously, whenever its machine changes). A
/// token call serves from here only when the stamp is still the store's, no logout has begun since,
/// and the refresh decision says serve; anything else takes the actor's path (docs/refresh.md).
struct ServedCredentials: Sendable {
    private(set) var epoch: UInt64 = 0
    private(set) var isLoggingOut = false
    private var last: Remembered?
    /// The shared refresh running now and the epoch it started in (mirrors `currentRefresh`).
    private var refresh: (flight: Flight<SharedCredentials>, epoch: UInt64)?
    /// The actor's step under way (it reads the store), with the stamp and epoch it began under:
    /// token calls under the same stamp wait for it off the actor, then look here again.
    private var read: (flight: Flight<Void>, stamp: UInt64, epoch: UInt64)?

    /// A profile remembered under a stamp. A class, so that a storm's callers each take one
    /// reference to it, not a copy of the profile.
    final class Remembered: Sendable {
        let stamp: UInt64
        /// The profile's credentials, for the callers it is served to.
        let credentials: SharedCredentials
        /// The profile's dates: what the cached path decides on.
        let timing: TokenTiming

        init(profile: StoredProfile, stamp: UInt64) {
            self.stamp = stamp
            credentials = SharedCredentials(profile.credentials)
            timing = TokenTiming(profile)
        }
    }

    /// Follows the machine: a new epoch or a logout forgets the remembered profile.
    mutating func follow(_ machine: AuthStateMachine) {
        if machine.epoch != epoch {
            last = nil
            refresh = nil
            read = nil
        }
        epoch = machine.epoch
        if case .loggingOut = machine.phase {
            isLoggingOut = true
            last = nil
            refresh = nil
            read = nil
        } else {
            isLoggingOut = false
        }
    }

    /// The same answer as `AuthStateMachine.mayHandOut(startedIn:)`, without the actor.
    func mayHandOut(startedIn epoch: UInt64) -> Bool {
        !isLoggingOut && epoch == self.epoch
    }

    /// Remembers `profile`, read under `stamp` by a request that began in `epoch` and was served;
    /// never in place of one read under a later stamp (steps may finish out of order).
    mutating func remember(_ profile: StoredProfile, stamp: UInt64, startedIn epoch: UInt64) {
        guard mayHandOut(startedIn: epoch), stamp >= last?.stamp ?? 0 else { return }
        last = Remembered(profile: profile, stamp: stamp)
    }

    /// The remembered profile, when the store's stamp is still the one it was read under.
    func remembered(ifStamp stamp: UInt64) -> Remembered? {
        guard !isLoggingOut, let last, last.stamp == stamp else { return nil }
        return last
    }

    /// What the cached path looks at, in one acquisition of the lock: the remembered profile when
    /// the store's stamp is still the one it was read under, and with it the shared refresh it may
    /// wait for (``runningRefresh(ifStamp:)``).
    func cached(ifStamp stamp: UInt64) -> (remembered: Remembered, refresh: (flight: Flight<SharedCredentials>, epoch: UInt64)?)? {
        guard let last = remembered(ifStamp: stamp) else { return nil }
        return (last, runningRefresh(ifStamp: stamp))
    }

    /// A shared refresh started (by the actor, in `epoch`).
    mutating func refreshStarted(_ flight: Flight<SharedCredentials>, epoch: UInt64) {
        refresh = (flight, epoch)
    }

    /// The shared refresh `flight` ended: before its waiters are resumed, so no caller joins it after.
    mutating func refreshEnded(_ flight: Flight<SharedCredentials>) {
        if refresh?.flight === flight { refresh = nil }
    }

    /// A step began reading the store under `stamp` in `epoch` (set before its first `await`).
    mutating func readStarted(_ flight: Flight<Void>, stamp: UInt64, epoch: UInt64) {
        read = (flight, stamp, epoch)
    }

    /// The step reading with `flight` is over: what it read is remembered (or it failed). Called
    /// before the flight's waiters are resumed.
    mutating func readEnded(_ flight: Flight<Void>) {
        if read?.flight === flight { read = nil }
    }

    /// The step a token call under `stamp` may wait for instead of reading the store itself (a
    /// storm's callers: one read, not one each): one begun under the same stamp, in the current
    /// epoch, with no logout begun.
    func runningRead(ifStamp stamp: UInt64) -> Flight<Void>? {
        guard !isLoggingOut, let read, read.stamp == stamp, read.epoch == epoch else { return nil }
        return read.flight
    }

    /// The refresh a token call whose remembered profile needs one may wait for without entering the
    /// actor: the profile is still the store's (`stamp`), no logout has begun, and a shared refresh
    /// started in the current epoch is running — what the actor's step would answer with
    /// `.waitForRefresh(start: false)`.
    func runningRefresh(ifStamp stamp: UInt64) -> (flight: Flight<SharedCredentials>, epoch: UInt64)? {
        guard !isLoggingOut, last?.stamp == stamp, let refresh, refresh.epoch == epoch else { return nil }
        return refresh
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
