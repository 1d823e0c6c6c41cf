import Foundation
@testable import LoginKit
import LoginKitHTTP
import Testing

/// The shared refresh's retries as a pure function: which failures are retried, how long each
/// wait lasts for the lowest and highest random draw, and what happens once retries run out.
@Suite struct RetryPolicyTests {
    static let policy = RetryPolicy(maximumRetries: 3, initialBackoff: .seconds(1), maximumBackoff: .seconds(30))
    static let now = Race.t0

    /// Failures, and whether they are transient.
    static let failures: [(any Error, Bool)] = [
        (ServerError(.unavailable, "503"), true),
        (ServerError(.rateLimited, "429"), true),
        (ServerError(.malformedResponse, "html"), false),
        (ServerError(.protocolError, "invalid_request"), false),
        (NetworkError(.connectFailed, "refused"), true),
        (NetworkError(.timedOut, "slow"), true),
        (NetworkError(.connectionLost, "reset"), true),
        (NetworkError(.hostNotFound, "dns"), true),
        (NetworkError(.tls, "certificate"), false),
        (NetworkError(.responseTooLarge, "big"), false),
        (LoginError(.refreshTokenRejected, "invalid_grant"), false),
        (CancellationError(), false),
    ]

    @Test(arguments: RetryPolicyTests.failures)
    func onlyTransientFailuresAreRetried(_ error: any Error, transient: Bool) {
        #expect(RetryPolicy.isTransient(error) == transient)
        let expected: RetryDecision = transient ? .retry(after: .seconds(1)) : .fail
        #expect(Self.policy.decision(after: error, attempt: 0, credentialsStillValidUntil: nil, now: Self.now, random: 1) == expected)
    }

    /// Retry `n` waits between half and all of `min(1 s × 2ⁿ, 30 s)`.
    @Test(arguments: [
        (0, Duration.milliseconds(500), Duration.seconds(1)),
        (1, .seconds(1), .seconds(2)),
        (2, .seconds(2), .seconds(4)),
        (3, .seconds(4), .seconds(8)),
        (4, .seconds(8), .seconds(16)),
        (5, .seconds(15), .seconds(30)),
        (40, .seconds(15), .seconds(30)),
    ])
    func eachRetryWaitsBetweenHalfAndAllOfItsBackoff(attempt: Int, shortest: Duration, longest: Duration) {
        let policy = RetryPolicy(maximumRetries: 100, initialBackoff: .seconds(1), maximumBackoff: .seconds(30))
        let error = ServerError(.unavailable, "503")
        #expect(policy.decision(after: error, attempt: attempt, credentialsStillValidUntil: nil, now: Self.now, random: 0) == .retry(after: shortest))
        #expect(policy.decision(after: error, attempt: attempt, credentialsStillValidUntil: nil, now: Self.now, random: 1) == .retry(after: longest))
        let middle = policy.backoff(attempt: attempt, retryAfter: nil, random: 0.5)
        #expect(middle > shortest && middle < longest)
    }

    @Test(arguments: [
        // (Retry-After, random, the wait)
        (Duration.seconds(20), 0.0, Duration.seconds(20)),  // longer than the backoff: it wins
        (.seconds(20), 1.0, .seconds(20)),
        (.milliseconds(100), 0.0, .milliseconds(500)),  // shorter: the backoff wins
        (.seconds(3600), 1.0, .seconds(30)),  // never above the longest wait
    ])
    func retryAfterWinsWhenLongerButNeverExceedsTheLongestWait(retryAfter: Duration, random: Double, wait: Duration) {
        let error = ServerError(.rateLimited, "429", status: 429, retryAfter: retryAfter)
        #expect(Self.policy.decision(after: error, attempt: 0, credentialsStillValidUntil: nil, now: Self.now, random: random) == .retry(after: wait))
    }

    @Test(arguments: [
        // (the old credentials' expiry, seconds from now; nil: they never expire), the decision
        (Optional(60.0), RetryDecision.keepOld),
        (nil, .fail),
        (0, .fail),
        (-60, .fail),
    ])
    func retriesRunOutIntoTheOldCredentialsWhileTheyAreValid(expiresIn: TimeInterval?, expected: RetryDecision) {
        let expiry = expiresIn.map { Self.now.addingTimeInterval($0) }
        let error = NetworkError(.connectFailed, "refused")
        #expect(Self.policy.decision(after: error, attempt: 3, credentialsStillValidUntil: expiry, now: Self.now, random: 0.5) == expected)
        #expect(Self.policy.decision(after: error, attempt: 2, credentialsStillValidUntil: expiry, now: Self.now, random: 0.5) != expected, "a retry is left")
    }

    @Test func aFailureThatIsNotTransientNeverKeepsTheOldCredentials() {
        let error = LoginError(.refreshTokenRejected, "invalid_grant")
        let decision = Self.policy.decision(
            after: error, attempt: 3, credentialsStillValidUntil: Self.now.addingTimeInterval(600), now: Self.now, random: 0)
        #expect(decision == .fail)
    }

    @Test func noRetriesMeansTheFirstTransientFailureDecides() {
        let policy = RetryPolicy(maximumRetries: 0, initialBackoff: .seconds(1), maximumBackoff: .seconds(30))
        let error = ServerError(.unavailable, "503")
        #expect(policy.decision(after: error, attempt: 0, credentialsStillValidUntil: Self.now.addingTimeInterval(1), now: Self.now, random: 0) == .keepOld)
        #expect(policy.decision(after: error, attempt: 0, credentialsStillValidUntil: nil, now: Self.now, random: 0) == .fail)
    }

    @Test func theConfigurationsRetriesMakeThePolicy() {
        var configuration = AuthService.Configuration()
        configuration.maximumRetries = 7
        configuration.initialBackoff = .seconds(2)
        configuration.maximumBackoff = .seconds(9)
        #expect(configuration.retryPolicy == RetryPolicy(maximumRetries: 7, initialBackoff: .seconds(2), maximumBackoff: .seconds(9)))
    }
}
