import LoginKitHTTP

/// A gate test doubles hold calls at: `pass()` suspends until the test calls `open()`, after which
/// every call passes at once. `arrivals` counts the calls that came, and `arrived(count:)` lets the
/// test await the moment `count` calls have come (no polling, no sleep).
public final class TestGate: Sendable {
    private struct State {
        var isOpen = false
        var held: [CheckedContinuation<Void, Never>] = []
        var arrivals = 0
        var watchers: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }
    private let state = LockedState(State())

    public init() {}

    /// How many calls came to the gate.
    public var arrivals: Int { state.withLock { $0.arrivals } }

    /// Counts this call, then waits while the gate is closed.
    public func pass() async {
        note()
        await withCheckedContinuation { continuation in
            let passes = state.withLock { state in
                if state.isOpen { return true }
                state.held.append(continuation)
                return false
            }
            if passes { continuation.resume() }
        }
    }

    /// Counts this call without waiting (a call the test only wants to see arrive).
    public func note() {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.arrivals += 1
            let count = state.arrivals
            let ready = state.watchers.filter { $0.count <= count }.map(\.continuation)
            state.watchers.removeAll { $0.count <= count }
            return ready
        }
        for watcher in ready { watcher.resume() }
    }

    /// Returns once `count` calls have come.
    public func arrived(count: Int = 1) async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state in
                if state.arrivals >= count { return true }
                state.watchers.append((count, continuation))
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Lets every held call and every later one through.
    public func open() {
        let held = state.withLock { state in
            state.isOpen = true
            defer { state.held = [] }
            return state.held
        }
        for continuation in held { continuation.resume() }
    }
}
