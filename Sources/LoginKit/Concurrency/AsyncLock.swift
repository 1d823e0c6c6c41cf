import LoginKitHTTP

/// A fair (FIFO) mutual-exclusion lock for tasks: waiting suspends, it never blocks a thread.
///
/// Releasing hands the lock straight to the oldest waiter, so a task that arrives later never takes
/// it first. A waiter whose task is cancelled while it waits, or before it would wait, throws
/// `CancellationError` without ever holding the lock; one handed the lock before its cancellation
/// arrived holds it, runs its body and releases it as usual.
final class AsyncLock: Sendable {
    private struct State: WaiterHolding, Sendable {
        /// Held by a task; stays `true` while the lock passes from one waiter to the next.
        var isLocked = false
        var waiters = WaiterList<Void, Void>()
    }
    private let state = LockedState(State())

    /// Runs `body` while holding the lock.
    ///
    /// - Throws: what `body` throws; `CancellationError` when the task is cancelled while it waits.
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

    /// Takes the lock when it is free, else waits in the list until `release` hands it over. The
    /// decision and the queueing happen under the state's lock, as does the handing over.
    private nonisolated(nonsending) func acquire() async throws {
        try await state.suspend { state in
            if state.isLocked { return .enqueue(()) }
            state.isLocked = true
            return .resume(.success(()))
        }
    }

    /// Hands the lock to the oldest waiter (it stays locked), or unlocks it when none waits.
    private func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            guard let next = state.waiters.removeFirst() else {
                state.isLocked = false
                return nil
            }
            return next
        }
        next?.resume()
    }
}

/// One ``AsyncLock`` per name, made at the first use and dropped once no task holds or waits for
/// it: tasks working on one name take turns, tasks on different names never wait for each other.
final class NamedAsyncLocks: Sendable {
    private let locks = LockedState<[String: (lock: AsyncLock, users: Int)]>([:])

    /// Runs `body` holding the lock of `name`.
    ///
    /// - Throws: what `body` throws; `CancellationError` when the task is cancelled while it waits.
    nonisolated(nonsending) func withLock<T>(_ name: String, _ body: () async throws -> T) async throws -> T {
        let lock = locks.withLock { locks in
            var entry = locks[name] ?? (AsyncLock(), 0)
            entry.users += 1
            locks[name] = entry
            return entry.lock
        }
        defer {
            locks.withLock { locks in
                guard let entry = locks[name] else { return }
                locks[name] = entry.users <= 1 ? nil : (entry.lock, entry.users - 1)
            }
        }
        return try await lock.withLock(body)
    }
}
