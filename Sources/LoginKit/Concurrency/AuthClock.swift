#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// The time `AuthService` lives by: the wall-clock `now` that token expiries are compared with, and
/// sleeping (retry backoff, proactive refresh, device-flow polling). Tests inject a manual clock
/// (`ManualClock` in `LoginKitMocks`) so that nothing waits in real time.
public protocol AuthClock: Sendable {
    /// The current wall-clock time.
    var now: Date { get }
    /// Suspends for `duration`; throws `CancellationError` when the task is cancelled.
    func sleep(for duration: Duration) async throws
}

/// The real clock: `Date()` and `Task.sleep`.
public struct SystemClock: AuthClock {
    /// The real clock; it has no state, so every instance is the same.
    public init() {}
    public var now: Date { Date() }
    public func sleep(for duration: Duration) async throws {
        try await Task.sleep(for: duration)
    }
}

extension Duration {
    /// The duration in seconds, as a `TimeInterval`.
    package var timeInterval: TimeInterval {
        let (seconds, attoseconds) = components  // one Int128 division, not two
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// `timeInterval` seconds, clamped to ±10⁹ s (a provider's absurd `expires_in` must not trap).
    package init(timeInterval: TimeInterval) {
        guard timeInterval.isFinite else {
            self = .zero
            return
        }
        self = .milliseconds(Int64((min(max(timeInterval, -1e9), 1e9) * 1000).rounded()))
    }
}
