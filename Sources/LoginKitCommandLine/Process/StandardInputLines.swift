// Built with LoginKit's "CLI" package trait only (Package.swift; docs/architecture.md, "Weight").
#if CLI
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import LoginKit
import LoginKitHTTP

/// Lines from standard input, read on a thread of their own: the pasted redirect URL of a browser
/// login that could not open a browser. Reading blocks in `read(2)`, so it never runs on the
/// cooperative pool; a waiting caller whose task is cancelled (the redirect arrived at the loopback
/// receiver instead, the login timed out) returns at once, while the thread stays blocked until a
/// line or the end of input comes, or the process exits.
///
/// The thread starts on the first ``next()``: a process that never needs a paste never reads stdin.
final class StandardInputLines: Sendable {
    /// The process's standard input.
    static let shared = StandardInputLines()

    private struct State {
        var started = false
        var lines: [String] = []
        var ended = false
        var waiters: [(id: UInt64, continuation: CheckedContinuation<String?, any Error>)] = []
        var nextID: UInt64 = 0
        var cancelledEarly: Set<UInt64> = []
    }
    private let state = LockedState(State())

    private init() {}

    /// The next line, without its newline; `nil` at the end of input.
    ///
    /// - Throws: `CancellationError` when the calling task is cancelled; the line it would have
    ///   read is kept for the next caller.
    func next() async throws -> String? {
        let (id, start) = state.withLock { state -> (UInt64, Bool) in
            defer {
                state.nextID += 1
                state.started = true
            }
            return (state.nextID, !state.started)
        }
        if start { startReading() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<String?, any Error>) in
                let immediate = state.withLock { state -> Result<String?, any Error>? in
                    if state.cancelledEarly.remove(id) != nil { return .failure(CancellationError()) }
                    if !state.lines.isEmpty { return .success(state.lines.removeFirst()) }
                    if state.ended { return .success(nil) }
                    state.waiters.append((id: id, continuation: continuation))
                    return nil
                }
                if let immediate { continuation.resume(with: immediate) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<String?, any Error>? in
                if let index = state.waiters.firstIndex(where: { $0.id == id }) {
                    return state.waiters.remove(at: index).continuation
                }
                state.cancelledEarly.insert(id)  // not waiting yet (or done: the entry is never looked up)
                return nil
            }
            waiter?.resume(throwing: CancellationError())
        }
    }

    private func startReading() {
        runOnThreadOfItsOwn { [self] in
            while let line = readLine(strippingNewline: true) {
                deliver(line)
            }
            finish()
        }
    }

    private func deliver(_ line: String) {
        let waiter = state.withLock { state -> CheckedContinuation<String?, any Error>? in
            guard !state.waiters.isEmpty else {
                state.lines.append(line)
                return nil
            }
            return state.waiters.removeFirst().continuation
        }
        waiter?.resume(returning: line)
    }

    private func finish() {
        let waiters = state.withLock { state -> [CheckedContinuation<String?, any Error>] in
            state.ended = true
            defer { state.waiters.removeAll() }
            return state.waiters.map { $0.continuation }
        }
        for waiter in waiters { waiter.resume(returning: nil) }
    }
}

/// Runs `body` on a thread of its own (blocking reads and `waitpid` never hold the cooperative
/// pool); on the rare failure to start a thread, in a detached task instead, so that it still runs.
func runOnThreadOfItsOwn(_ body: @escaping @Sendable () -> Void) {
    if !startDetachedThread(body) {
        Task.detached { body() }
    }
}
#endif
