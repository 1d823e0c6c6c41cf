// Built with LoginKit's "Postgres" package trait only (Package.swift; docs/architecture.md, "Weight").
#if Postgres
import LoginKit
import LoginKitHTTP

/// What a store's transactions went through, counted, for tests to await rather than poll: a test
/// that restarts PostgreSQL waits until every waiter has asked for its lock.
package final class TransactionProgress: Sendable {
    /// A step a transaction takes.
    package enum Step: Hashable, Sendable {
        /// A transaction sent its lock request: from then on it holds the lock or waits for it.
        case lockRequested
        /// A transaction's writes were committed on a new connection after the first one closed.
        case writtenAgain
    }

    private struct State {
        var counts: [Step: Int] = [:]
        var watchers: [UInt64: AsyncStream<Void>.Continuation] = [:]
        var nextWatcher: UInt64 = 0
    }

    private let state = LockedState(State())

    func record(_ step: Step) {
        let watchers = state.withLock { state in
            state.counts[step, default: 0] += 1
            return Array(state.watchers.values)
        }
        for watcher in watchers { watcher.yield() }
    }

    /// How many times `step` was taken.
    package func count(_ step: Step) -> Int {
        state.withLock { $0.counts[step] ?? 0 }
    }

    /// Returns once `step` was taken `count` times; throws after `timeout` or on cancellation.
    package func wait(until step: Step, count: Int, timeout: Duration = .seconds(60)) async throws {
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { state in
            state.nextWatcher += 1
            state.watchers[state.nextWatcher] = continuation
            return state.nextWatcher
        }
        defer { state.withLock { $0.watchers.removeValue(forKey: id) }?.finish() }
        continuation.yield()  // look once at the counts as they are
        try await withTimeout(timeout, "PostgresTokenStore", "\(step) was not taken \(count) times within \(timeout)") {
            for await _ in stream where self.count(step) >= count { return }
            throw CancellationError()
        }
    }
}
#endif
