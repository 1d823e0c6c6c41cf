import Foundation
@testable import LoginKit
import LoginKitHTTP
import PropertyBased
import Testing

/// The refresh decision as a pure function, and a simulation of many processes sharing a store.
@Suite struct RefreshDecisionTests {
    static let t0 = Date(timeIntervalSince1970: 1_900_000_000)

    static func profile(issuedAt: Date, lifetime: TimeInterval, token: String = "a") -> StoredProfile {
        StoredProfile(
            credentials: Credentials(accessToken: token, refreshToken: "r-\(token)", expiresAt: issuedAt.addingTimeInterval(lifetime), issuedAt: issuedAt),
            source: CredentialSource(kind: .oauth2, endpoint: "https://issuer.test", clientID: "c"), userID: "u", updatedAt: issuedAt)
    }

    static func decision(minimumValidity: Duration = .zero, requestStart: Date) -> RefreshDecision {
        RefreshDecision(advisoryWindow: .seconds(300), mandatoryWindow: .seconds(60), kind: .accessToken, minimumValidity: minimumValidity, requestStart: requestStart)
    }

    @Test(arguments: [
        // (lifetime, age, minimum validity, verdict)
        (3600.0, 0.0, 0.0, RefreshDecision.Verdict.serve),
        (3600, 3200, 0, .serve),
        (3600, 3350, 0, .serveAndRefresh),  // 250 s left: inside the advisory window
        (3600, 3560, 0, .refresh),  // 40 s left: inside the mandatory window
        (3600, 3700, 0, .refresh),  // expired
        (3600, 1000, 3000, .refresh),  // 2600 s left, 3000 asked and grantable
        (3600, 500, 3000, .serve),
        (45, 1, 3000, .serve),  // 3000 s cannot be granted: a fresh 45 s token meets it
        (45, 10, 3000, .refresh),  // older than 10 % of its lifetime
        (120, 70, 0, .serveAndRefresh),  // advisory capped at ½ the lifetime: 60 s
        (120, 95, 0, .refresh),  // mandatory capped at ¼: 30 s
        (120, 20, 0, .serve),
    ])
    func verdicts(lifetime: Double, age: Double, minimum: Double, expected: RefreshDecision.Verdict) {
        let profile = Self.profile(issuedAt: Self.t0, lifetime: lifetime)
        let now = Self.t0.addingTimeInterval(age)
        let decision = Self.decision(minimumValidity: .seconds(minimum), requestStart: now)
        #expect(decision.verdict(for: profile, now: now) == expected)
    }

    @Test func credentialsIssuedAfterTheRequestBeganAreServedWhateverIsAsked() {
        let requestStart = Self.t0
        let issuedLater = Self.profile(issuedAt: Self.t0.addingTimeInterval(2), lifetime: 45)
        let decision = Self.decision(minimumValidity: .seconds(3000), requestStart: requestStart)
        // Even 30 s later (a slow lock), and even though 3000 s > what is left.
        #expect(decision.verdict(for: issuedLater, now: Self.t0.addingTimeInterval(32)) == .serve)
        // But never once expired.
        #expect(decision.verdict(for: issuedLater, now: Self.t0.addingTimeInterval(48)) == .refresh)
    }

    @Test func underTheLockWhatSomeoneElseRefreshedIsTaken() {
        let old = Self.profile(issuedAt: Self.t0, lifetime: 45, token: "old")
        let new = Self.profile(issuedAt: Self.t0.addingTimeInterval(44), lifetime: 45, token: "new")
        let now = Self.t0.addingTimeInterval(44.5)
        let decision = Self.decision(minimumValidity: .seconds(3000), requestStart: Self.t0.addingTimeInterval(44.5))
        #expect(decision.mustRefresh(stored: new, firstSeen: old, now: now) == false)
        #expect(decision.mustRefresh(stored: old, firstSeen: old, now: now) == true)
        var proactive = decision
        proactive.isProactive = true
        #expect(proactive.mustRefresh(stored: new, firstSeen: old, now: now) == false)
        let fresh = Self.profile(issuedAt: now, lifetime: 3600, token: "fresh")
        #expect(proactive.mustRefresh(stored: fresh, firstSeen: fresh, now: now) == true)
    }

