import LoginKitHTTP

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The browser login's redirect receiver (RFC 8252 §7.3): a listening socket on a loopback address
/// that waits for the one `GET` on the callback path that ends the login.
///
/// It is a strict one-request-per-connection HTTP/1.x server of its own over POSIX sockets
/// (``CallbackHTTPRequest``), not a server framework; docs/browser-login.md argues why. Requests for
/// other paths get 404, other methods 405, malformed heads 400, heads over 8 KiB 431; every
/// connection is answered and closed. The socket is bound at `init` (so the port is known before the
/// browser opens) and closed as soon as the login's outcome is known, however it ends, or on
/// ``close()``: after that the port is free.
///
/// Serving runs on a thread of its own that sleeps in `poll` on the socket, its connections and a
/// wake-up pipe. ``start(path:decide:)`` starts that thread at once, without waiting for a task to
/// be scheduled: a browser that is quick while the cooperative pool is busy is answered all the
/// same. ``result()`` waits for the outcome; cancelling it writes to the pipe, and the thread closes
/// everything before the task resumes.
///
/// Concurrency contract: `Sendable`; `start` may be called once and `result` by one task at a time;
/// `close` from anywhere, any time.
package final class LoopbackReceiver: Sendable {
    /// The address bound, without brackets (`127.0.0.1`, `::1`).
    package let host: String
    /// The port bound.
    package let port: Int
    private let listener: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let state = LockedState(State())

    private struct State {
        /// No longer usable: closed, or its thread finished.
        var closed = false
        /// `start` was called.
        var started = false
        /// The thread owns the descriptors (it closes them when it ends).
        var running = false
        /// How serving ended, once it has.
        var result: Result<String, any Error>?
        /// The task waiting in `result()`.
        var waiter: CheckedContinuation<String, any Error>?
    }

    /// Binds the first of `addresses` that works (`127.0.0.1`, any free port, when empty).
    ///
    /// - Throws: `LoginError` `.invalidConfiguration` for a non-loopback address unless `allowsNonLoopback`;
    ///   `LoginError` `.cannotListen` when nothing can be bound.
    package init(addresses: [ListenAddress] = [], allowsNonLoopback: Bool = false) throws {
        let bound = try LoopbackSocket.listen(on: addresses, allowsNonLoopback: allowsNonLoopback)
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else {
            let code = errno
            closeDescriptor(bound.descriptor)
            throw LoginError(
                .cannotListen, "could not create the receiver's wake-up pipe: \(systemErrorMessage(code))")
        }
        for end in ends {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
        }
        listener = bound.descriptor
        host = bound.host
        port = bound.port
        wakeRead = ends[0]
        wakeWrite = ends[1]
    }

    deinit {
        close()
    }

    /// `http://127.0.0.1:PORT/callback` (IPv6 hosts in brackets).
    package var defaultRedirectURI: String {
        "http://\(host.contains(":") ? "[\(host)]" : host):\(port)/callback"
    }

    /// Starts serving: requests are answered from now on, on the receiver's own thread, until one on
    /// `path` gets a reply from `decide` (given the raw query string) that carries an outcome; then
    /// the listening socket and every connection are closed and ``result()`` returns that outcome.
    ///
    /// - Throws: `CancellationError` when the receiver was closed or already started;
    ///   `LoginError` `.cannotListen` when no thread can be started.
    package func start(path: String, decide: @escaping @Sendable (String) -> ReceiverReply) throws {
        let starts = state.withLock { state -> Bool in
            guard !state.closed, !state.started else { return false }
            state.started = true
            state.running = true
            return true
        }
        guard starts else { throw CancellationError() }
        let (listener, wakeRead) = (self.listener, self.wakeRead)
        let started = startDetachedThread {
            let outcome = ReceiverLoop(listener: listener, wakeUp: wakeRead, path: path, decide: decide).run()
            self.finish(with: outcome ?? .failure(CancellationError()))
        }
        if !started {
            let error = LoginError(.cannotListen, "could not start the redirect receiver's thread")
            finish(with: .failure(error))
            throw error
        }
    }

    /// Waits for the outcome of ``start(path:decide:)``: the authorization code, or the outcome's
    /// error.
    ///
    /// - Throws: the outcome's error; `CancellationError` when the task is cancelled (which closes
    ///   the receiver), the receiver was closed or never started; `LoginError` `.cannotListen`
    ///   when waiting itself failed.
    package func result() async throws -> String {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<String, any Error>) in
                let now = state.withLock { state -> Result<String, any Error>? in
                    if let result = state.result { return result }
                    guard state.started, state.waiter == nil else { return .failure(CancellationError()) }
                    state.waiter = continuation
                    return nil
                }
                if let now { continuation.resume(with: now) }
            }
        } onCancel: {
            close()
        }
    }

    /// Stops serving and frees the port. Idempotent; returns at once (a waiting `result()` resumes
    /// with `CancellationError` once its thread has closed the socket).
    package func close() {
        let closesHere = state.withLock { state -> Bool in
            guard !state.closed else { return false }
            state.closed = true
            guard state.running else { return true }
            // The thread owns the descriptors until `finish` marks it stopped, under this lock, so
            // the pipe is still open here. The write end is non-blocking: this never waits.
            var byte: UInt8 = 1
            _ = write(wakeWrite, &byte, 1)
            return false
        }
        if closesHere { closeDescriptors() }
    }

    /// Called when serving ends: marks the receiver closed, closes the descriptors, then hands the
    /// outcome to the waiting task, if any (else ``result()`` finds it).
    private func finish(with result: Result<String, any Error>) {
        state.withLock { state in
            state.running = false
            state.closed = true
        }
        closeDescriptors()  // before anyone learns the outcome: then the port is free
        let waiter = state.withLock { state -> CheckedContinuation<String, any Error>? in
            state.result = result
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(with: result)
    }

    private func closeDescriptors() {
        closeDescriptor(listener)
        closeDescriptor(wakeRead)
        closeDescriptor(wakeWrite)
    }
}
