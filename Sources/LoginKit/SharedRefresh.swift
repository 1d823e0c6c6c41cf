
/// One refresh that any number of callers wait for. A waiter whose task is cancelled stops
/// waiting at once; the refresh itself goes on for the others.
final class SharedRefresh: Sendable {
    private struct State {
        var waiters: [UInt64: CheckedContinuation<Credentials, any Error>] = [:]
        var nextID: UInt64 = 0
        var result: Result<Credentials, any Error>?
        var cancelledEarly: Set<UInt64> = []
    }
    private let state = LockedState(State())

    /// Waits for the outcome.
    func wait() async throws -> Credentials {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Credentials, any Error>) in
                let immediate = state.withLock { state -> Result<Credentials, any Error>? in
                    if state.cancelledEarly.remove(id) != nil { return .failure(CancellationError()) }
                    if let result = state.result { return result }
                    state.waiters[id] = continuation
                    return nil
                }
                if let immediate { continuation.resume(with: immediate) }
            }
        } onCancel: {
            let continuation = state.withLock { state -> CheckedContinuation<Credentials, any Error>? in
                if let waiter = state.waiters.removeValue(forKey: id) { return waiter }
                if state.result == nil { state.cancelledEarly.insert(id) }
                return nil
            }
            continuation?.resume(throwing: CancellationError())
        }
    }

    /// Hands the outcome to every waiter, present and future.
    func finish(with result: Result<Credentials, any Error>) {
        let waiters = state.withLock { state in
            state.result = result
            state.cancelledEarly.removeAll()
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(with: result) }
    }
}
