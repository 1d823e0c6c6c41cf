/// The owner of background tasks: each task it starts is tracked until it ends, and
/// ``shutdown(cancelling:)`` awaits every one of them. After shutdown it starts nothing.
///
/// Types that keep work going in the background (proactive refresh, session bookkeeping) start it
/// here instead of in a fire-and-forget `Task {}`, so their host can stop them and know they ended.
package final class TaskOwner: Sendable {
    private struct State {
        var tasks: [UInt64: Task<Void, Never>] = [:]
        var nextID: UInt64 = 0
        var isShutDown = false
    }
    private let state = LockedState(State())

    package init() {}

    /// Starts `work` as a tracked task; `nil` after shutdown.
    @discardableResult
    package func spawn(_ work: @escaping @Sendable () async -> Void) -> Task<Void, Never>? {
        state.withLock { state -> Task<Void, Never>? in
            guard !state.isShutDown else { return nil }
            let id = state.nextID
            state.nextID += 1
            let task = Task {
                await work()
                self.forget(id)
            }
            state.tasks[id] = task
            return task
        }
    }

    /// Whether ``shutdown(cancelling:)`` was called.
    package var isShutDown: Bool { state.withLock { $0.isShutDown } }

    /// Starts nothing more, and waits until every tracked task has ended (cancelling them first
    /// when asked).
    package func shutdown(cancelling: Bool) async {
        let tasks = state.withLock { state in
            state.isShutDown = true
            return Array(state.tasks.values)
        }
        for task in tasks {
            if cancelling { task.cancel() }
            await task.value
        }
    }

    private func forget(_ id: UInt64) {
        _ = state.withLock { $0.tasks.removeValue(forKey: id) }
    }
}