    /// N processes share one store. Each begins its request within 0.5 s (before any refresh: the
    /// lock is reached 0.6 s at the earliest), reads the store up to 5 s later, reads the store at some
    /// moment after that, and (when the read says so) queues for the lock; a refresh issues a token
    /// of `lifetime` at the moment it holds the lock. Whatever the order: one refresh, and nobody
    /// is handed an expired token.
    @Test func manyProcessesNeverRefreshTwicePerExpiry() async {
        let input = zip(
            Gen.int(in: 10...600),  // lifetime: short ones make the reads below older than 10 % of it
            Gen.int(in: 0...10_000),  // minimum validity asked
            Gen.int(in: -120...20),  // seconds left on the stored token at t0 (within the mandatory window or expired)
            zip(Gen.int(in: 0...500), Gen.int(in: 0...5000), Gen.int(in: 600...3000)).array(of: 2...12)  // ms: request start, read delay, lock delay
        )
        await propertyCheck(count: 400, input: input) { lifetime, minimum, left, callers in
            let outcome = Self.simulate(lifetime: Double(lifetime), minimum: Double(minimum), left: Double(left), callers: callers)
            #expect(outcome.refreshes == 1, "lifetime \(lifetime) s, asked \(minimum) s, left \(left) s, callers \(callers)")
            #expect(outcome.handedExpired == 0)
        }
    }

    struct Outcome { var refreshes = 0; var handedExpired = 0 }

    static func simulate(lifetime: Double, minimum: Double, left: Double, callers: [(Int, Int, Int)]) -> Outcome {
        let tokenLifetime = 3600.0
        var stored = profile(issuedAt: t0.addingTimeInterval(left - tokenLifetime), lifetime: tokenLifetime, token: "0")
        var outcome = Outcome()
        enum Event { case read(caller: Int), lock(caller: Int, firstSeen: StoredProfile) }
        var events: [(time: Double, order: Int, event: Event)] = []
        for (index, caller) in callers.enumerated() {
            events.append((Double(caller.0 + caller.1) / 1000, index, .read(caller: index)))
        }
        var issued = 0
        while !events.isEmpty {
            events.sort { ($0.time, $0.order) < ($1.time, $1.order) }
            let (time, _, event) = events.removeFirst()
            let now = t0.addingTimeInterval(time)
            switch event {
            case .read(let index):
                let requestStart = t0.addingTimeInterval(Double(callers[index].0) / 1000)
                let decision = decision(minimumValidity: .seconds(minimum), requestStart: requestStart)
                switch decision.verdict(for: stored, now: now) {
                case .serve:
                    if (stored.credentials.expiresAt ?? .distantFuture) <= now { outcome.handedExpired += 1 }
                case .serveAndRefresh, .refresh:
                    events.append((time + Double(callers[index].2) / 1000, callers.count + index, .lock(caller: index, firstSeen: stored)))
                }
            case .lock(let index, let firstSeen):
                let requestStart = t0.addingTimeInterval(Double(callers[index].0) / 1000)
                let decision = decision(minimumValidity: .seconds(minimum), requestStart: requestStart)
                if decision.mustRefresh(stored: stored, firstSeen: firstSeen, now: now) {
                    issued += 1
                    stored = profile(issuedAt: now, lifetime: lifetime, token: "\(issued)")
                    outcome.refreshes += 1
                }
                if (stored.credentials.expiresAt ?? .distantFuture) <= now { outcome.handedExpired += 1 }
            }
        }
        return outcome
    }
}

