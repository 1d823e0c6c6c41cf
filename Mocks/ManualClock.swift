#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import LoginKit
import LoginKitHTTP

/// An `AuthClock` that moves only when the test says so.
///
/// `sleep(for:)` suspends until ``advance(by:)`` moves the clock past its deadline. A test can
/// `await` ``waitForSleepers(_:)`` — the moment the code under test is asleep — instead of polling.
/// Cancelling a sleeping task resumes it with `CancellationError`.
public final class ManualClock: AuthClock {
    private struct State: WaiterHolding, Sendable {
        var now: Date
        /// The sleepers, tagged with their deadlines.
        var waiters = WaiterList<Void, Date>()
        var sleeperWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
        /// Every duration ever slept, in order: lets tests check intervals.
        var sleptDurations: [Duration] = []
        /// Run once, the next time the time is read, before it is answered.
        var readHook: (@Sendable () -> Void)?
    }
    private let state: LockedState<State>

    /// A clock that starts at `start` (default: the real time when created).
    public init(start: Date = Date()) {
        state = LockedState(State(now: start))
    }

    public var now: Date {
        // The hook runs outside the lock: it may read or advance this clock itself.
        if let hook = state.withLock({ state in defer { state.readHook = nil }; return state.readHook }) { hook() }
        return state.withLock { $0.now }
    }

    /// Runs `action` once, the next time the time is read, before it is answered: a test acts at
    /// the exact point of a step that reads the clock, on that step's executor.
    package func onNextRead(_ action: @escaping @Sendable () -> Void) {
        state.withLock { $0.readHook = action }
    }

    /// Every duration passed to `sleep(for:)` so far, in order.
    public var sleptDurations: [Duration] { state.withLock { $0.sleptDurations } }

    /// How many tasks are asleep on this clock now.
    package var sleeperCount: Int { state.withLock { $0.waiters.count } }

    public func sleep(for duration: Duration) async throws {
        try await state.suspend { state in
            state.sleptDurations.append(duration)
            guard duration > .zero else { return .resume(.success(())) }
            // Resuming a continuation only schedules its task, so waking the sleeper-waiters here,
            // under the lock, cannot deadlock.
            let count = state.waiters.count + 1
            for waiter in state.sleeperWaiters where waiter.count <= count { waiter.continuation.resume() }
            state.sleeperWaiters.removeAll { $0.count <= count }
            return .enqueue(state.now.addingTimeInterval(Self.seconds(duration)))
        }
    }

    /// Moves the clock forward and wakes every sleeper whose deadline has come, earliest first.
    public func advance(by duration: Duration) {
        let due = state.withLock { state in
            state.now = state.now.addingTimeInterval(Self.seconds(duration))
            let now = state.now
            return state.waiters.removeAll { $0 <= now }.sorted { $0.tag < $1.tag }
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// Returns once at least `count` tasks are asleep on this clock.
    public func waitForSleepers(_ count: Int = 1) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state -> Bool in
                if state.waiters.count >= count { return true }
                state.sleeperWaiters.append((count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
