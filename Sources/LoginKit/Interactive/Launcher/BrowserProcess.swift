import LoginKitHTTP

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Starting a browser command with `posix_spawnp` (never Foundation's `Process`, which waits on a
/// socket that a daemonising child can hold open for ever) and collecting its exit on a thread of
/// its own, so that nothing is left a zombie and nobody has to wait.
enum BrowserProcess {
    /// What the child's standard streams are.
    enum Streams {
        /// The caller's terminal, in the caller's process group: a terminal browser from `$BROWSER`.
        case inherit
        /// `/dev/null`, in a process group of its own, so the terminal's Ctrl-C does not reach the
        /// desktop browser that `xdg-open` starts.
        case detached
    }

    /// Starts `arguments` (the first is looked up on `PATH`) with `environment`.
    ///
    /// - Throws: `LoginError` `.browserUnavailable` when it cannot be started (not found, not
    ///   executable) or on a platform where LoginKit does not start browsers.
    static func start(_ arguments: [String], environment: [String: String], streams: Streams) throws -> ChildExit {
        guard let name = arguments.first else {
            throw LoginError(.browserUnavailable, "the browser command is empty")
        }
        #if canImport(Glibc)
            let child: pid_t
            do {
                child = try ChildProcess.spawn(
                    arguments, searchPath: true, environment: ChildProcess.childEnvironment(environment),
                    standardInput: streams == .detached ? .null : .inherit,
                    standardOutput: streams == .detached ? .null : .inherit,
                    standardError: streams == .detached ? .null : .inherit,
                    newProcessGroup: streams == .detached)
            } catch {
                throw LoginError(
                    .browserUnavailable, "could not start \"\(printableExcerpt(name))\": \(error.message)")
            }
            let childExit = ChildExit()
            let reaping = startDetachedThread {
                var status: Int32 = 0
                var reaped = waitpid(child, &status, 0)
                while reaped == -1 && errno == EINTR { reaped = waitpid(child, &status, 0) }
                // Reaped by someone else (a host that ignores SIGCHLD): the exit status is unknown; take
                // the browser as started, as the redirect will tell anyway.
                guard reaped == child else { return childExit.record(0) }
                childExit.record(ChildProcess.exitCode(fromWaitStatus: status))
            }
            if !reaping { childExit.record(0) }  // no thread: the child stays a zombie until the process ends
            return childExit
        #else
            throw LoginError(
                .browserUnavailable, "LoginKit starts browsers on Linux only; open the URL yourself")
        #endif
    }
}

/// A started child's exit status, for whoever waits for it.
final class ChildExit: Sendable {
    private struct State {
        var status: Int32?
        var waiters: [UInt64: CheckedContinuation<Int32, any Error>] = [:]
        var nextID: UInt64 = 0
        var cancelledEarly: Set<UInt64> = []
    }
    private let state = LockedState(State())

    /// Records the exit status and resumes every waiter.
    func record(_ status: Int32) {
        let waiters = state.withLock { state in
            state.status = status
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: status) }
    }

    /// Waits for the exit: the exit code, or 128 + the signal that ended it.
    ///
    /// - Throws: `CancellationError` when the waiting task is cancelled; the child runs on.
    func status() async throws -> Int32 {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Int32, any Error>) in
                let immediate = state.withLock { state -> Result<Int32, any Error>? in
                    if state.cancelledEarly.remove(id) != nil { return .failure(CancellationError()) }
                    if let status = state.status { return .success(status) }
                    state.waiters[id] = continuation
                    return nil
                }
                if let immediate { continuation.resume(with: immediate) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Int32, any Error>? in
                if let waiter = state.waiters.removeValue(forKey: id) { return waiter }
                if state.status == nil { state.cancelledEarly.insert(id) }
                return nil
            }
            waiter?.resume(throwing: CancellationError())
        }
    }
}