extension RefreshDecisionTests {
    /// A date written to the store and read back moves by a few hundred nanoseconds; credentials
    /// issued at the very instant a request began still count as issued after it.
    @Test func anIssueTimeReadBackFromTheStoreStillCountsAsAfterTheRequest() throws {
        let start = Date(timeIntervalSinceReferenceDate: 817_123_456.1)  // reads back 0.12 µs earlier
        let encoded = try JSONEncoder.storeDates.encode(Self.profile(issuedAt: start, lifetime: 45))
        #expect((try JSONDecoder.storeDates.decode(StoredProfile.self, from: encoded).credentials.issuedAt ?? .distantFuture) < start)
        let readBack = try JSONDecoder.storeDates.decode(StoredProfile.self, from: encoded)
        #expect(RefreshDecision.wasIssued(readBack, since: start))
        #expect(!RefreshDecision.wasIssued(readBack, since: start.addingTimeInterval(0.01)))
    }
}

extension JSONEncoder {
    /// Dates as the token store writes them.
    static var storeDates: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        return encoder
    }
}

extension JSONDecoder {
    /// Dates as the token store reads them.
    static var storeDates: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        return decoder
    }
}

/// The dates the cached path decides on, read once from a profile: the same fallbacks as the
/// profile-based decision (the profile's last write for a missing issue stamp, the access token's
/// expiry for a missing ID-token expiry).
@Suite struct TokenTimingTests {
    @Test func aMissingIssueStampFallsBackToTheProfilesLastWrite() {
        var credentials = Race.credentials(0, issuedAt: Race.t0)
        credentials.issuedAt = nil
        let profile = StoredProfile(credentials: credentials, source: Race.source, updatedAt: Race.t0.addingTimeInterval(-7))
        #expect(TokenTiming(profile).issuedAt == Race.t0.addingTimeInterval(-7))
        #expect(TokenTiming(Race.profile(Race.credentials(0, issuedAt: Race.t0))).issuedAt == Race.t0)
    }

    @Test(arguments: [TokenKind.any, .idToken, .accessToken])
    func theExpiriesAreTheCredentials(_ kind: TokenKind) {
        var withIDExpiry = Race.credentials(0, issuedAt: Race.t0)
        withIDExpiry.idTokenExpiresAt = Race.t0.addingTimeInterval(60)
        var neverExpiring = Race.credentials(0, issuedAt: Race.t0)
        neverExpiring.expiresAt = nil
        for credentials in [Race.credentials(0, issuedAt: Race.t0), withIDExpiry, neverExpiring] {
            let profile = Race.profile(credentials)
            #expect(TokenTiming(profile).expiry(of: kind) == kind.expiry(of: credentials))
            #expect(SharedCredentials(credentials).expiry(of: kind) == kind.expiry(of: credentials))
        }
        #expect(TokenTiming(Race.profile(Race.credentials(0, issuedAt: Race.t0))).expiry(of: .idToken) == Race.t0.addingTimeInterval(3600))
        #expect(TokenTiming(Race.profile(withIDExpiry)).expiry(of: .idToken) == Race.t0.addingTimeInterval(60))
    }

    /// The verdict on the dates alone is the verdict on the profile, across a token's life.
    @Test(arguments: [TokenKind.any, .idToken])
    func theVerdictOnTheDatesIsTheVerdictOnTheProfile(_ kind: TokenKind) {
        var credentials = Race.credentials(0, issuedAt: Race.t0)
        credentials.idTokenExpiresAt = Race.t0.addingTimeInterval(1800)
        let profile = Race.profile(credentials)
        let decision = RefreshDecision(
            advisoryWindow: .seconds(300), mandatoryWindow: .seconds(60), kind: kind, minimumValidity: .seconds(120),
            requestStart: Race.t0.addingTimeInterval(-1))
        for offset in stride(from: 0.0, through: 3700, by: 25) {
            let now = Race.t0.addingTimeInterval(offset)
            #expect(decision.verdict(for: TokenTiming(profile), now: now) == decision.verdict(for: profile, now: now))
        }
    }
}
