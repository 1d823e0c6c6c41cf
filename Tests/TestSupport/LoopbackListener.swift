import Foundation
import LoginKitHTTP
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The socket half of the tests' hand-made HTTP/1.1 servers (POSIX sockets, for what a real server
/// does not let a test choose): a listener on an ephemeral port of 127.0.0.1 that serves each
/// connection it accepts on a thread of its own. Its descriptors are close-on-exec, so a child
/// process another test spawns holds none of them open.
public final class LoopbackListener: Sendable {
    /// One accepted connection: its socket, the request reader over it, and the writer.
    public struct Connection: Sendable {
        /// Counted from 1 in the order the connections were accepted.
        public let number: Int
        private let descriptor: Int32
        /// What was read past the last request returned.
        private var buffer: [UInt8] = []

        init(descriptor: Int32, number: Int) {
            self.descriptor = descriptor
            self.number = number
        }

        /// The next request, read whole: its head up to the blank line, then `Content-Length`
        /// bytes of body (none without that field); `nil` when the client closed the connection first.
        public mutating func readRequest() -> LoopbackHTTPRequest? {
            guard let headEnd = receiveHead() else { return nil }
            let head = String(decoding: buffer[..<headEnd], as: UTF8.self)
            let lines = head.split(separator: "\r\n", omittingEmptySubsequences: false)
            let requestLine = lines.first.map { $0.split(separator: " ") } ?? []
            var headers: [(name: String, value: String)] = []
            for line in lines.dropFirst() {
                let parts = line.split(separator: ":", maxSplits: 1)
                guard parts.count == 2 else { continue }
                headers.append((name: parts[0].lowercased(), value: parts[1].trimmingCharacters(in: .whitespaces)))
            }
            // The last `Content-Length` counts; one that is no number (or below zero) counts as 0.
            let length = max(0, headers.last { $0.name == "content-length" }.flatMap { Int($0.value) } ?? 0)
            let bodyStart = headEnd + Self.blankLine.count
            while buffer.count < bodyStart + length {
                guard receive() else { return nil }
            }
            let body = Array(buffer[bodyStart..<(bodyStart + length)])
            buffer.removeFirst(bodyStart + length)
            return LoopbackHTTPRequest(
                method: requestLine.first.map(String.init) ?? "",
                target: requestLine.dropFirst().first.map(String.init) ?? "",
                headers: headers, body: body)
        }

        /// Writes all of `bytes` (never raising `SIGPIPE` on a connection the client closed);
        /// `false` when the connection failed first.
        public func transmit(_ bytes: [UInt8]) -> Bool {
            var offset = 0
            while offset < bytes.count {
                let written = bytes.withUnsafeBytes { raw -> Int in
                    guard let base = raw.baseAddress else { return -1 }
                    return send(descriptor, base + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
                }
                if written < 0, errno == EINTR { continue }
                guard written > 0 else { return false }
                offset += written
            }
            return true
        }

        private static let blankLine: [UInt8] = Array("\r\n\r\n".utf8)

        /// Where the head in `buffer` ends (its blank line), reading until it has come; `nil` when
        /// the connection ended first.
        private mutating func receiveHead() -> Int? {
            while true {
                if let end = Self.firstIndex(of: Self.blankLine, in: buffer) { return end }
                guard receive() else { return nil }
            }
        }

        private static func firstIndex(of separator: [UInt8], in buffer: [UInt8]) -> Int? {
            guard buffer.count >= separator.count else { return nil }
            let starts = 0...(buffer.count - separator.count)
            return starts.first { buffer[$0..<($0 + separator.count)].elementsEqual(separator) }
        }

        /// Appends what the connection has to `buffer`; `false` at its end (or a failure).
        private mutating func receive() -> Bool {
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { return false }
                buffer.append(contentsOf: chunk[..<count])
                return true
            }
        }
    }

    /// The port it listens on.
    public let port: Int
    private let descriptor: Int32

    private struct State {
        var accepted = 0
        /// The descriptors of the connections being served (`stop` shuts them down).
        var open: [Int32] = []
        var stopped = false
    }
    private let state = LockedState(State())

    /// Listens on an ephemeral port of 127.0.0.1; ``start(serving:)`` starts accepting.
    public init() throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        guard let port = bindToLoopback(descriptor, listen: true) else {
            close(descriptor)
            throw POSIXError(.EADDRNOTAVAIL)
        }
        self.descriptor = descriptor
        self.port = port
    }

    /// Accepts connections on a thread of its own until ``stop()``: `serve` runs on a new thread for
    /// each, and may block it; the connection is closed when `serve` returns. Call it once.
    public func start(serving serve: @escaping @Sendable (Connection) -> Void) {
        Thread.detachNewThread { [self] in acceptConnections(serve) }
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    public func url(_ path: String) -> String {
        "http://127.0.0.1:\(port)\(path)"
    }

    /// How many connections were accepted.
    public var acceptedCount: Int { state.withLock { $0.accepted } }

    /// Stops accepting and ends every connection; the threads end on their own.
    public func stop() {
        state.withLock { state in
            state.stopped = true
            for descriptor in state.open { shutdown(descriptor, Int32(SHUT_RDWR)) }
        }
        shutdown(descriptor, Int32(SHUT_RDWR))  // wakes `accept`, whose thread then closes it
    }

    private func acceptConnections(_ serve: @escaping @Sendable (Connection) -> Void) {
        defer { close(descriptor) }
        while true {
            let connection = accept(descriptor, nil, nil)
            if connection < 0 {
                if errno == EINTR { continue }
                return  // shut down by `stop`
            }
            _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
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
            Thread.detachNewThread { [self] in
                serve(Connection(descriptor: connection, number: number))
                state.withLock { $0.open.removeAll { $0 == connection } }
                close(connection)
            }
        }
    }
}

/// A request as ``LoopbackListener/Connection/readRequest()`` read it.
public struct LoopbackHTTPRequest: Sendable {
    /// The request line's method, `""` when it has none.
    public let method: String
    /// The request line's target (path and query), `""` when it has none.
    public let target: String
    /// The header fields in order: names lowercased, values without surrounding spaces.
    public let headers: [(name: String, value: String)]
    /// The `Content-Length` bytes after the head.
    public let body: [UInt8]

    /// The values of the header fields named `name` (lowercase), in order.
    public func values(of name: String) -> [String] {
        headers.filter { $0.name == name }.map(\.value)
    }
}
