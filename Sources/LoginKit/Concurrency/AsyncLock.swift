import LoginKitHTTP

/// A fair (FIFO) mutual-exclusion lock for tasks: waiting suspends, it never blocks a thread.
/// A waiter whose task is cancelled leaves the queue and throws `CancellationError`.
final class AsyncLock: Sendable {
    private struct State {
        var isLocked = false
        var waiters: [(id: UInt64, continuation: CheckedContinuation<Void, any Error>)] = []
        var nextID: UInt64 = 0
        var cancelledBeforeQueued: Set<UInt64> = []
    }
    private let state = LockedState(State())

    /// Runs `body` while holding the lock.
    nonisolated(nonsending) func withLock<T>(_ body: () async throws -> T) async throws -> T {
        try await acquire()
        do {
            let result = try await body()
            release()
            return result
        } catch {
            release()
            throw error
        }
    }

    private func acquire() async throws {
        let id = state.withLock { state -> UInt64? in
            if !state.isLocked {
                state.isLocked = true
                return nil
            }
            defer { state.nextID += 1 }
            return state.nextID
        }
        guard let id else { return }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let cancelled = state.withLock { state -> Bool in
                    if state.cancelledBeforeQueued.remove(id) != nil { return true }
                    state.waiters.append((id, continuation))
                    return false
                }
                if cancelled { continuation.resume(throwing: CancellationError()) }
            }
        } onCancel: {
            let continuation = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                if let index = state.waiters.firstIndex(where: { $0.id == id }) {
                    return state.waiters.remove(at: index).continuation
                }
                // Not queued yet (or already handed the lock): remember, so a late queueing fails fast.
                state.cancelledBeforeQueued.insert(id)
                return nil
            }
            continuation?.resume(throwing: CancellationError())
        }
        // Handed the lock after a cancellation that came too late to matter: the id is stale.
        state.withLock { _ = $0.cancelledBeforeQueued.remove(id) }
    }

    private func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            guard !state.waiters.isEmpty else {
                state.isLocked = false
                return nil
            }
            return state.waiters.removeFirst().continuation  // ownership passes straight to the next waiter
        }
        next?.resume()
    }
}
