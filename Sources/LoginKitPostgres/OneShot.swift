// Built with LoginKit's "Postgres" package trait only (Package.swift; docs/architecture.md, "Weight").
#if Postgres
import LoginKit
import LoginKitHTTP

/// A value delivered once, awaited by one task: the first `fulfil` or `fail` wins, later ones are
/// ignored. The hand-off between a caller and the task that holds its database transaction.
final class OneShot<Value: Sendable>: Sendable {
    private let state = LockedState<State>(.pending(nil))

    private enum State {
        case pending(CheckedContinuation<Value, any Error>?)
        case done(Result<Value, any Error>)
    }

    func fulfil(_ value: Value) { complete(.success(value)) }

    func fail(_ error: any Error) { complete(.failure(error)) }

    private func complete(_ result: Result<Value, any Error>) {
        let waiter = state.withLock { state -> CheckedContinuation<Value, any Error>? in
            guard case .pending(let waiter) = state else { return nil }
            state = .done(result)
            return waiter
        }
        waiter?.resume(with: result)
    }

    /// The value, once it arrives. Only one task may wait.
    func value() async throws -> Value {
        try await withCheckedThrowingContinuation { continuation in
            let ready = state.withLock { state -> Result<Value, any Error>? in
                switch state {
                case .done(let result): return result
                case .pending: state = .pending(continuation); return nil
                }
            }
            if let ready { continuation.resume(with: ready) }
        }
    }
}
#endif
