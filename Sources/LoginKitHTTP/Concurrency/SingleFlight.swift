/// Work that runs at most once at a time per key, however many tasks ask for its result: the
/// package's single-flight primitive (JWKS fetches, provider metadata, the version policy).
///
/// - The first caller for a key starts the operation in a task this object owns; later callers
///   join it and get the same result (a ``Flight``).
/// - A caller that is cancelled stops waiting at once; the operation goes on for the others.
/// - A finished flight is forgotten (results are not cached here: the caller caches what it
///   wants), and never clobbers a newer one for the same key.
/// - ``finishAll(cancelling:)`` awaits every running operation (at shutdown).
package final class SingleFlight<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private struct Running: Sendable {
        let id: UInt64
        let flight: Flight<Value>
        let task: Task<Void, Never>
    }
    private struct State: Sendable {
        var running: [Key: Running] = [:]
        var nextID: UInt64 = 0
    }
    private let state = LockedState(State())

    package init() {}

    /// The result of the operation running for `key`, or of `operation`, started now.
    ///
    /// - Throws: what the operation throws; `CancellationError` when the caller is cancelled.
    package func run(_ key: Key, _ operation: @escaping @Sendable () async throws -> Value) async throws -> Value {
        try await flight(for: key, operation).wait()
    }

    /// Whether an operation is running for `key`.
    package func isRunning(_ key: Key) -> Bool {
        state.withLock { $0.running[key] != nil }
    }

    /// Waits until every running operation has ended, cancelling them first when asked.
    package func finishAll(cancelling: Bool) async {
        let tasks = state.withLock { $0.running.values.map(\.task) }
        for task in tasks {
            if cancelling { task.cancel() }
            await task.value
        }
    }

    private func flight(for key: Key, _ operation: @escaping @Sendable () async throws -> Value) -> Flight<Value> {
        state.withLock { state -> Flight<Value> in
            if let running = state.running[key] { return running.flight }
            let id = state.nextID
            state.nextID += 1
            let flight = Flight<Value>()
            let task = Task {
                let outcome: Result<Value, any Error>
                do { outcome = .success(try await operation()) } catch { outcome = .failure(error) }
                self.end(key, id)
                flight.finish(with: outcome)
            }
            state.running[key] = Running(id: id, flight: flight, task: task)
            return flight
        }
    }

    private func end(_ key: Key, _ id: UInt64) {
        state.withLock { state in
            if state.running[key]?.id == id { state.running[key] = nil }
        }
    }
}
