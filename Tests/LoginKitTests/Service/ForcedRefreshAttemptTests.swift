import Foundation
@testable import LoginKit
import LoginKitHTTP
import LoginKitMocks
import LoginKitTestSupport
import Testing

/// What a forced refresh costs when it cannot replace the refused token, and what a refresh the
/// user asked for leaves behind: one refresh attempt for any number of callers refusing one token,
/// even when it fails (a second one would send the same refresh token again); no quiet period
/// after a refresh the user asked for.
@Suite(.timeLimit(.minutes(3)))
struct ForcedRefreshAttemptTests {
    static let now = Race.t0.addingTimeInterval(60)  // 3540 s left on access-9

    /// An API whose refreshes lose their answer (a timeout once the request had left): each waits
    /// at `gate` (which counts them) until the test opens it.
    struct LostAnswerAPI: AuthAPI {
        let gate = TestGate()
        var source: CredentialSource { Race.source }
        func logIn(for id: User.ID, with password: String) async throws -> Credentials { throw CancellationError() }
        func refresh(_ credentials: Credentials) async throws -> Credentials {
            await gate.pass()
            throw NetworkError(.timedOut, "the provider did not answer in time")
        }
        func revoke(_ credentials: Credentials) async throws -> Bool { false }
    }

    /// Fifty callers refuse access-9 in requests sent at the same time; the one refresh they share
    /// loses its answer while access-9 is still valid, so it hands access-9 back to all of them. A
    /// caller that joined that refresh — started for the refusal of those very credentials — does
    /// not look again: looking again would start a second refresh, sending the refresh token the
    /// provider may already have retired, milliseconds later.
    ///
    /// Deterministic: the store has no change stamps, so every caller takes the actor's step. Each
    /// joiner's step reads the store, then the clock for its verdict — the moment the test is told
    /// — on the actor, which it holds until it has joined the refresh; the refresh needs the actor
    /// to end, and waits at the API's gate until all fifty have joined.
    @Test func fiftyCallersRefusingATokenMakeOneRefreshAttemptEvenWhenItFails() async throws {
        let manual = ManualClock(start: Self.now)
        let shared = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(9, issuedAt: Race.t0))])
        let store = ForcedRefreshTests.GatedStore(shared)
        store.openGate()  // no transaction waits at the store: the API holds the refresh
        let api = LostAnswerAPI()
        let service = AuthService(api: api, store: store, clock: manual)
        let sentAt = manual.now
        var callers = [Task { try await service.validCredentials(rejecting: "access-9", sentAt: sentAt).accessToken }]
        await api.gate.arrived(count: 1)  // the first caller's refresh is at the provider
        let joined = TestGate()
        for count in 1..<50 {
            store.onNextRead { manual.onNextRead { joined.note() } }
            callers.append(Task { try await service.validCredentials(rejecting: "access-9", sentAt: sentAt).accessToken })
            await joined.arrived(count: count)
        }
        api.gate.open()
        for caller in callers { #expect(try await caller.value == "access-9") }
        #expect(api.gate.arrivals == 1, "one refresh attempt for the fifty callers")
    }

    /// `loginkit token --force-refresh` (`refreshByRequest`) marks nothing: a resource server that
    /// refuses the token it brought, five seconds later, gets it refreshed at once — no quiet
    /// period. That refresh, for a refusal, is marked.
    @Test func aRefreshTheUserAskedForStartsNoQuietPeriod() async throws {
        let clock = ManualClock(start: Self.now)
        let api = ForcedRefreshTests.CountingAPI { Race.credentials($0, issuedAt: clock.now) }
        let store = InMemoryTokenStore(profiles: ["default": Race.profile(Race.credentials(0, issuedAt: Race.t0))])
        let service = AuthService(api: api, store: store, clock: clock)
        #expect(try await service.refreshByRequest(replacing: "access-0", heldSince: clock.now).accessToken == "access-1")
        #expect(try await store.profile(named: "default")?.attributes[AuthService.forcedRefreshAttribute] == nil)
        clock.advance(by: .seconds(5))
        #expect(try await service.validCredentials(rejecting: "access-1").accessToken == "access-2")
        #expect(api.refreshCount == 2)
        let mark = try await store.profile(named: "default")?.attributes[AuthService.forcedRefreshAttribute]
        #expect(mark == String(Int64(clock.now.timeIntervalSince1970)))
    }

    // MARK: The decision

    typealias Decisions = ForcedRefreshDecisionTests

    /// A forced refresh for `token`, asked for by the user.
    static func explicitDecision(rejecting token: String) -> RefreshDecision {
        var decision = Decisions.decision(rejecting: token)
        decision.rejection?.isExplicit = true
        return decision
    }

    @Test func onlyARefreshForAResourceServersRefusalIsMarked() {
        let t0 = Decisions.t0
        let refused = Decisions.profile("a", age: 60)
        let explicit = Self.explicitDecision(rejecting: "a")
        #expect(explicit.mustRefresh(stored: refused, firstSeen: refused, now: t0))
        #expect(!explicit.marksForcedRefresh(of: refused, now: t0))
        #expect(Decisions.decision(rejecting: "a").marksForcedRefresh(of: refused, now: t0))
        #expect(!Decisions.decision(rejecting: "b").marksForcedRefresh(of: refused, now: t0))
        #expect(!Decisions.decision(rejecting: nil).marksForcedRefresh(of: refused, now: t0))
        // Within the quiet period of an earlier forced refresh: the user's refresh goes ahead,
        // unmarked; a refusal's is not made at all.
        let marked = Decisions.profile("a", age: 60, forcedAgo: 5)
        #expect(explicit.mustRefresh(stored: marked, firstSeen: marked, now: t0))
        #expect(!explicit.marksForcedRefresh(of: marked, now: t0))
        #expect(!Decisions.decision(rejecting: "a").marksForcedRefresh(of: marked, now: t0))
    }

    @Test func aJoinerLooksAgainOnlyAfterARefreshNotStartedForTheCredentialsItGotBack() {
        let t0 = Decisions.t0
        let refused = Decisions.profile("a", age: 60).credentials  // issued at t0 - 60
        let decision = Decisions.decision(rejecting: "a")  // refused in a request sent at t0
        #expect(decision.looksAgain(after: refused, fromRefreshFor: nil), "started for another reason")
        #expect(!decision.looksAgain(after: refused, fromRefreshFor: TokenRejection(accessToken: "a", sentAt: t0)))
        #expect(!decision.looksAgain(after: refused, fromRefreshFor: TokenRejection(accessToken: "a", sentAt: t0.addingTimeInterval(-10))))
        #expect(!decision.looksAgain(after: refused, fromRefreshFor: Self.explicitDecision(rejecting: "a").rejection))
        #expect(decision.looksAgain(after: refused, fromRefreshFor: TokenRejection(accessToken: "b", sentAt: t0)), "started for another token")
        #expect(
            decision.looksAgain(after: refused, fromRefreshFor: TokenRejection(accessToken: "a", sentAt: t0.addingTimeInterval(-120))),
            "started for that token as issued before these credentials")
        #expect(!decision.looksAgain(after: Decisions.profile("b", age: 60).credentials, fromRefreshFor: nil), "not the refused token")
        #expect(!Decisions.decision(rejecting: nil).looksAgain(after: refused, fromRefreshFor: nil), "not a forced call")
    }

    /// What the `notice` says when the quiet period hands a refusal its token back: the seconds of
    /// it left; nothing for any other outcome.
    @Test func theQuietPeriodLeftIsCountedFromTheMark() {
        let t0 = Decisions.t0
        let decision = Decisions.decision(rejecting: "a")
        func left(_ profile: StoredProfile, _ decision: RefreshDecision) -> TimeInterval? {
            decision.quietPeriodLeft(for: profile.credentials, timing: TokenTiming(profile), now: t0)
        }
        #expect(left(Decisions.profile("a", age: 60, forcedAgo: 5), decision) == 25)
        #expect(left(Decisions.profile("a", age: 60, forcedAgo: -10), decision) == 40, "a mark from a clock a little ahead")
        #expect(left(Decisions.profile("a", age: 60, forcedAgo: 31), decision) == nil)
        #expect(left(Decisions.profile("a", age: 60), decision) == nil, "no mark: refreshed")
        #expect(left(Decisions.profile("b", age: 60, forcedAgo: 5), decision) == nil, "another token")
        #expect(left(Decisions.profile("a", age: 60, forcedAgo: 5), Self.explicitDecision(rejecting: "a")) == nil, "the user's refresh")
        #expect(left(Decisions.profile("a", age: 60, forcedAgo: 5), Decisions.decision(rejecting: nil)) == nil)
    }
}
