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
/// browser opens) and closed as soon as ``receive(path:decide:)`` returns, however it returns, or on
/// ``close()``: after that the port is free.
///
/// The waiting runs on a thread of its own that sleeps in `poll` on the socket, its connections and a
/// wake-up pipe; cancelling the waiting task writes to the pipe, and the thread closes everything
/// before the task resumes.
///
/// Concurrency contract: `Sendable`; `receive` may be called once; `close` from anywhere, any time.
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
        /// `receive` was called.
        var started = false
        /// The thread owns the descriptors (it closes them when it ends).
        var running = false
    }

    /// Binds the first of `addresses` that works (`127.0.0.1`, any free port, when empty).
    ///
    /// - Throws: `ConfigurationError` for a non-loopback address unless `allowsNonLoopback`;
    ///   `BrowserLoginError` `.cannotListen` when nothing can be bound.
    package init(addresses: [ListenAddress] = [], allowsNonLoopback: Bool = false) throws {
        let bound = try LoopbackSocket.listen(on: addresses, allowsNonLoopback: allowsNonLoopback)
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else {
            let code = errno
            closeDescriptor(bound.descriptor)
            throw BrowserLoginError(
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

    /// Serves requests until one on `path` gets a reply from `decide` (given the raw query string)
    /// that carries an outcome, and returns that outcome's code or throws its error. Closes the
    /// listening socket and every connection before returning.
    ///
    /// - Throws: the outcome's error; `CancellationError` when the task is cancelled or the receiver
    ///   was closed; `BrowserLoginError` `.cannotListen` when waiting itself fails.
    package func receive(path: String, decide: @escaping @Sendable (String) -> ReceiverReply) async throws -> String {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<String, any Error>) in
                let start = state.withLock { state -> Bool in
                    guard !state.closed, !state.started else { return false }
                    state.started = true
                    state.running = true
                    return true
                }
                guard start else {
                    continuation.resume(throwing: CancellationError())
                    return
                }
                let (listener, wakeRead) = (self.listener, self.wakeRead)
                let started = startDetachedThread {
                    let result = ReceiverLoop(listener: listener, wakeUp: wakeRead, path: path, decide: decide).run()
                    self.finish()
                    continuation.resume(with: result ?? .failure(CancellationError()))
                }
                if !started {
                    finish()
                    continuation.resume(
                        throwing: BrowserLoginError(.cannotListen, "could not start the redirect receiver's thread"))
                }
            }
        } onCancel: {
            close()
        }
    }

    /// Stops waiting and frees the port. Idempotent; returns at once (a waiting `receive` resumes
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

    /// Called by the thread when it stops: marks the receiver closed and closes the descriptors.
    private func finish() {
        state.withLock { state in
            state.running = false
            state.closed = true
        }
        closeDescriptors()
    }

    private func closeDescriptors() {
        closeDescriptor(listener)
        closeDescriptor(wakeRead)
        closeDescriptor(wakeWrite)
    }
}
