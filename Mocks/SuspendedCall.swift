import LoginKit
import LoginKitHTTP
#if canImport(Testing)
import Testing
#endif

/// A call the code under test made into a mock, suspended until the test resumes it.
///
/// Resume exactly once: a second resume is reported as a test failure naming the call and ignored.
public final class SuspendedCall<Arguments: Sendable, Value: Sendable>: Sendable {
    /// The call as written, e.g. `logIn(for: demo)`; never a password.
    package let name: String
    /// What the call was made with.
    public let arguments: Arguments
    private struct State: WaiterHolding, Sendable {
        var waiters = WaiterList<Value, Void>()
        var resumed = false
        var cancelled = false
        var early: Result<Value, any Error>?
    }
    private let state = LockedState(State())

    init(name: String, arguments: Arguments) {
        self.name = name
        self.arguments = arguments
    }

    /// Makes the suspended call return `value`.
    public func resume(returning value: Value) {
        resume(with: .success(value))
    }

    /// Makes the suspended call throw `error`.
    public func resume(throwing error: any Error) {
        resume(with: .failure(error))
    }

    /// Whether the test has resumed this call.
    package var isResumed: Bool { state.withLock { $0.resumed } }

    /// Whether the caller's task was cancelled while the call was suspended (it then threw
    /// `CancellationError`, as a real call does; resuming it afterwards does nothing).
    public var isCancelled: Bool { state.withLock { $0.cancelled } }

    func resume(with result: Result<Value, any Error>) {
        let (accepted, waiting) = state.withLock { state -> (Bool, CheckedContinuation<Value, any Error>?) in
            guard !state.resumed else { return (false, nil) }
            state.resumed = true
            guard let continuation = state.waiters.removeFirst() else {
                if !state.cancelled { state.early = result }  // the caller has not suspended yet: it gets this on arrival
                return (true, nil)
            }
            return (true, continuation)
        }
        guard accepted else {
            reportMisuse("\(name) was resumed twice; the second resume was ignored")
            return
        }
        waiting?.resume(with: result)
    }

    /// Suspends the caller until the test resumes the call, or the caller's task is cancelled.
    func value() async throws -> Value {
        do {
            return try await state.suspend { state in
                if let early = state.early { return .resume(early) }
                return .enqueue(())
            }
        } catch is CancellationError {
            state.withLock { $0.cancelled = true }
            throw CancellationError()
        }
    }
}

/// A call a mock can check at verification time.
protocol VerifiableCall: Sendable {
    var name: String { get }
    var isResumed: Bool { get }
    var isCancelled: Bool { get }
    func releaseNeverResumed()
}

extension SuspendedCall: VerifiableCall {
    func releaseNeverResumed() {
        resume(with: .failure(MockCallNeverResumed(call: name)))
    }
}

extension CallQueue where Call: VerifiableCall {
    /// Reports every call never resumed, and releases it with `MockCallNeverResumed`.
    func verify() {
        for call in all where !call.isResumed && !call.isCancelled {
            reportMisuse("\(call.name) was still suspended when the mock was verified; resume it in the test")
            call.releaseNeverResumed()
        }
    }
}

/// Reports misuse of a mock: a Swift Testing issue when running under Swift Testing.
func reportMisuse(_ message: String) {
    #if canImport(Testing)
    Issue.record(Comment(rawValue: "LoginKitMocks: \(message)"))
    #endif
}

/// Thrown into a call that was still suspended when its mock was verified; the verification has
/// already recorded the test failure that names the call.
package struct MockCallNeverResumed: Error, Sendable, CustomStringConvertible {
    /// The call.
    package let call: String
    package var description: String { "MockCallNeverResumed: \(call) was never resumed" }
}
