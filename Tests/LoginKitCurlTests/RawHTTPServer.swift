import Foundation
import LoginKitHTTP
import LoginKitTestSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A minimal HTTP/1.1 server on 127.0.0.1 over POSIX sockets, each connection served by a thread
/// of its own, for tests that need what a real server does not let them choose: what becomes of a
/// request on a kept-alive connection. It reads one request at a time (the head up to its blank
/// line, then `Content-Length` bytes of body), records it, and asks `respond` what to do: answer it
/// and keep the connection alive, or close the connection without a word once the request was read
/// whole — a server that processed the request and then went away. `respond` runs on the
/// connection's thread and may block it.
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
        var accepted = 0
        /// The descriptors of the connections being served (`stop` shuts them down).
        var open: [Int32] = []
        /// Connections whose client closed them.
        var closedByClient: Set<Int> = []
        var closeWaiters: [(connection: Int, continuation: CheckedContinuation<Void, Never>)] = []
        var stopped = false
    }

    let port: Int
    private let listener: Int32
    private let respond: @Sendable (Request) -> Reply
    private let state = LockedState(State())

    /// Listens on an ephemeral port of 127.0.0.1 and starts accepting.
    init(respond: @escaping @Sendable (Request) -> Reply) throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        guard let port = bindToLoopback(descriptor, listen: true) else {
            close(descriptor)
            throw POSIXError(.EADDRNOTAVAIL)
        }
        self.listener = descriptor
        self.port = port
        self.respond = respond
        Thread.detachNewThread { [self] in acceptConnections() }
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    func url(_ path: String) -> String {
        "http://127.0.0.1:\(port)\(path)"
    }

    /// Every request read so far, in order.
    var requests: [Request] { state.withLock { $0.requests } }

    /// How many requests for `path` were read.
    func count(path: String) -> Int {
        state.withLock { $0.requests.filter { $0.path == path }.count }
    }

    /// How many connections were accepted.
    var connectionCount: Int { state.withLock { $0.accepted } }

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
        state.withLock { state in
            state.stopped = true
            for descriptor in state.open { shutdown(descriptor, Int32(SHUT_RDWR)) }
        }
        shutdown(listener, Int32(SHUT_RDWR))  // wakes `accept`, whose thread then closes it
    }

    // MARK: The threads

    private func acceptConnections() {
        defer { close(listener) }
        while true {
            let connection = accept(listener, nil, nil)
            if connection < 0 {
                if errno == EINTR { continue }
                return  // shut down by `stop`
            }
            let number = state.withLock { state -> Int? in
                guard !state.stopped else { return nil }
                state.accepted += 1
                state.open.append(connection)
                return state.accepted
            }
            guard let number else {
                close(connection)
                return
            }
            Thread.detachNewThread { [self] in serve(connection, number: number) }
        }
    }

    private func serve(_ connection: Int32, number: Int) {
        var buffer: [UInt8] = []
        var index = 0
        var closedByClient = true
        while let request = readRequest(from: connection, buffer: &buffer, connection: number, index: index) {
            state.withLock { $0.requests.append(request) }
            guard case .answer(let status, let body) = respond(request) else {
                closedByClient = false
                break
            }
            let text = "HTTP/1.1 \(status) Answer\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
            guard Self.transmit(Array(text.utf8), to: connection) else { break }
            index += 1
        }
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.open.removeAll { $0 == connection }
            guard closedByClient else { return [] }
            state.closedByClient.insert(number)
            let ready = state.closeWaiters.filter { $0.connection == number }.map(\.continuation)
            state.closeWaiters.removeAll { $0.connection == number }
            return ready
        }
        close(connection)
        for waiter in waiters { waiter.resume() }
    }

    /// The next request on `connection`, read whole; `nil` when the client closed it first.
    private func readRequest(from connection: Int32, buffer: inout [UInt8], connection number: Int, index: Int) -> Request? {
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        var headEnd: Int?
        while headEnd == nil {
            headEnd = Self.firstIndex(of: separator, in: buffer)
            if headEnd == nil, !Self.receive(from: connection, into: &buffer) { return nil }
        }
        guard let headEnd else { return nil }
        let head = String(decoding: buffer[..<headEnd], as: UTF8.self)
        let lines = head.split(separator: "\r\n", omittingEmptySubsequences: false)
        let requestLine = lines.first.map { $0.split(separator: " ") } ?? []
        var length = 0
        for line in lines.dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "content-length" {
                length = Int(parts[1].trimmingCharacters(in: .whitespaces)) ?? 0
            }
        }
        let bodyStart = headEnd + separator.count
        while buffer.count < bodyStart + length {
            guard Self.receive(from: connection, into: &buffer) else { return nil }
        }
        let body = String(decoding: buffer[bodyStart..<(bodyStart + length)], as: UTF8.self)
        buffer.removeFirst(bodyStart + length)
        return Request(
            connection: number, index: index,
            method: requestLine.first.map(String.init) ?? "", path: requestLine.dropFirst().first.map(String.init) ?? "",
            body: body)
    }

    private static func firstIndex(of separator: [UInt8], in buffer: [UInt8]) -> Int? {
        guard buffer.count >= separator.count else { return nil }
        for start in 0...(buffer.count - separator.count) where buffer[start..<(start + separator.count)].elementsEqual(separator) {
            return start
        }
        return nil
    }

    /// Appends what `connection` has to `buffer`; `false` at its end (or a failure).
    private static func receive(from connection: Int32, into buffer: inout [UInt8]) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(connection, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return false }
            buffer.append(contentsOf: chunk[..<count])
            return true
        }
    }

    /// Writes all of `bytes` (never raising `SIGPIPE` on a connection the client closed).
    private static func transmit(_ bytes: [UInt8], to connection: Int32) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { raw -> Int in
                guard let base = raw.baseAddress else { return -1 }
                return send(connection, base + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
            }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { return false }
            offset += written
        }
        return true
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

/// Blocks the calling thread until `instant`: the thread stops, as a stopped process's threads
/// do (a task's `sleep` would suspend instead and free the thread).
func blockThread(until instant: ContinuousClock.Instant) {
    while true {
        let remaining = ContinuousClock.now.duration(to: instant)
        guard remaining > .zero else { return }
        let (seconds, attoseconds) = remaining.components
        var request = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
        nanosleep(&request, nil)
    }
}
