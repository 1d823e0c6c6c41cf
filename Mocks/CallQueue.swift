import LoginKit
import LoginKitHTTP

/// The calls a mock received, in order: the test awaits the next one with `next()`; nothing polls.
/// Remembers every call so that `unresumed` can list the ones the test never resumed.
final class CallQueue<Call: Sendable>: Sendable {
    private struct State {
        var arrived: [Call] = []
        var waiters: [CheckedContinuation<Call, Never>] = []
        var all: [Call] = []
    }
    private let state = LockedState(State())

    func arrive(_ call: Call) {
        let waiter = state.withLock { state -> CheckedContinuation<Call, Never>? in
            state.all.append(call)
            guard !state.waiters.isEmpty else {
                state.arrived.append(call)
                return nil
            }
            return state.waiters.removeFirst()
        }
        waiter?.resume(returning: call)
    }

    func next() async -> Call {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Call? in
                guard state.arrived.isEmpty else { return state.arrived.removeFirst() }
                state.waiters.append(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Every call received so far.
    var all: [Call] { state.withLock { $0.all } }
}
