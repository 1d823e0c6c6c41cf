import Foundation
import LoginKitHTTP
import LoginKitTestSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A minimal HTTP/1.1 server on 127.0.0.1 (a `LoopbackListener`: POSIX sockets, each connection
/// served by a thread of its own) for tests that need what a real server does not let them choose:
/// what becomes of a request on a kept-alive connection. It reads one request at a time (the head
/// up to its blank line, then `Content-Length` bytes of body), records it, and asks `respond` what
/// to do: answer it and keep the connection alive, or close the connection without a word once the
/// request was read whole — a server that processed the request and then went away. `respond` runs
/// on the connection's thread and may block it.
final class RawHTTPServer: Sendable {
    struct Request: Sendable {
        /// The connection it came on, counted from 1 in the order they were accepted.
        let connection: Int
        /// Its place among that connection's requests, counted from 0.
        let index: Int
        let method: String
        let path: String
        let body: String
    }

    enum Reply: Sendable {
        /// Answer with this status and JSON body; the connection stays open.
        case answer(status: Int, body: String)
        /// Close the connection without answering.
        case close
    }

    private struct State {
        var requests: [Request] = []
        /// Connections whose client closed them.
        var closedByClient: Set<Int> = []
        var closeWaiters: [(connection: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    var port: Int { listener.port }
    private let listener: LoopbackListener
    private let respond: @Sendable (Request) -> Reply
    /// Told each request whose answer was written to the connection.
    private let answered: @Sendable (Request) -> Void
    private let state = LockedState(State())

    /// Listens on an ephemeral port of 127.0.0.1 and starts accepting; `answered` hears of each
    /// answer once it is written.
    init(respond: @escaping @Sendable (Request) -> Reply, answered: @escaping @Sendable (Request) -> Void = { _ in }) throws {
        self.listener = try LoopbackListener()
        self.respond = respond
        self.answered = answered
        listener.start { [self] connection in serve(connection) }
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    func url(_ path: String) -> String {
        listener.url(path)
    }

    /// Every request read so far, in order.
    var requests: [Request] { state.withLock { $0.requests } }

    /// How many requests for `path` were read.
    func count(path: String) -> Int {
        state.withLock { $0.requests.filter { $0.path == path }.count }
    }

    /// How many connections were accepted.
    var connectionCount: Int { listener.acceptedCount }

    /// Returns once the client has closed connection `connection`.
    func awaitClosedByClient(_ connection: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let closed = state.withLock { state -> Bool in
                if state.closedByClient.contains(connection) { return true }
                state.closeWaiters.append((connection, continuation))
                return false
            }
            if closed { continuation.resume() }
        }
    }

    /// Stops accepting and ends every connection; the threads end on their own.
    func stop() {
        listener.stop()
    }

    // MARK: The threads

    private func serve(_ connection: LoopbackListener.Connection) {
        var connection = connection
        var index = 0
        var closedByClient = true
        while let received = connection.readRequest() {
            let request = Request(
                connection: connection.number, index: index, method: received.method, path: received.target,
                body: String(decoding: received.body, as: UTF8.self))
            state.withLock { $0.requests.append(request) }
            guard case .answer(let status, let body) = respond(request) else {
                closedByClient = false
                break
            }
            let text = "HTTP/1.1 \(status) Answer\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
            guard connection.transmit(Array(text.utf8)) else { break }
            answered(request)
            index += 1
        }
        guard closedByClient else { return }
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.closedByClient.insert(connection.number)
            let ready = state.closeWaiters.filter { $0.connection == connection.number }.map(\.continuation)
            state.closeWaiters.removeAll { $0.connection == connection.number }
            return ready
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// A one-shot signal between threads, over a pipe: ``wait()`` blocks the calling thread (it does
/// not suspend a task) until ``open()``. For test doubles that must hold a thread, not a task.
final class ThreadLatch: Sendable {
    private let readEnd: Int32
    private let writeEnd: Int32

    init() throws {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        readEnd = ends[0]
        writeEnd = ends[1]
    }

    func open() {
        var byte: UInt8 = 1
        _ = write(writeEnd, &byte, 1)
    }

    func wait() {
        var byte: UInt8 = 0
        while read(readEnd, &byte, 1) < 0, errno == EINTR {}
    }

    deinit {
        close(readEnd)
        close(writeEnd)
    }
}

