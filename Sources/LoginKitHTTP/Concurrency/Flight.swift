/// One operation's outcome, awaited by any number of tasks: each waiter whose task is cancelled
/// stops waiting at once (`CancellationError`) without disturbing the operation or the others.
/// Finished once; later waiters get the outcome at once.
package final class Flight<Value: Sendable>: Sendable {
    private struct State: WaiterHolding, Sendable {
        var waiters = WaiterList<Value, Void>()
        var outcome: Result<Value, any Error>?
    }
    private let state = LockedState(State())

    package init() {}

    /// The outcome, once the operation has finished. Waits on the caller's executor: a storm's
    /// waiters make no executor hop to start waiting or to go on after it.
    ///
    /// - Throws: what the operation threw; `CancellationError` when the waiting task is cancelled.
    package nonisolated(nonsending) func wait() async throws -> Value {
        try await state.suspend { state in
            if let outcome = state.outcome { return .resume(outcome) }
            return .enqueue(())
        }
    }

    /// Hands `outcome` to every waiter, present and future. Only the first call counts.
    package func finish(with outcome: Result<Value, any Error>) {
        let waiters = state.withLock { state -> [CheckedContinuation<Value, any Error>] in
            guard state.outcome == nil else { return [] }
            state.outcome = outcome
            return state.waiters.removeAll()
        }
        for waiter in waiters { waiter.resume(with: outcome) }
    }

    /// Whether ``finish(with:)`` was called.
    package var isFinished: Bool { state.withLock { $0.outcome != nil } }
}
