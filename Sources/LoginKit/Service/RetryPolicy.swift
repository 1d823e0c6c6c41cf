#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKitHTTP

/// What the shared refresh does after a failed attempt.
enum RetryDecision: Sendable, Hashable {
    /// Wait this long, then try again.
    case retry(after: Duration)
    /// Stop trying and serve the old credentials: they are still valid.
    case keepOld
    /// Stop trying and throw the error.
    case fail
}

/// When the shared refresh tries again, as a pure function of the failure, the retries already
/// made, the old credentials' expiry, the time and a random number (RetryPolicyTests).
///
/// - Only a transient failure is retried (``isTransient(_:)``); any other fails at once.
/// - Retry `n` (counted from 0) waits a random time between half and all of
///   `min(initialBackoff × 2ⁿ, maximumBackoff)` — equal jitter: hosts that failed together spread
///   out, and no retry follows at once — or the server's `Retry-After` when that is longer, and
///   never more than `maximumBackoff`.
/// - A transient failure after `maximumRetries` retries keeps the old credentials while they are
///   valid, and fails once they have expired.
struct RetryPolicy: Sendable, Hashable {
    var maximumRetries: Int
    var initialBackoff: Duration
    var maximumBackoff: Duration

    /// What to do after `error`, with `attempt` retries made so far, when the old credentials
    /// expire at `credentialsStillValidUntil` (`nil`: no expiry is known, so they are not kept).
    /// `random`, from 0 to 1, picks the wait within its jitter.
    func decision(
        after error: any Error, attempt: Int, credentialsStillValidUntil expiry: Date?, now: Date, random: Double
    ) -> RetryDecision {
        guard Self.isTransient(error) else { return .fail }
        if attempt < maximumRetries {
            return .retry(after: backoff(attempt: attempt, retryAfter: (error as? ServerError)?.retryAfter, random: random))
        }
        if let expiry, expiry > now { return .keepOld }
        return .fail
    }

    /// The wait before retry `attempt` (from 0): `random` (0 to 1) of the way from half of
    /// `min(initialBackoff × 2^attempt, maximumBackoff)` to all of it, or `retryAfter` when that is
    /// longer; never more than `maximumBackoff`.
    func backoff(attempt: Int, retryAfter: Duration?, random: Double) -> Duration {
        let maximum = max(0, maximumBackoff.timeInterval)
        let ceiling = min(maximum, max(0, initialBackoff.timeInterval) * Double(1 << min(max(attempt, 0), 20)))
        let jittered = ceiling * (0.5 + 0.5 * min(max(random, 0), 1))
        let wait = max(jittered, retryAfter?.timeInterval ?? 0)
        return Duration(timeInterval: min(wait, maximum))
    }

    /// Whether trying again later may succeed: a `ServerError` that says so (5xx, 429), and a
    /// `NetworkError` that could not connect, timed out, lost the connection or found no host.
    static func isTransient(_ error: any Error) -> Bool {
        if let error = error as? ServerError { return error.isTransient }
        if let error = error as? NetworkError {
            return [.connectFailed, .timedOut, .connectionLost, .hostNotFound].contains(error.code)
        }
        return false
    }
}

extension AuthService.Configuration {
    /// The retries this configuration asks for.
    var retryPolicy: RetryPolicy {
        RetryPolicy(maximumRetries: maximumRetries, initialBackoff: initialBackoff, maximumBackoff: maximumBackoff)
    }
}
