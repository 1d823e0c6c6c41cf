import LoginKitHTTP

/// Something that happened to a profile's credentials. The kit reports; the host decides what to do.
public enum AuthEvent: Sendable {
    /// A login succeeded and its credentials were saved.
    case loggedIn(User)
    /// A browser login is waiting for the user to sign in at `url` (show it in case the browser
    /// does not open).
    case waitingForBrowser(url: String)
    /// The credentials were refreshed and saved.
    case refreshed
    /// The profile was logged out (revoked where possible, deleted).
    case loggedOut
    /// The provider rejected the refresh token; the profile was cleared and a login is required.
    case credentialsRejected
    /// The store could not take a save. Either fresh credentials could not be saved: callers still
    /// got them, but another process will not, and the provider has retired the refresh token the
    /// store still holds (`AuthService` keeps the error until a refresh is saved again). Or the
    /// store was found unable to save before a refresh, which was then not sent: callers got the
    /// still-valid credentials.
    case storeFailed(TokenStoreError)
}

/// Fans values out to any number of `AsyncStream` subscribers.
final class Broadcaster<Value: Sendable>: Sendable {
    private struct State {
        var subscribers: [Int: AsyncStream<Value>.Continuation] = [:]
        var nextID = 0
    }
    private let state = LockedState(State())

    /// A new subscription; it ends when the stream is dropped.
    func subscribe(initial: Value? = nil) -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream<Value>.makeStream(bufferingPolicy: .bufferingNewest(64))
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            state.subscribers[state.nextID] = continuation
            return state.nextID
        }
        if let initial { continuation.yield(initial) }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    func emit(_ value: Value) {
        for subscriber in state.withLock({ Array($0.subscribers.values) }) { subscriber.yield(value) }
    }
}
