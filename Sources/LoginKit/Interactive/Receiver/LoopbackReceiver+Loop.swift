#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The receiver thread's side: its open connections, touched by this thread only (it is created on
/// the thread and never leaves it).
///
/// One `poll` covers the wake-up pipe, the listening socket and every open connection, so an idle
/// connection — a browser's speculative one, or one another local process opens and leaves — never
/// holds up the one that carries the callback. Each connection gets one request and one response,
/// then is closed. A connection is read as soon as it is accepted (a browser sends its request with
/// the connection), and up to ``maximumConnections`` stay open, each for at most
/// ``connectionLifetime``: idle connections opened before or after the browser's do not push it out
/// unless there are more of them than that.
final class ReceiverLoop {
    private struct Connection {
        let descriptor: Int32
        var received: [UInt8] = []
        let deadline: ContinuousClock.Instant
    }

    /// The most connections kept open at once; a new one closes the oldest. Far more than a browser
    /// opens (a few), so that a handful of idle connections from elsewhere cannot crowd it out.
    static let maximumConnections = 64
    /// How long a connection may take to send its request.
    static let connectionLifetime: Duration = .seconds(30)
    private static let readable = Int16(POLLIN)
    #if canImport(Darwin)
        private static let sendFlags: Int32 = 0
    #else
        private static let sendFlags = Int32(MSG_NOSIGNAL)  // a browser that hung up must not SIGPIPE the process
    #endif

    private let listener: Int32
    private let wakeUp: Int32
    private let path: String
    private let decide: @Sendable (String) -> ReceiverReply
    private var connections: [Connection] = []

    init(listener: Int32, wakeUp: Int32, path: String, decide: @escaping @Sendable (String) -> ReceiverReply) {
        self.listener = listener
        self.wakeUp = wakeUp
        self.path = path
        self.decide = decide
    }

    /// Serves until a reply carries an outcome (returned) or the wake-up pipe becomes readable
    /// (`nil`). Every connection is closed on return; the listening socket and the pipe are left to
    /// the owner.
    func run() -> Result<String, any Error>? {
        defer {
            for connection in connections { closeDescriptor(connection.descriptor) }
            connections.removeAll()
        }
        while true {
            var descriptors = [
                pollfd(fd: wakeUp, events: Self.readable, revents: 0),
                pollfd(fd: listener, events: Self.readable, revents: 0),
            ]
            descriptors += connections.map { pollfd(fd: $0.descriptor, events: Self.readable, revents: 0) }
            let ready = poll(&descriptors, nfds_t(descriptors.count), pollTimeout())
            if ready < 0 {
                let code = errno
                if code == EINTR { continue }
                return .failure(
                    LoginError(
                        .cannotListen, "waiting for the browser's redirect failed: \(systemErrorMessage(code))"))
            }
            if descriptors[0].revents != 0 { return nil }
            // Highest index first, so that closing one keeps the lower indices valid.
            for index in connections.indices.reversed() where descriptors[index + 2].revents != 0 {
                if let outcome = serve(at: index) { return outcome }
            }
            if descriptors[1].revents != 0, let outcome = acceptConnections() { return outcome }
            dropExpiredConnections()
        }
    }

    /// Reads what connection `index` sent and answers once its head is complete; the outcome when
    /// the answer ends the login.
    private func serve(at index: Int) -> Result<String, any Error>? {
        var chunk = [UInt8](repeating: 0, count: 4096)
        let count = recv(connections[index].descriptor, &chunk, chunk.count, 0)
        if count < 0 {
            let code = errno
            if code != EAGAIN && code != EWOULDBLOCK && code != EINTR { drop(at: index) }
            return nil
        }
        if count == 0 {
            drop(at: index)  // the peer closed without a complete request
            return nil
        }
        connections[index].received.append(contentsOf: chunk[0..<count])
        switch CallbackHTTPRequest.parse(connections[index].received) {
        case .incomplete:
            return nil
        case .tooLarge:
            respond(at: index, status: 431, page: CallbackPage.tooLarge)
            return nil
        case .invalid:
            respond(at: index, status: 400, page: CallbackPage.badRequest)
            return nil
        case .complete(let request):
            guard request.path == path else {
                respond(at: index, status: 404, page: CallbackPage.notFound)
                return nil
            }
            guard request.method == "GET" else {
                respond(at: index, status: 405, page: CallbackPage.methodNotAllowed, allow: "GET")
                return nil
            }
            let reply = decide(request.query)
            respond(at: index, status: reply.status, page: reply.page)
            return reply.outcome
        }
    }

    /// Accepts the connections waiting — at most ``maximumConnections`` in one pass, so that a stream
    /// of them never keeps the loop from the wake-up pipe and the open connections — and reads each
    /// at once: a request that came with its connection is answered before any later connection can
    /// push it out. The outcome when one of those answers ends the login.
    private func acceptConnections() -> Result<String, any Error>? {
        for _ in 0..<Self.maximumConnections {
            let descriptor = accept(listener, nil, nil)
            guard descriptor >= 0 else { return nil }  // EAGAIN: none left; anything else: next poll
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
            #if canImport(Darwin)
                var one: Int32 = 1
                _ = setsockopt(descriptor, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
            #endif
            if connections.count >= Self.maximumConnections { drop(at: 0) }
            connections.append(
                Connection(descriptor: descriptor, deadline: ContinuousClock.now + Self.connectionLifetime))
            if let outcome = serve(at: connections.count - 1) { return outcome }
        }
        return nil
    }

    /// Sends a response on connection `index`, then closes it.
    private func respond(at index: Int, status: Int, page: String, allow: String? = nil) {
        let descriptor = connections[index].descriptor
        sendAll(CallbackPage.response(status: status, page: page, allow: allow), to: descriptor)
        _ = shutdown(descriptor, Int32(SHUT_WR))
        drop(at: index)
    }

    /// Writes `bytes`, waiting up to a second at a time while the socket's buffer is full (a response
    /// is under 1 KiB, so in practice it goes out in one call).
    private func sendAll(_ bytes: [UInt8], to descriptor: Int32) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { raw -> Int in
                guard let base = raw.baseAddress else { return -1 }
                return send(descriptor, base + offset, raw.count - offset, Self.sendFlags)
            }
            if sent > 0 {
                offset += sent
                continue
            }
            let code = errno
            if sent < 0 && code == EINTR { continue }
            guard sent < 0, code == EAGAIN || code == EWOULDBLOCK else { return }
            var writable = [pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)]
            guard poll(&writable, 1, 1000) > 0 else { return }
        }
    }

    private func drop(at index: Int) {
        closeDescriptor(connections[index].descriptor)
        connections.remove(at: index)
    }

    private func dropExpiredConnections() {
        let now = ContinuousClock.now
        for index in connections.indices.reversed() where connections[index].deadline <= now {
            drop(at: index)
        }
    }

    /// Milliseconds until the next connection deadline; `-1` (no limit) when none is open.
    private func pollTimeout() -> Int32 {
        guard let earliest = connections.map(\.deadline).min() else { return -1 }
        let remaining = ContinuousClock.now.duration(to: earliest).components
        let milliseconds = remaining.seconds * 1000 + remaining.attoseconds / 1_000_000_000_000_000
        return Int32(clamping: max(0, milliseconds + 1))
    }
}
